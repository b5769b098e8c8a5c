// The accuracy parity table (experiments/parity_table) on tiny configurations:
// each row's numbers recomputed here from the run directories' summary.json
// files (mean, sd, the paired interval with a tabulated t quantile, the
// verdict by the TOST rule), the table's cells in the report, the figures
// well-formed, the same seeds giving byte-identical reports whatever the
// number of threads, the interval arithmetic against tabulated t values, and
// bad input refused (std::invalid_argument; the program exits 2 and writes
// nothing).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "parity_table/parity_table_experiment.h"
#include "support/run_command.h"
#include "support/xml_checker.h"

namespace {

namespace fs = std::filesystem;
using mpverify::experiments::ParityTableConfig;
using mpverify::experiments::ParityTableResult;
using mpverify::experiments::run_parity_table;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("mpverify-parity-table-" + name);
  fs::remove_all(dir);
  return dir;
}

std::string read(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string two(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// The tiny table: the MLP on MNIST, 3 seeds of 4 steps, 200 test images.
ParityTableConfig tiny(const fs::path& dir, std::size_t jobs) {
  ParityTableConfig c;
  c.runs = dir / "runs";
  c.report = dir / "reports" / "parity_table.md";
  c.model = "mlp";
  c.seeds = 3;
  c.steps = 4;
  c.train_size = 512;
  c.test_size = 200;
  c.recipes = {"o2", "bf16-o2", "fp8"};
  c.jobs = jobs;
  return c;
}

TEST(ParityTableExperiment, RowsEqualAnIndependentRecomputationFromTheRunDirectories) {
  const fs::path dir = fresh_dir("rows");
  const ParityTableConfig c = tiny(dir, 2);
  const ParityTableResult result = run_parity_table(c);
  ASSERT_EQ(result.rows.size(), 3u);
  const std::string md = read(c.report);
  ASSERT_FALSE(md.empty());

  const auto accuracy = [&](const std::string& side, int seed) {
    const auto summary = nlohmann::json::parse(read(c.runs / side / ("seed-" + std::to_string(seed)) / "summary.json"));
    EXPECT_EQ(summary["config"]["seed"].get<int>(), seed);
    return 100.0 * summary["evaluation"]["test_accuracy"].get<double>();
  };
  // t(0.95, 2) from a table of Student's t (Abramowitz & Stegun 26.10): the
  // (1 − 2·0.05) interval of 3 pairs. Given to 7 digits, hence the 1e-6
  // relative tolerance on the half-width below.
  const double t95_df2 = 2.919986;
  int rows_checked = 0;
  for (const auto& row : result.rows) {
    SCOPED_TRACE(row.recipe);
    EXPECT_EQ(row.side, row.recipe + "-emu");
    std::vector<double> b, m, d;
    for (int s = 1; s <= 3; ++s) {
      b.push_back(accuracy("fp32-ref", s));
      m.push_back(accuracy(row.side, s));
      d.push_back(m.back() - b.back());
    }
    const auto mean = [](const std::vector<double>& v) { return (v[0] + v[1] + v[2]) / 3; };
    const auto sd = [&](const std::vector<double>& v) {
      const double mu = mean(v);
      return std::sqrt(((v[0] - mu) * (v[0] - mu) + (v[1] - mu) * (v[1] - mu) + (v[2] - mu) * (v[2] - mu)) / 2);
    };
    // With no spread between the pairs, the gate takes the rounding to the
    // accuracy's steps (100/test_size points) as their spread: res/sqrt(6) for
    // a difference of two values each uniform within +-res/2 (equivalence.h).
    const double resolution = 100.0 / static_cast<double>(c.test_size);
    const double spread = sd(d) > 0 ? sd(d) : resolution / std::sqrt(6.0);
    const double half = t95_df2 * spread / std::sqrt(3.0);
    ASSERT_TRUE(row.accuracy.test.has_value());
    const auto& t = *row.accuracy.test;
    EXPECT_EQ(mpverify::metrics::to_string(t.method), std::string("paired"));
    // Sums of three numbers below 100 in double: equal to about 1e-13.
    EXPECT_NEAR(t.mean_baseline, mean(b), 1e-9);
    EXPECT_NEAR(t.mean_candidate, mean(m), 1e-9);
    EXPECT_NEAR(t.difference, mean(d), 1e-9);
    EXPECT_NEAR(t.sd_difference, sd(d), 1e-9);
    EXPECT_EQ(t.resolution_spread > 0, sd(d) == 0);
    EXPECT_NEAR(t.lower, mean(d) - half, 1e-6 * half + 1e-9);
    EXPECT_NEAR(t.upper, mean(d) + half, 1e-6 * half + 1e-9);
    const char* verdict = (mean(d) - half > -1 && mean(d) + half < 1)    ? "equivalent"
                          : (mean(d) - half > 1 || mean(d) + half < -1) ? "not equivalent"
                                                                         : "inconclusive";
    EXPECT_EQ(std::string(mpverify::metrics::to_string(row.accuracy.verdict)), verdict);
    // The row of the table, in the literature's form.
    std::string cells = "| " + row.recipe + " |";
    EXPECT_NE(md.find(cells), std::string::npos);
    const std::size_t at = md.find(cells);
    const std::string line = md.substr(at, md.find('\n', at) - at);
    EXPECT_NE(line.find(two(mean(b)) + " ± " + two(sd(b))), std::string::npos) << line;
    EXPECT_NE(line.find(two(mean(m)) + " ± " + two(sd(m))), std::string::npos) << line;
    EXPECT_NE(line.find("[" + two(mean(d) - half) + ", " + two(mean(d) + half) + "]"), std::string::npos) << line;
    EXPECT_NE(line.find(std::string("**") + verdict + "**"), std::string::npos) << line;
    EXPECT_NE(line.find("3 paired"), std::string::npos) << line;
    ++rows_checked;
  }
  EXPECT_EQ(rows_checked, 3);
  // The scalers: fp16 recipes with GradScaler, bf16 and fp8 without a loss scale.
  EXPECT_EQ(result.rows[0].scaler, "torch");
  EXPECT_EQ(result.rows[1].scaler, "none");
  EXPECT_EQ(result.rows[2].scaler, "none");
  EXPECT_EQ(nlohmann::json::parse(read(c.runs / "o2-emu" / "seed-1" / "summary.json"))["config"]["scaler"], "torch");
  // Every side is an ensemble directory `mpverify gate` can read.
  for (const char* side : {"fp32-ref", "o2-emu", "bf16-o2-emu", "fp8-emu"}) {
    const auto e = nlohmann::json::parse(read(c.runs / side / "ensemble.json"));
    EXPECT_EQ(e["seeds"], nlohmann::json::array({1, 2, 3})) << side;
  }
  // The literature's numbers beside ours: Table 1's AlexNet and Inception v3 differences.
  EXPECT_NE(md.find("| 56.77 | 56.93 | +0.16 |"), std::string::npos);
  EXPECT_NE(md.find("| 73.85 | 74.13 | +0.28 |"), std::string::npos);
  // No absolute path in the report.
  EXPECT_EQ(md.find(dir.string()), std::string::npos);
  // The figures, well-formed and linked with relative names.
  for (const char* figure : {"parity_table-differences.svg", "parity_table-loss.svg"}) {
    const std::string svg = read(dir / "reports" / figure);
    ASSERT_FALSE(svg.empty()) << figure;
    EXPECT_NO_THROW((void)mpverify::test::XmlReader(svg).parse()) << figure;
    EXPECT_NE(md.find(std::string("](") + figure + ")"), std::string::npos) << figure;
  }
  // The differences figure: one dot per seed per recipe, one interval per recipe.
  const auto root = mpverify::test::XmlReader(read(dir / "reports" / "parity_table-differences.svg")).parse();
  std::size_t dots = 0, intervals = 0;
  for (const auto* g : root.all("g")) {
    if (g->attributes.at("class") == "values") dots += g->all("circle").size();
    if (g->attributes.at("class") == "interval") ++intervals;
  }
  EXPECT_EQ(dots, 9u);
  EXPECT_EQ(intervals, 3u);
}

TEST(ParityTableExperiment, SameSeedsGiveTheSameBytesWhateverTheThreads) {
  const fs::path a = fresh_dir("det-a"), b = fresh_dir("det-b");
  ParityTableConfig ca = tiny(a, 1), cb = tiny(b, 2);
  ca.recipes = cb.recipes = {"o1", "fp8"};
  ca.seeds = cb.seeds = 2;
  (void)run_parity_table(ca);
  (void)run_parity_table(cb);
  int compared = 0;
  for (const char* file : {"parity_table.md", "parity_table-differences.svg", "parity_table-loss.svg"}) {
    const std::string x = read(a / "reports" / file), y = read(b / "reports" / file);
    ASSERT_FALSE(x.empty()) << file;
    EXPECT_EQ(x, y) << file;
    ++compared;
  }
  EXPECT_EQ(compared, 3);
}

TEST(ParityTableExperiment, IntervalArithmeticMatchesTabulatedT) {
  using mpverify::experiments::paired_half_width;
  using mpverify::experiments::pairs_for_half_width;
  // t(0.95, 5) = 2.015048, t(0.95, 14) = 1.761310 (Abramowitz & Stegun 26.10),
  // 7 digits: relative tolerance 1e-6.
  EXPECT_NEAR(paired_half_width(1.0, 6, 0.05), 2.015048 / std::sqrt(6.0), 1e-6);
  EXPECT_NEAR(paired_half_width(2.0, 15, 0.05), 2.0 * 1.761310 / std::sqrt(15.0), 2e-6);
  // Half-width 0.5 at sd 1: n = 12 gives t(0.95, 11)/sqrt(12) = 1.795885/3.4641 = 0.518,
  // n = 13 gives 1.782288/3.6056 = 0.494.
  EXPECT_EQ(pairs_for_half_width(1.0, 0.5, 0.05), 13u);
  EXPECT_EQ(pairs_for_half_width(1.0, 0.0, 0.05), 0u);
  EXPECT_THROW((void)paired_half_width(1.0, 1, 0.05), std::invalid_argument);
}

TEST(ParityTableExperiment, BadConfigurationsAreRefusedBeforeAnythingIsWritten) {
  const fs::path dir = fresh_dir("bad");
  const auto refused = [&](const std::function<void(ParityTableConfig&)>& change) {
    ParityTableConfig c = tiny(dir, 2);
    change(c);
    EXPECT_THROW((void)run_parity_table(c), std::invalid_argument);
    return !fs::exists(dir);
  };
  EXPECT_TRUE(refused([](ParityTableConfig& c) { c.seeds = 1; }));
  EXPECT_TRUE(refused([](ParityTableConfig& c) { c.steps = 0; }));
  EXPECT_TRUE(refused([](ParityTableConfig& c) { c.recipes = {"fp32"}; }));
  EXPECT_TRUE(refused([](ParityTableConfig& c) { c.recipes = {"o2", "nosuch"}; }));
  EXPECT_TRUE(refused([](ParityTableConfig& c) { c.recipes = {"o2", "o2"}; }));
  EXPECT_TRUE(refused([](ParityTableConfig& c) { c.recipes = {}; }));
  EXPECT_TRUE(refused([](ParityTableConfig& c) { c.report = c.report.parent_path() / "table.txt"; }));
  EXPECT_TRUE(refused([](ParityTableConfig& c) { c.margin = 0; }));
  EXPECT_TRUE(refused([](ParityTableConfig& c) { c.alpha = 0.5; }));
  EXPECT_TRUE(refused([](ParityTableConfig& c) { c.model = "dcgan"; }));
  EXPECT_TRUE(refused([](ParityTableConfig& c) { c.data = "nosuch"; }));
  // A recipe's settings are checked by the trainer before anything is written.
  EXPECT_TRUE(refused([](ParityTableConfig& c) { c.recipes = {"fp8:accumulation=pascal"}; }));
  EXPECT_TRUE(refused([](ParityTableConfig& c) { c.recipes = {"fp8:accumulation=hopper,promotion=7"}; }));
}

TEST(ParityTableExperiment, TheProgramExitsTwoOnBadInputAndWritesNothing) {
  const fs::path dir = fresh_dir("cli");
  const std::string base = std::string(PARITY_TABLE_BIN) + " --runs " + (dir / "runs").string() + " --report " +
                           (dir / "reports" / "parity_table.md").string() + " --quiet ";
  int checked = 0;
  // "fp8:accumulation=hopper,promotion=7" is one recipe with two settings (the comma inside a recipe's settings
  // does not split the list): its promotion interval is not a multiple of the instruction's k, so it is refused.
  for (const std::string extra : {"--seeds 1", "--steps 0", "--recipes fp32", "--recipes o2,,fp8", "--recipes nosuch",
                                  "--margin -1", "--jobs 0", "--model dcgan", "--data nosuch", "--no-such-option",
                                  "--report x.txt", "--recipes o2,fp8:accumulation=hopper,promotion=7"}) {
    const auto r = mpverify::test::run_command(base + extra, "", true);
    EXPECT_EQ(r.exit_code, 2) << extra << ": " << r.out;
    EXPECT_NE(r.out.find("error"), std::string::npos) << extra << ": " << r.out;
    EXPECT_FALSE(fs::exists(dir)) << extra;
    ++checked;
  }
  EXPECT_EQ(checked, 12);
  const auto help = mpverify::test::run_command(std::string(PARITY_TABLE_BIN) + " --help", "");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("Example: parity_table"), std::string::npos);
}

}  // namespace
