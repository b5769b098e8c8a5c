// mpverify sweep PLAN.json --out DIR [--workers N] [--shard I/N] [--json] [--quiet]
// mpverify sweep merge DIR [--json]
// Trains every run of a plan (sweep/sweep_plan.h), each as its own `mpverify train` process, then gates every
// candidate against the plan's baseline (sweep/sweep_summary.h). Started again in the same DIR it resumes:
// finished runs are kept, the others trained from their start. With --shard I/N it trains only runs
// I, I+N, I+2N, ... (a Slurm array task) and `sweep merge DIR` finishes once every shard did. Under mpirun
// (sweep/sweep_mpi.h) rank 0 hands the runs out and the other ranks train them.
// Exit codes: 0 every candidate equivalent (or no gate), 1 one not equivalent, 3 one inconclusive,
// 2 bad input or a run that failed.
#include <cmath>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/mpi_session.h"
#include "cli/sweep_mpi.h"
#include "cli/train_arguments.h"
#include "sweep/local_workers.h"
#include "sweep/run_process.h"
#include "sweep/sweep_directory.h"
#include "sweep/sweep_summary.h"

namespace mpverify::cli {

namespace {

namespace fs = std::filesystem;

struct SweepOptions {
  std::string plan, out, shard, merge_dir;
  std::size_t workers = 1;
  double rank_timeout_s = 60;
  bool json = false, quiet = false;
};

// More processes than any machine runs at once; also what a negative count wraps past.
constexpr std::size_t kMaxWorkers = 4096;

struct Shard {
  std::size_t index = 0, count = 1;
};

Shard parse_shard(const std::string& text) {
  if (text.empty()) return {};
  const std::size_t slash = text.find('/');
  Shard s;
  try {
    std::size_t used_i = 0, used_n = 0;
    if (slash == std::string::npos) throw std::invalid_argument("no slash");
    s.index = std::stoul(text.substr(0, slash), &used_i);
    s.count = std::stoul(text.substr(slash + 1), &used_n);
    if (used_i != slash || used_n != text.size() - slash - 1 || text[0] == '-' || text[slash + 1] == '-')
      throw std::invalid_argument("trailing characters");
  } catch (const std::exception&) {
    throw UsageError("--shard '" + text + "': write I/N, e.g. 0/4 (N shards numbered 0 to N-1, as Slurm's "
                     "$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT with --array=0-3)");
  }
  if (s.count < 1 || s.index >= s.count || s.count > sweep::kMaxSweepRuns)
    throw UsageError("--shard '" + text + "': I must be 0 to N-1 and N from 1 to " +
                     std::to_string(sweep::kMaxSweepRuns) + " (a plan's most runs)");
  return s;
}

// The plan and each candidate's configuration, validated before anything is written.
struct ValidPlan {
  sweep::SweepPlan plan;
  std::vector<nlohmann::json> configs;
};

// Every key a candidate sets must be an option of train taking that kind of value: a false flag adds no
// argument, so the parser alone would never see a misspelt or hostile name.
void check_train_settings(const sweep::SweepPlan& plan, const fs::path& file) {
  const TrainSettingCheck check = train_setting_check();
  for (const sweep::SweepCandidate& c : plan.candidates)
    for (const auto& [key, value] : c.train.items()) try {
        check(key, value);
      } catch (const UsageError& e) {
        throw std::invalid_argument(file.string() + ": plan: candidate " + c.name + ": " + e.what());
      }
}

ValidPlan validated(const std::function<sweep::SweepPlan()>& read, const fs::path& file) {
  ValidPlan v;
  with_usage_errors([&] {
    v.plan = read();
    check_train_settings(v.plan, file);
    try {
      v.configs = sweep::candidate_configs(v.plan, [](const std::vector<std::string>& arguments) {
        try {
          return train_config_from_arguments(arguments);
        } catch (const UsageError& e) {
          throw std::invalid_argument(e.what());  // candidate_configs names the candidate
        }
      });
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(file.string() + ": " + e.what());
    }
  });
  return v;
}

int print_summary(const nlohmann::ordered_json& summary, const fs::path& out, bool json) {
  if (json) std::cout << summary.dump(2) << "\n";
  else std::cout << sweep::summary_table(summary) << "\nfiles: " << (out / "sweep.json").string() << ", "
                 << (out / "summary.md").string() << "\n";
  return sweep::sweep_exit_code(summary);
}

// Under mpirun: rank 0 hands the runs out, the others train them (cli/sweep_mpi.h).
int run_mpi(const SweepOptions& o) {
  if (o.workers != 1 || !o.shard.empty())
    throw UsageError("under mpirun the ranks are the workers: drop --workers and --shard");
  MpiSweepJob job;
  job.plan_file = o.plan;
  job.out = o.out;
  job.quiet = o.quiet;
  job.rank_timeout_s = o.rank_timeout_s;
  job.validate = [&] {
    ValidPlan v = validated([&] { return sweep::read_sweep_plan(o.plan); }, o.plan);
    return std::pair{std::move(v.plan), std::move(v.configs)};
  };
  job.print = [&](const nlohmann::ordered_json& summary) { return print_summary(summary, o.out, o.json); };
  return run_mpi_sweep(job);
}

int run_sweep(const SweepOptions& o) {
  if (o.plan.empty() || o.out.empty())
    throw UsageError("give the plan and the output directory: mpverify sweep PLAN.json --out DIR (or: mpverify sweep "
                     "merge DIR)");
  if (o.workers < 1 || o.workers > kMaxWorkers)
    throw UsageError("--workers must be 1 to " + std::to_string(kMaxWorkers) + " (processes at a time)");
  if (!std::isfinite(o.rank_timeout_s))  // CLI::Range lets NaN through: every comparison with it is false
    throw UsageError("--rank-timeout must be a number of seconds from 2 to 86400");
  if (launched_by_mpi()) return run_mpi(o);
  const Shard shard = parse_shard(o.shard);
  const ValidPlan v = validated([&] { return sweep::read_sweep_plan(o.plan); }, o.plan);
  const fs::path out = o.out;
  bool resuming = false;
  with_usage_errors([&] { resuming = sweep::open_sweep_directory(out, v.plan); });
  const std::vector<std::size_t> pending = sweep::unfinished_runs(v.plan, out, v.configs, shard.index, shard.count);
  const std::size_t runs = v.plan.runs.size();  // runs index, index + count, ... below runs
  const std::size_t mine = shard.index < runs ? (runs - 1 - shard.index) / shard.count + 1 : 0;
  sweep::SweepProgress progress(mine, mine - pending.size(), o.workers, o.quiet);
  if (resuming)
    progress.say("sweep: resuming in " + out.string() + ": " + std::to_string(mine - pending.size()) + " of " +
                 std::to_string(mine) + " runs finished earlier and are kept");
  try {
    sweep::run_with_workers(v.plan, out, pending, sweep::own_executable(), o.workers, progress);
  } catch (const sweep::SweepRunError& e) {
    progress.end();
    throw UsageError(std::string("a run failed: ") + e.what());
  }
  progress.end();
  if (shard.count > 1) {
    if (o.json)
      std::cout << nlohmann::ordered_json{{"shard", shard.index}, {"shards", shard.count}, {"runs", mine},
                                          {"finished", true}, {"merge", "mpverify sweep merge " + out.string()}}
                       .dump(2)
                << "\n";
    else
      std::cout << "shard " << shard.index << "/" << shard.count << ": its " << mine << " runs are finished; once "
                << "every shard's are: mpverify sweep merge " << out.string() << "\n";
    return 0;
  }
  return print_summary(sweep::finish_sweep(v.plan, out, v.configs), out, o.json);
}

int run_merge(const SweepOptions& o) {
  const fs::path out = o.merge_dir;
  const ValidPlan v = validated([&] { return sweep::read_directory_plan(out); }, out / "plan.json");
  const std::vector<std::size_t> missing = sweep::unfinished_runs(v.plan, out, v.configs);
  if (!missing.empty()) {
    std::string names;
    for (std::size_t k = 0; k < missing.size() && k < 5; ++k)
      names += (k ? ", " : "") + v.plan.runs[missing[k]].dir.string();
    if (missing.size() > 5) names += ", ...";
    throw UsageError(out.string() + ": " + std::to_string(missing.size()) + " of " +
                     std::to_string(v.plan.runs.size()) + " runs are not finished (" + names +
                     "); finish the shards that train them, or train them here with mpverify sweep " +
                     (out / "plan.json").string() + " --out " + out.string());
  }
  return print_summary(sweep::finish_sweep(v.plan, out, v.configs), out, o.json);
}

}  // namespace

void add_sweep_command(CLI::App& root, std::vector<Command>& commands) {
  auto o = std::make_shared<SweepOptions>();
  auto* app = root.add_subcommand(
      "sweep",
      "Train every run of a plan (axes such as recipe x scaler x seed over a base configuration), each as its own\n"
      "`mpverify train` process, then gate every candidate against the plan's baseline (docs/sweep.md).\n"
      "Started again in the same --out it resumes; the files are the same bytes however the plan ran.\n"
      "Example: mpverify sweep plan.json --out sweeps/fp8 --workers 2");
  app->add_option("plan", o->plan, "The plan (JSON: train, axes with seed, overrides, gate)")->type_name("PLAN.json");
  app->add_option("--out", o->out, "The sweep's directory (one ensemble per candidate, sweep.json, summary.md)");
  app->add_option("--workers", o->workers, "Runs trained at a time on this machine (processes)")->capture_default_str();
  app->add_option("--shard", o->shard, "I/N: train only runs I, I+N, I+2N, ... (N shards numbered from 0), then "
                                       "`mpverify sweep merge DIR` once every shard finished");
  app->add_option("--rank-timeout", o->rank_timeout_s,
                  "Under mpirun --enable-recovery: seconds a training rank may be silent before its run is handed to "
                  "another rank (the ranks send a heartbeat every second)")
      ->capture_default_str()
      ->check(CLI::Range(2.0, 86400.0));
  app->add_flag("--json", o->json, "Print sweep.json on standard output instead of the table");
  app->add_flag("--quiet", o->quiet, "No progress on standard error");
  auto* merge = app->add_subcommand("merge", "Once every shard of a sweep finished: write the ensembles and the "
                                             "gate's verdicts (what an unsharded sweep writes at its end)");
  merge->add_option("dir", o->merge_dir, "The sweep's directory (holding plan.json)")->required()->type_name("DIR");
  merge->add_flag("--json", o->json, "Print sweep.json on standard output instead of the table");
  commands.push_back({app, [o, merge] { return merge->parsed() ? run_merge(*o) : run_sweep(*o); }});
}

}  // namespace mpverify::cli
