// gate_calibration: how often does the parity gate fail a pair that is
// equivalent by construction, and how often does it catch a known drop?
// It measures the decision function `mpverify gate` uses
// (metrics::welch_tost / metrics::paired_tost, the same code, called on the
// values the gate would read), many times:
//
//  (a) simulation: seed-to-seed spread normal with standard deviation sigma
//      (percentage points of accuracy), n runs per side, for each sigma and n:
//       - Welch (different seeds per side, as two FP32 ensembles with
//         different seeds): both sides N(0, sigma^2);
//       - paired (the same seeds on both sides), per-seed correlation rho
//         between the two sides' values (rho = 0: no shared noise at all, the
//         worst case for pairing);
//      under three truths: no difference (null), the candidate exactly `drop`
//      points lower (detection), and a true difference equal to the margin
//      (the TOST's size: how often a pair right at the margin passes).
//  (b) --pool DIR: a directory of many real FP32 runs (an ensemble directory,
//      or a directory of run/ensemble directories); each trial draws 2n
//      distinct runs, n as baseline and n as candidate (Welch: different
//      seeds), and again with the candidate's accuracies shifted down by
//      exactly `drop` points.
//
// Rates, as the tables name them (an equivalent pair should pass, exit 0):
//  - "fail (exit≠0)": the gate does not pass an equivalent pair (not
//    equivalent or inconclusive): the false-failure rate a CI job that treats
//    every non-zero exit as failure sees;
//  - "not eq. (exit 1)": it says "not equivalent" about an equivalent pair;
//  - "caught (exit 1)": it says "not equivalent" about the dropped candidate;
//  - "passed (exit 0)" under the drop: it calls the dropped candidate equivalent.
// Each rate over T trials has Monte Carlo standard error sqrt(p(1-p)/T)
// (at T = 20000: 0.07 points of percentage at p = 1%, 0.15 at p = 5%).
//
// Reproducible: every draw comes from the project's Philox (data/random.h)
// keyed by --seed and the row; the same command gives the same table.
//
// Usage: gate_calibration [--seed S] [--trials T] [--margin M] [--alpha A]
//          [--drop D] [--spreads 0.25,0.5,...] [--seeds-per-side 3,5,...]
//          [--correlations 0,0.5] [--pool DIR] [--out FILE.md]
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "data/random.h"
#include "gate_calibration_sequential.h"
#include "normal_draws.h"
#include "metrics/ensemble.h"
#include "metrics/equivalence.h"
#include "metrics/sequential_design.h"
#include "record/run_log.h"

namespace {

namespace fs = std::filesystem;
using mpverify::metrics::EquivalenceOptions;
using mpverify::metrics::Verdict;
using mpverify::experiments::Normal;

struct Counts {
  std::size_t equivalent = 0, inconclusive = 0, not_equivalent = 0, trials = 0;
  void add(Verdict v) {
    ++trials;
    equivalent += v == Verdict::equivalent;
    inconclusive += v == Verdict::inconclusive;
    not_equivalent += v == Verdict::not_equivalent;
  }
  double rate(std::size_t k) const { return trials ? static_cast<double>(k) / static_cast<double>(trials) : 0.0; }
};

struct Row {
  std::string method;
  double sigma = 0, rho = 0;
  std::size_t n = 0, pool = 0;
  Counts null, drop, at_margin;
};

std::string percent(double p) {
  char t[32];
  std::snprintf(t, sizeof t, "%.2f%%", 100 * p);
  return t;
}

std::string number(double v) {
  char t[32];
  std::snprintf(t, sizeof t, "%g", v);
  return t;
}

bool meets_goals(const Row& r) {
  return r.null.rate(r.null.trials - r.null.equivalent) < 0.01 && r.drop.rate(r.drop.not_equivalent) >= 0.95;
}

Verdict decide(const std::string& method, const std::vector<double>& b, const std::vector<double>& c,
               const EquivalenceOptions& o) {
  return method == "paired" ? mpverify::metrics::paired_tost(b, c, o).verdict
                            : mpverify::metrics::welch_tost(b, c, o).verdict;
}

// One simulated row. Shifts: 0 (null), -drop (detection), -margin (size).
Row simulate(const std::string& method, double sigma, double rho, std::size_t n, std::size_t trials,
             std::uint64_t seed, std::uint64_t stream, const EquivalenceOptions& o, double drop) {
  Row row{method, sigma, rho, n, 0, {}, {}, {}};
  Normal normal(seed, stream);
  std::vector<double> b(n), c(n), shared(n);
  const double a = std::sqrt(rho), e = std::sqrt(1 - rho);
  for (std::size_t t = 0; t < trials; ++t)
    for (const double shift : {0.0, -drop, -o.margin}) {
      for (std::size_t i = 0; i < n; ++i) {
        if (method == "paired") {
          const double z = normal.next();
          b[i] = sigma * (a * z + e * normal.next());
          c[i] = sigma * (a * z + e * normal.next()) + shift;
        } else {
          b[i] = sigma * normal.next();
          c[i] = sigma * normal.next() + shift;
        }
      }
      const Verdict v = decide(method, b, c, o);
      (shift == 0.0 ? row.null : shift == -drop ? row.drop : row.at_margin).add(v);
    }
  return row;
}

// Test accuracies (points) of every non-diverged run under `dir`.
void collect_pool(const fs::path& dir, std::vector<double>& values, std::size_t& diverged, int depth = 0) {
  std::error_code ec;
  if (fs::exists(dir / "ensemble.json", ec) || fs::exists(dir / "summary.json", ec)) {
    const auto ensemble = mpverify::metrics::read_ensemble(dir, false);
    for (const auto& run : ensemble.runs) {
      const auto& s = run.summary;
      const auto e = s.find("evaluation");
      if (e == s.end() || !e->contains("test_accuracy"))
        throw mpverify::metrics::InputError("'" + run.name + "/summary.json' has no evaluation.test_accuracy");
      const auto& acc = (*e)["test_accuracy"];
      if (acc.is_null() || (s.contains("aborted") && s["aborted"] == true)) {
        ++diverged;
        continue;
      }
      values.push_back(100 * acc.get<double>());
    }
    return;
  }
  if (depth > 2) return;
  std::vector<fs::path> children;
  for (const auto& entry : fs::directory_iterator(dir)) if (entry.is_directory()) children.push_back(entry.path());
  std::sort(children.begin(), children.end());  // a fixed order: the same pool gives the same draws
  for (const fs::path& child : children) collect_pool(child, values, diverged, depth + 1);
}

Row resample_pool(const std::vector<double>& pool, std::size_t n, std::size_t trials, std::uint64_t seed,
                  std::uint64_t stream, const EquivalenceOptions& o, double drop) {
  Row row{"welch (pool)", 0, 0, n, pool.size(), {}, {}, {}};
  mpverify::data::Draws draws(seed, stream);
  std::vector<double> order = pool, b(n), c(n);
  for (std::size_t t = 0; t < trials; ++t) {
    // A partial Fisher-Yates shuffle: 2n distinct runs.
    for (std::size_t i = 0; i < 2 * n; ++i) std::swap(order[i], order[i + draws.below(order.size() - i)]);
    for (std::size_t i = 0; i < n; ++i) {
      b[i] = order[i];
      c[i] = order[n + i];
    }
    row.null.add(decide("welch", b, c, o));
    for (double& x : c) x -= drop;
    row.drop.add(decide("welch", b, c, o));
    for (double& x : c) x += drop - o.margin;
    row.at_margin.add(decide("welch", b, c, o));
  }
  return row;
}

std::string table(const std::vector<Row>& rows, bool pool) {
  std::ostringstream t;
  t << "| method | " << (pool ? "pool size" : "spread σ (points)") << " | " << (pool ? "" : "ρ | ")
    << "n per side | null: pass (exit 0) | null: inconclusive (exit 3) | null: not eq. (exit 1) | "
       "**null: fail (exit≠0)** | drop: **caught (exit 1)** | drop: passed (exit 0) | gap = margin: passed | goals met |\n";
  t << "|---|---|" << (pool ? "" : "---|") << "---|---|---|---|---|---|---|---|---|\n";
  for (const Row& r : rows) {
    t << "| " << r.method << " | " << (pool ? std::to_string(r.pool) : number(r.sigma)) << " | "
      << (pool ? "" : (r.method == "paired" ? number(r.rho) : std::string("-")) + " | ") << r.n << " | "
      << percent(r.null.rate(r.null.equivalent)) << " | " << percent(r.null.rate(r.null.inconclusive)) << " | "
      << percent(r.null.rate(r.null.not_equivalent)) << " | **"
      << percent(r.null.rate(r.null.trials - r.null.equivalent)) << "** | **"
      << percent(r.drop.rate(r.drop.not_equivalent)) << "** | " << percent(r.drop.rate(r.drop.equivalent)) << " | "
      << percent(r.at_margin.rate(r.at_margin.equivalent)) << " | " << (meets_goals(r) ? "yes" : "no") << " |\n";
  }
  return t.str();
}

std::vector<double> parse_list(const std::string& text, const char* option) {
  std::vector<double> values;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      std::size_t used = 0;
      values.push_back(std::stod(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw CLI::ValidationError(option, "'" + item + "' is not a number");
    }
  }
  if (values.empty()) throw CLI::ValidationError(option, "empty list");
  return values;
}

// The command line, as parsed and checked.
struct Options {
  std::uint64_t seed = 1;
  std::size_t trials = 20000;
  double margin = 1.0, alpha = 0.05, drop = 2.0;
  std::string spreads_text = "0.25,0.5,0.75,1,1.5", n_text = "3,5,8,10,12,15,20,30", rho_text = "0,0.5";
  std::string pool_dir, out;
  std::vector<double> spreads, ns, rhos;  // the lists above, parsed
  // The gate in rounds (gate_calibration_sequential.h); simulated only without --pool.
  std::string looks_text = "5,10,15,20", sequential_spreads_text = "0.25,0.5,0.75,1";
  mpverify::experiments::SequentialCalibration sequential;
};

void add_options(CLI::App& app, Options& o) {
  app.add_option("--seed", o.seed, "Seed of every draw (default 1)");
  app.add_option("--trials", o.trials, "Trials per row and truth (default 20000)")->check(CLI::Range(1, 100000000));
  app.add_option("--margin", o.margin, "Equivalence margin, points (default 1, the recommended setting)");
  app.add_option("--alpha", o.alpha, "TOST level (default 0.05, the gate's default)");
  app.add_option("--drop", o.drop, "The known drop to detect, points (default 2)");
  app.add_option("--spreads", o.spreads_text, "Seed-to-seed standard deviations to simulate, points");
  app.add_option("--seeds-per-side", o.n_text, "Runs per side to simulate / draw");
  app.add_option("--correlations", o.rho_text, "Per-seed correlations between the sides for the paired rows");
  app.add_option("--pool", o.pool_dir, "A directory of real FP32 runs with test accuracies: also resample it");
  app.add_option("--looks", o.looks_text, "The sequential gate's looks, runs per side (default 5,10,15,20, the study's)");
  app.add_option("--sequential-spreads", o.sequential_spreads_text,
                 "Standard deviations of the per-seed difference for the sequential rows, points");
  app.add_option("--out", o.out, "Write the Markdown report to FILE (atomically)");
}

// Throws CLI::ParseError for a value the calibration cannot use.
void parse_lists(Options& o) {
  o.spreads = parse_list(o.spreads_text, "--spreads");
  o.ns = parse_list(o.n_text, "--seeds-per-side");
  o.rhos = parse_list(o.rho_text, "--correlations");
  for (double n : o.ns)
    if (n < 2 || n != std::floor(n)) throw CLI::ValidationError("--seeds-per-side", "integers >= 2");
  for (double r : o.rhos)
    if (r < 0 || r >= 1) throw CLI::ValidationError("--correlations", "values in [0, 1)");
  try {
    o.sequential.looks = mpverify::metrics::parse_looks(o.looks_text);
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError("--looks", e.what());
  }
  for (double sigma : parse_list(o.sequential_spreads_text, "--sequential-spreads")) {
    if (!(sigma > 0 && sigma <= 100)) throw CLI::ValidationError("--sequential-spreads", "values in (0, 100]");
    o.sequential.spreads.push_back(sigma);
  }
  o.sequential.margin = o.margin;
  o.sequential.alpha = o.alpha;
  o.sequential.trials = o.trials;
  o.sequential.seed = o.seed;
}

// The command as the report's reader would rerun it: the output named as
// reports/<file name>, wherever this run wrote it (so that a regeneration
// into a temporary directory gives the committed bytes).
std::string rerun_command(int argc, char** argv) {
  std::string command = "build/experiments/gate_calibration";
  for (int i = 1; i < argc; ++i) {
    command += " ";
    const bool is_out_value = i > 1 && std::string(argv[i - 1]) == "--out";
    command += is_out_value ? "reports/" + std::filesystem::path(argv[i]).filename().string() : std::string(argv[i]);
  }
  return command;
}

std::vector<Row> simulated_rows(const Options& o, const EquivalenceOptions& options) {
  const bool progress = isatty(2);
  std::vector<Row> simulated;
  std::uint64_t stream = 0;
  for (const double sigma : o.spreads)
    for (const double nd : o.ns) {
      const auto n = static_cast<std::size_t>(nd);
      simulated.push_back(simulate("welch", sigma, 0, n, o.trials, o.seed, stream++, options, o.drop));
      for (const double rho : o.rhos)
        simulated.push_back(simulate("paired", sigma, rho, n, o.trials, o.seed, stream++, options, o.drop));
      if (progress) std::cerr << "\rσ " << sigma << " n " << n << "      " << std::flush;
    }
  if (progress) std::cerr << "\r                         \r";
  return simulated;
}

// The rows resampled from the real runs of --pool.
struct PooledRows {
  std::vector<Row> rows;
  std::size_t size = 0, diverged = 0;  // usable runs, and diverged runs left out
};

// Reads the pool and resamples it; an empty string, or why the pool cannot be used.
std::string pooled_rows(const Options& o, const EquivalenceOptions& options, PooledRows& pooled) {
  std::vector<double> pool;
  std::error_code ec;
  if (!fs::is_directory(o.pool_dir, ec)) return "--pool '" + o.pool_dir + "' is not a directory";
  try {
    collect_pool(o.pool_dir, pool, pooled.diverged);
  } catch (const std::exception& e) {
    return std::string("--pool: ") + e.what();
  }
  pooled.size = pool.size();
  if (pooled.size < 4)
    return "--pool '" + o.pool_dir + "' holds " + std::to_string(pooled.size) +
           " usable runs; at least 4 (2 per side) are needed";
  for (const double nd : o.ns) {
    const auto n = static_cast<std::size_t>(nd);
    if (2 * n > pooled.size) continue;
    pooled.rows.push_back(resample_pool(pool, n, o.trials, o.seed, 1000000 + n, options, o.drop));
  }
  return "";
}

std::string report_markdown(const Options& o, const std::string& command, const std::vector<Row>& simulated,
                            const PooledRows& pooled) {
  std::ostringstream md;
  md << (o.pool_dir.empty() ? "# Parity gate calibration (simulated)\n\n" : "# Parity gate calibration on real runs\n\n")
     << "Measured by `experiments/gate_calibration.cpp` with:\n\n```sh\n" << command << "\n```\n\n"
     << "margin " << number(o.margin) << " points, alpha " << number(o.alpha) << " (interval level "
     << number(100 * (1 - 2 * o.alpha)) << "%), drop " << number(o.drop) << " points, " << o.trials
     << " trials per row and truth, seed " << o.seed << ". The decision measured is the gate's own "
     << "(`metrics::welch_tost` / `metrics::paired_tost`). Monte Carlo standard error of a rate p: "
     << "sqrt(p(1-p)/trials).\n\n"
     << "- **null**: both sides drawn from the same distribution (equivalent by construction). "
        "**fail (exit≠0)** counts not-equivalent and inconclusive verdicts: the false-failure rate of a CI "
        "job that fails on any non-zero exit.\n"
     << "- **drop**: the candidate exactly " << number(o.drop) << " points lower. **caught (exit 1)** counts "
        "\"not equivalent\" verdicts.\n"
     << "- **gap = margin**: true difference equal to the margin; the TOST passes it at most alpha of the time.\n"
     << "- **goals met**: fail (exit≠0) < 1% and caught (exit 1) ≥ 95%.\n\n";
  md << "## Simulated ensembles (normal seed-to-seed spread)\n\n"
     << "welch: different seeds per side; paired: the same seeds, per-seed correlation ρ between the sides.\n\n"
     << table(simulated, false) << "\n";
  if (o.pool_dir.empty()) md << mpverify::experiments::sequential_section(o.sequential, isatty(2));
  if (!o.pool_dir.empty()) {
    md << "## Resampled real runs (`--pool " << o.pool_dir << "`)\n\n"
       << pooled.size << " usable runs (" << pooled.diverged << " diverged runs left out); each trial draws 2n distinct "
       << "runs without replacement, n per side. Draws share runs across trials, so the rates describe this pool.\n\n";
    if (pooled.rows.empty()) md << "(the pool is too small for every n asked)\n";
    else md << table(pooled.rows, true) << "\n";
  }
  return md.str();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "gate_calibration: false-failure and detection rates of the parity gate's decision (Welch/paired TOST)\n"
      "on simulated ensembles, and with --pool on resampled real FP32 runs. Writes a Markdown table."};
  Options o;
  add_options(app, o);
  try {
    app.parse(argc, argv);
    if (!(o.margin > 0 && std::isfinite(o.margin))) throw CLI::ValidationError("--margin", "must be > 0");
    if (!(o.alpha > 0 && o.alpha < 0.5)) throw CLI::ValidationError("--alpha", "must lie in (0, 0.5)");
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    parse_lists(o);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  const std::string command = rerun_command(argc, argv);
  const EquivalenceOptions options(o.margin, o.alpha, false);
  const std::vector<Row> simulated = simulated_rows(o, options);
  PooledRows pooled;
  if (!o.pool_dir.empty())
    if (const std::string why = pooled_rows(o, options, pooled); !why.empty()) {
      std::cerr << "gate_calibration: error: " << why << "\n";
      return 2;
    }

  const std::string md = report_markdown(o, command, simulated, pooled);
  std::cout << md;
  if (!o.out.empty()) {
    try {
      mpverify::record::write_file_atomically(o.out, md);
    } catch (const std::exception& e) {
      std::cerr << "gate_calibration: error: --out: " << e.what() << "\n";
      return 2;
    }
  }
  return 0;
}
