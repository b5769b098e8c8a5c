// `mpverify sweep`: the files under DIR are the same bytes however the plan ran (one worker, two workers,
// shards then merge, a run killed in flight and redone, the sweep itself killed and started again); what it
// writes is what `train --seeds`, `gate` and `compare-runs` read; bad input exits 2 and writes nothing.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "io/json_text.h"
#include "support/directory_files.h"
#include "support/kill_points.h"
#include "support/run_command.h"

namespace {

namespace fs = std::filesystem;
using mpverify::test::Ended;
using mpverify::test::files_under;
using mpverify::test::run_command;
using mpverify::test::run_program;

// Two recipes x three seeds of a small MLP: six runs of about a second each.
const char* kPlan = R"({"train": {"model": "mlp", "data": "synthetic", "backend": "emu", "steps": 8,
  "train-size": 256, "test-size": 128, "batch-size": 32},
  "axes": {"recipe": ["fp32", "o2"], "scaler": ["torch"], "seed": [1, 2, 3]},
  "gate": {"baseline": {"recipe": "fp32"}, "metric": "accuracy", "margin": 5}})";

// This process's own folder: ctest runs each test as its own process, several at a time, and each makes the
// reference sweep it compares with.
fs::path scratch() {
  static const fs::path dir = [] {
    const fs::path d = fs::temp_directory_path() / ("mpverify-sweep-test-" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

// Removed when the process's tests end.
class RemoveScratch : public ::testing::Environment {
 public:
  void TearDown() override { fs::remove_all(scratch()); }
};
[[maybe_unused]] const ::testing::Environment* const kRemoveScratch =
    ::testing::AddGlobalTestEnvironment(new RemoveScratch);

fs::path fresh(const std::string& name) {
  const fs::path dir = scratch() / name;
  fs::remove_all(dir);
  return dir;
}

fs::path write_plan(const std::string& name, const std::string& text) {
  const fs::path file = scratch() / ("plan-" + name + ".json");
  std::ofstream(file) << text;
  return file;
}

std::vector<std::string> sweep_args(const fs::path& plan, const fs::path& out, const std::vector<std::string>& extra) {
  std::vector<std::string> args{MPVERIFY_BIN, "sweep", plan.string(), "--out", out.string(), "--quiet"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// The uninterrupted one-worker sweep every other way of running the plan must equal, made once.
const std::map<std::string, std::string>& reference() {
  static const std::map<std::string, std::string> files = [] {
    const fs::path out = fresh("reference");
    const Ended e = run_program(sweep_args(write_plan("main", kPlan), out, {"--workers", "1"}), "");
    EXPECT_FALSE(e.killed);
    EXPECT_EQ(e.exit_code, 0);  // equivalent within 5 points
    return files_under(out);
  }();
  return files;
}

TEST(SweepCli, WritesOneEnsemblePerCandidateAndTheGatesVerdicts) {
  const auto& files = reference();
  for (const char* f : {"plan.json", "sweep.json", "summary.md", "recipe-fp32_scaler-torch/ensemble.json",
                        "recipe-o2_scaler-torch/ensemble.json", "recipe-o2_scaler-torch/seed-3/summary.json",
                        "recipe-o2_scaler-torch/seed-3/steps.jsonl"})
    EXPECT_TRUE(files.count(f)) << f;
  const nlohmann::json sweep = nlohmann::json::parse(files.at("sweep.json"));
  EXPECT_EQ(sweep["runs"], 6);
  EXPECT_EQ(sweep["baseline"], "recipe-fp32_scaler-torch");
  ASSERT_EQ(sweep["candidates"].size(), 2u);
  EXPECT_EQ(sweep["candidates"][0]["role"], "baseline");
  const nlohmann::json& gate = sweep["candidates"][1]["gate"];
  // The same decision as `mpverify gate` on the same two ensembles (the gate's own command, run here).
  const fs::path out = scratch() / "reference";
  const auto by_gate = run_command(std::string(MPVERIFY_BIN) + " gate --baseline " +
                                       (out / "recipe-fp32_scaler-torch").string() + " --candidate " +
                                       (out / "recipe-o2_scaler-torch").string() + " --metric accuracy --margin 5 --json",
                                   "");
  const nlohmann::json direct = nlohmann::json::parse(by_gate.out);
  EXPECT_EQ(gate["verdict"], direct["verdict"]);
  EXPECT_EQ(gate["difference"], direct["difference"]);
  EXPECT_EQ(gate["ci_lower"], direct["ci_lower"]);
  EXPECT_EQ(gate["method"], "paired");
  EXPECT_EQ(gate["baseline"], "recipe-fp32_scaler-torch");  // named relative to DIR, not by where DIR is
  // Each ensemble is what `train --seeds 1,2,3` writes for the same options.
  const fs::path by_train = fresh("by-train");
  ASSERT_EQ(run_program({MPVERIFY_BIN, "train", "--model", "mlp", "--data", "synthetic", "--backend", "emu", "--steps",
                         "8", "--train-size", "256", "--test-size", "128", "--batch-size", "32", "--recipe", "o2",
                         "--scaler", "torch", "--seeds", "1,2,3", "--quiet", "--out", by_train.string()},
                        "")
                .exit_code,
            0);
  for (const auto& [name, bytes] : files_under(by_train))
    EXPECT_EQ(files.at("recipe-o2_scaler-torch/" + name), bytes) << name;
  // compare-runs reads the runs.
  EXPECT_EQ(run_command(std::string(MPVERIFY_BIN) + " compare-runs " + (out / "recipe-fp32_scaler-torch/seed-1").string() +
                            " " + (out / "recipe-o2_scaler-torch/seed-1").string() + " --json > /dev/null",
                        "")
                .exit_code,
            0);
}

// A gate in rounds: each candidate's verdict is `gate --sequential` on its ensembles, and the sweep exits with it.
TEST(SweepCli, AGateInRoundsGivesTheSequentialGatesVerdict) {
  std::string plan = kPlan;
  plan.replace(plan.find("\"margin\": 5"), 11, "\"margin\": 5, \"sequential\": [2, 3, 4]");
  const fs::path out = fresh("rounds");
  const Ended e = run_program(sweep_args(write_plan("rounds", plan), out, {"--workers", "1"}), "");
  ASSERT_FALSE(e.killed);
  const nlohmann::json sweep = nlohmann::json::parse(files_under(out).at("sweep.json"));
  const nlohmann::json& gate = sweep["candidates"][1]["gate"];
  ASSERT_TRUE(gate.contains("sequential")) << gate.dump();
  const auto by_gate = run_command(std::string(MPVERIFY_BIN) + " gate --baseline " +
                                       (out / "recipe-fp32_scaler-torch").string() + " --candidate " +
                                       (out / "recipe-o2_scaler-torch").string() +
                                       " --metric accuracy --margin 5 --sequential 2,3,4 --json",
                                   "");
  const nlohmann::json direct = nlohmann::json::parse(by_gate.out);
  EXPECT_EQ(gate["sequential"], direct["sequential"]);
  EXPECT_EQ(gate["verdict"], direct["verdict"]);
  EXPECT_EQ(e.exit_code, by_gate.exit_code);
  // Three seeds reach look 2 of 3; undecided there, the next look needs a fourth.
  if (direct["verdict"] == "inconclusive") {
    EXPECT_EQ(direct["sequential"]["next_look"], 4);
  }
}

// A sweep in rounds: the same plan with its seed axis grown runs in the same directory, keeps the finished
// runs (their files untouched) and ends with the bytes of the whole plan run at once.
TEST(SweepCli, MoreSeedsInTheSameDirectoryKeepTheFinishedRuns) {
  std::string first = kPlan;
  first.replace(first.find("\"seed\": [1, 2, 3]"), 17, "\"seed\": [1, 2]");
  const fs::path out = fresh("more-seeds");
  const Ended e1 = run_program(sweep_args(write_plan("two-seeds", first), out, {"--workers", "1"}), "");
  ASSERT_FALSE(e1.killed);
  const fs::path kept = out / "recipe-o2_scaler-torch" / "seed-2" / "summary.json";
  const auto written = fs::last_write_time(kept);
  const Ended e2 = run_program(sweep_args(write_plan("main", kPlan), out, {"--workers", "1"}), "");
  ASSERT_EQ(e2.exit_code, 0);
  EXPECT_EQ(fs::last_write_time(kept), written) << "a finished run was trained again";
  EXPECT_EQ(files_under(out), reference());
  // Seeds taken away, or a seed put first, are another plan.
  std::string reordered = kPlan;
  reordered.replace(reordered.find("\"seed\": [1, 2, 3]"), 17, "\"seed\": [3, 1, 2, 4]");
  const Ended e3 = run_program(sweep_args(write_plan("reordered", reordered), out, {"--workers", "1"}), "");
  EXPECT_EQ(e3.exit_code, 2);
  EXPECT_EQ(files_under(out), reference());
}

TEST(SweepCli, TwoWorkersWriteTheSameBytesAsOne) {
  const fs::path out = fresh("two-workers");
  ASSERT_EQ(run_program(sweep_args(write_plan("main", kPlan), out, {"--workers", "2"}), "").exit_code, 0);
  EXPECT_EQ(files_under(out), reference());
}

TEST(SweepCli, ShardsThenMergeWriteTheSameBytes) {
  const fs::path out = fresh("shards");
  const fs::path plan = write_plan("main", kPlan);
  for (const char* shard : {"1/3", "0/3", "2/3"}) {
    ASSERT_EQ(run_program(sweep_args(plan, out, {"--shard", shard}), "").exit_code, 0) << shard;
    EXPECT_FALSE(fs::exists(out / "sweep.json")) << "a shard leaves the end to merge";
  }
  ASSERT_EQ(run_program({MPVERIFY_BIN, "sweep", "merge", out.string()}, "").exit_code, 0);
  EXPECT_EQ(files_under(out), reference());
}

TEST(SweepCli, MergeRefusesWhileAShardIsUnfinished) {
  const fs::path out = fresh("merge-early");
  const auto shard = run_command(std::string(MPVERIFY_BIN) + " sweep " + write_plan("main", kPlan).string() + " --out " +
                                     out.string() + " --shard 0/2 --quiet --json",
                                 "");
  ASSERT_EQ(shard.exit_code, 0);
  const nlohmann::json said = nlohmann::json::parse(shard.out);  // --json: JSON on a shard too
  EXPECT_EQ(said["runs"], 3);
  EXPECT_EQ(said["shards"], 2);
  const auto r = run_command(std::string(MPVERIFY_BIN) + " sweep merge " + out.string(), "", true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("3 of 6 runs are not finished"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("seed-2"), std::string::npos) << r.out;  // run 1 (fp32, seed 2) is shard 1's
  EXPECT_FALSE(fs::exists(out / "sweep.json"));
}

TEST(SweepCli, ARunKilledInFlightIsRedoneAndChangesNothing) {
  // Every run's first start is killed (SIGKILL) halfway through writing its summary.json; the sweep starts it
  // again (without the fault injection) and the files are those of an uninterrupted sweep.
  const fs::path out = fresh("run-killed");
  const fs::path log = scratch() / "run-killed.log";
  const std::vector<std::string> args{MPVERIFY_BIN, "sweep", write_plan("main", kPlan).string(), "--out", out.string(),
                                      "--workers", "2"};
  const Ended e = run_program(args, "summary.json:1", log);
  ASSERT_FALSE(e.killed);
  ASSERT_EQ(e.exit_code, 0);
  EXPECT_EQ(files_under(out), reference());
  const std::string said = mpverify::test::file_bytes(log);
  EXPECT_NE(said.find("killed by signal 9"), std::string::npos) << said;
  EXPECT_NE(said.find("training it again"), std::string::npos) << said;
}

TEST(SweepCli, KilledWhileFinishingAndStartedAgainKeepsTheRuns) {
  // The sweep's own writes: plan.json, then each candidate's ensemble.json. Killed at the second ensemble.json,
  // every run had finished; started again, none is trained again and the files equal the reference.
  const fs::path out = fresh("killed-finishing");
  const auto args = sweep_args(write_plan("main", kPlan), out, {});
  ASSERT_TRUE(run_program(args, "ensemble.json:2").killed);
  const auto finished = mpverify::test::finished_runs(out);
  ASSERT_EQ(finished.size(), 6u);
  ASSERT_EQ(run_program(args, "").exit_code, 0);
  EXPECT_EQ(mpverify::test::finished_runs(out), finished);  // the same files, not rewritten
  EXPECT_EQ(files_under(out), reference());
}

TEST(SweepCli, KilledWhileTrainingAndStartedAgainRedoesOnlyTheUnfinishedRuns) {
  const fs::path out = fresh("killed-training");
  const auto args = sweep_args(write_plan("main", kPlan), out, {"--workers", "2"});
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  // Killed once the first runs finished, while others train.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (mpverify::test::finished_runs(out).size() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const auto finished = mpverify::test::finished_runs(out);
  ASSERT_GE(finished.size(), 2u);
  ASSERT_LT(finished.size(), 6u) << "the sweep ended before it was killed; the test proves nothing";
  ASSERT_EQ(run_program(args, "").exit_code, 0);
  const auto after = mpverify::test::finished_runs(out);
  for (const auto& [summary, written] : finished) EXPECT_EQ(after.at(summary), written) << summary << " was redone";
  EXPECT_EQ(files_under(out), reference());
}

// --- MPI: rank 0 hands out, the other ranks train ---------------------------------------------------------

// mpirun as root, with more ranks than cores (CI's machine has two).
std::vector<std::string> mpirun(int ranks, const std::vector<std::string>& more) {
  std::vector<std::string> args{MPVERIFY_MPIEXEC, "--allow-run-as-root", "--oversubscribe", "-n", std::to_string(ranks)};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

#define SKIP_WITHOUT_MPI()                                                                          \
  if (std::string(MPVERIFY_MPIEXEC).empty()) GTEST_SKIP() << "this build has no MPI (cmake/Mpi.cmake)"

TEST(SweepCli, MpiRanksWriteTheSameBytes) {
  SKIP_WITHOUT_MPI();
  const fs::path out = fresh("mpi");
  const fs::path log = scratch() / "mpi.log";
  auto args = mpirun(3, {MPVERIFY_BIN, "sweep", write_plan("main", kPlan).string(), "--out", out.string()});
  const Ended e = run_program(args, "", log);
  ASSERT_EQ(e.exit_code, 0) << mpverify::test::file_bytes(log);
  EXPECT_EQ(files_under(out), reference());
}

TEST(SweepCli, MpiRefusesABadPlanOnEveryRank) {
  SKIP_WITHOUT_MPI();
  const fs::path out = fresh("mpi-bad");
  const auto args = mpirun(3, {MPVERIFY_BIN, "sweep", write_plan("mpi-bad", "{\"axes\": {}}").string(), "--out",
                               out.string()});
  const fs::path log = scratch() / "mpi-bad.log";
  EXPECT_EQ(run_program(args, "", log).exit_code, 2);
  EXPECT_NE(mpverify::test::file_bytes(log).find("add \"seed\""), std::string::npos) << mpverify::test::file_bytes(log);
  EXPECT_FALSE(fs::exists(out));
}

// The pid of the sweep process that is MPI rank `rank` of the job writing into `out`, once it has a child (a
// run in flight); -1 when there is none yet.
pid_t training_rank(int rank, const fs::path& out) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = mpverify::test::file_bytes(e.path() / "cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(" sweep ") == std::string::npos || cmdline.find(out.string()) == std::string::npos) continue;
    std::string environ = mpverify::test::file_bytes(e.path() / "environ");
    if (environ.find(std::string("OMPI_COMM_WORLD_RANK=") + std::to_string(rank) + '\0') == std::string::npos) continue;
    const std::string children = mpverify::test::file_bytes(e.path() / "task" / name / "children");
    if (!children.empty()) return static_cast<pid_t>(std::stol(name));
  }
  return -1;
}

TEST(SweepCli, UnderRecoveryARankThatDiesLosesOnlyItsRunInFlight) {
  SKIP_WITHOUT_MPI();
  const fs::path out = fresh("mpi-rank-dies");
  const fs::path log = scratch() / "mpi-rank-dies.log";
  const auto args = mpirun(3, {"--enable-recovery", MPVERIFY_BIN, "sweep", write_plan("main", kPlan).string(), "--out",
                               out.string(), "--rank-timeout", "3"});
  const pid_t job = ::fork();
  if (job == 0) {
    if (!std::freopen("/dev/null", "w", stdout) || !std::freopen(log.c_str(), "w", stderr)) ::_exit(126);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  // Rank 1 is killed while it trains its first run.
  pid_t rank1 = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((rank1 = training_rank(1, out)) < 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_GT(rank1, 0) << "rank 1 never trained";
  ::kill(rank1, SIGKILL);
  int status = 0;
  ::waitpid(job, &status, 0);
  const std::string said = mpverify::test::file_bytes(log);
  ASSERT_TRUE(WIFEXITED(status)) << said;
  EXPECT_EQ(WEXITSTATUS(status), 0) << said;
  EXPECT_NE(said.find("which stopped answering; training it again"), std::string::npos) << said;
  EXPECT_EQ(files_under(out), reference());
}

TEST(SweepCli, AnotherPlanInTheSameDirectoryIsRefused) {
  const fs::path out = fresh("other-plan");
  ASSERT_EQ(run_program(sweep_args(write_plan("main", kPlan), out, {"--shard", "0/6"}), "").exit_code, 0);
  std::string other = kPlan;
  other.replace(other.find("\"steps\": 8"), 10, "\"steps\": 9");
  const auto r = run_command(std::string(MPVERIFY_BIN) + " sweep " + write_plan("other", other).string() + " --out " +
                                 out.string() + " --quiet",
                             "", true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("a sweep of another plan"), std::string::npos) << r.out;
}

// A plan is the sweep's input, so it may be hostile: every key it sets must be an option of train taking that
// kind of value, checked before anything is written or removed. A false value adds no train argument, so
// before this check such names never met train's parser: "../../victim2/x" removed and trained in
// victim2/x-false/seed-1 beside --out, with exit 0.
TEST(SweepCli, AHostilePlanIsRefusedBeforeAnythingIsTouched) {
  const fs::path top = fresh("hostile");
  const fs::path out = top / "a" / "out";  // out/../.. is top
  const fs::path victim = top / "victim2" / "x-false" / "seed-1" / "important.txt";
  fs::create_directories(victim.parent_path());
  std::ofstream(victim) << "keep me\n";
  const std::string train = R"("train": {"model": "mlp", "data": "synthetic", "steps": 2, "train-size": 64,
                                          "test-size": 32, "batch-size": 32})";
  struct Case {
    std::string axes, expected;
  };
  const std::vector<Case> cases = {
      {R"("../../victim2/x": [false])", "not an option of mpverify train"},
      {R"("/tmp/mpverify-absolute": [false])", "not an option of mpverify train"},
      {R"("nesterovv": [false])", "train option \"nesterovv\""},
      {R"("json=true": [true])", "train option \"json=true\""},
      {R"("force=true": [true])", "train option \"force=true\""},
      {R"("nesterov": [3])", "a flag; write true or false"},
      {R"("steps": [true])", "takes a value"},
  };
  for (const Case& c : cases) {
    const fs::path plan = write_plan("hostile", "{" + train + R"(, "axes": {)" + c.axes + R"(, "seed": [1]}})");
    const auto r = run_command(std::string(MPVERIFY_BIN) + " sweep " + plan.string() + " --out " + out.string() +
                                   " --quiet",
                               "", true);
    EXPECT_EQ(r.exit_code, 2) << c.axes << "\n" << r.out;
    EXPECT_NE(r.out.find(c.expected), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(plan.string()), std::string::npos) << "the message names the plan file: " << r.out;
    EXPECT_FALSE(fs::exists(out)) << c.axes;
  }
  EXPECT_FALSE(fs::exists("/tmp/mpverify-absolute-false"));
  std::ifstream kept(victim);
  std::string line;
  EXPECT_TRUE(std::getline(kept, line) && line == "keep me") << "a file beside --out was removed or changed";
  EXPECT_EQ(files_under(top / "victim2").size(), 1u) << "nothing was trained beside --out";
}

TEST(SweepCli, BadInputExitsTwoAndWritesNothing) {
  const fs::path out = fresh("bad");
  struct Case {
    std::string plan, extra, expected;
  };
  const std::vector<Case> cases = {
      {"{\"axes\": {\"recipe\": [\"o2\"]}}", "", "add \"seed\""},
      {"{\"axes\": {\"seed\": [1], \"recipe\": [\"o9\"]}}", "", "candidate recipe-o9"},
      {"{\"train\": {\"stesp\": 3}, \"axes\": {\"seed\": [1]}}", "", "stesp"},
      {"{\"axes\": {\"seed\": [1]}", "", "plan"},  // truncated JSON
      {kPlan, "--shard 3/3", "--shard '3/3'"},
      {kPlan, "--shard 1-3", "write I/N"},
      {kPlan, "--workers 0", "--workers"},
      {kPlan, "--workers -1", "--workers"},  // once read as 2^64 - 1 processes
      {kPlan, "--shard 0/18446744073709551615", "N from 1 to 10000"},  // once trained a run, then "its 0 runs"
      {kPlan, "--rank-timeout nan", "--rank-timeout"},
  };
  for (const Case& c : cases) {
    const auto r = run_command(std::string(MPVERIFY_BIN) + " sweep " + write_plan("bad", c.plan).string() + " --out " +
                                   out.string() + " --quiet " + c.extra,
                               "", true);
    EXPECT_EQ(r.exit_code, 2) << c.plan << " " << c.extra;
    EXPECT_NE(r.out.find(c.expected), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(out)) << c.plan << " " << c.extra;
  }
  const auto missing = run_command(std::string(MPVERIFY_BIN) + " sweep /nonexistent/plan.json --out " + out.string(), "", true);
  EXPECT_EQ(missing.exit_code, 2) << missing.out;
  const auto help = run_command(std::string(MPVERIFY_BIN) + " sweep --help", "");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--shard"), std::string::npos);
  EXPECT_NE(help.out.find("merge"), std::string::npos);
}

}  // namespace
