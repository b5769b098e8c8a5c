// The block-scaled experiment (experiments/block_scaled) on its --quick configuration: the report has
// every section and table; each table's numbers equal an independent recomputation here from the run
// directories (blocks.jsonl, steps.jsonl, summary.json); the claims' verdicts follow their rules; the
// figures are well-formed; the same seeds give the same bytes whatever the number of threads; and bad
// input is refused before anything is written (the program exits 2).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "block_scaled/block_scaled_experiment.h"
#include "support/run_command.h"
#include "support/xml_checker.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using mpverify::experiments::BlockScaledConfig;
using mpverify::experiments::BlockScaledResult;
using mpverify::experiments::quick_block_scaled_config;
using mpverify::experiments::run_block_scaled;

// One directory per process: ctest runs each test of this file as its own process, two at a time, and each
// process's SetUpTestSuite trains the quick configuration; a shared directory would be removed under the
// other process's feet.
fs::path fresh_dir(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("mpverify-block-scaled-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(dir);
  return dir;
}

std::string read(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<json> read_lines(const fs::path& file) {
  std::vector<json> lines;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(json::parse(line));
  return lines;
}

// printf formats, written here rather than taken from the report's code.
std::string f(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}
std::string g4(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}
std::string signed4(double v) {
  const std::string s = f(v, 4);
  return s.front() == '-' ? s : "+" + s;
}

BlockScaledConfig quick_in(const fs::path& dir, std::size_t jobs) {
  BlockScaledConfig c = quick_block_scaled_config();
  c.runs = dir / "runs";
  c.report = dir / "reports" / "block_scaled.md";
  c.jobs = jobs;
  return c;
}

fs::path seed_dir(const BlockScaledConfig& c, const std::string& model, const std::string& side, int seed) {
  return c.runs / model / side / ("seed-" + std::to_string(seed));
}

double test_loss(const BlockScaledConfig& c, const std::string& model, const std::string& side, int seed) {
  return json::parse(read(seed_dir(c, model, side, seed) / "summary.json"))["evaluation"]["test_loss"].get<double>();
}

// One quick run shared by the tests (it takes most of their time).
class BlockScaledExperiment : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fresh_dir("quick"));
    config_ = new BlockScaledConfig(quick_in(*dir_, 2));
    result_ = new BlockScaledResult(run_block_scaled(*config_));
  }
  static void TearDownTestSuite() {
    delete result_;
    delete config_;
    delete dir_;
  }
  static fs::path* dir_;
  static BlockScaledConfig* config_;
  static BlockScaledResult* result_;
};
fs::path* BlockScaledExperiment::dir_ = nullptr;
BlockScaledConfig* BlockScaledExperiment::config_ = nullptr;
BlockScaledResult* BlockScaledExperiment::result_ = nullptr;

TEST_F(BlockScaledExperiment, TheReportHasEverySectionAndTable) {
  const std::string md = read(config_->report);
  ASSERT_FALSE(md.empty());
  EXPECT_EQ(md, result_->report_text);
  int sections = 0;
  for (const char* heading :
       {"# Block-scaled formats", "Reproduce: `build/experiments/block_scaled --quick`", "## Verdicts",
        "## The recipes against bf16 and fp32", "### CNN (synthetic digits)", "### transformer (character LM)",
        "## The parity gate against fp32", "## Saturation, underflow and SQNR per layer",
        "## Claim (a): floor against rceil scales (mxfp8)", "## Claim (b): every linear layer in FP4",
        "## Claim (c): the Hadamard transform and stochastic rounding", "## What these runs can and cannot show",
        "## What ran"}) {
    EXPECT_NE(md.find(heading), std::string::npos) << heading;
    ++sections;
  }
  EXPECT_EQ(sections, 13);
  // The verdict table names each claim's verdict.
  EXPECT_NE(md.find("rceil never saturates | **" + result_->verdict_a + "** |"), std::string::npos);
  EXPECT_NE(md.find("in BF16 | **" + result_->verdict_b + "** |"), std::string::npos);
  EXPECT_NE(md.find("gap to BF16 | **" + result_->verdict_c + "** |"), std::string::npos);
  // Every emulated side of both models is gated against fp32 (2 models x 8 recipes).
  EXPECT_EQ(result_->gates.size(), 16u);
  for (const auto& gate : result_->gates)
    EXPECT_NE(md.find("| " + gate.model + " | " + gate.recipe + " | **"), std::string::npos) << gate.recipe;
  // No absolute path in the report.
  EXPECT_EQ(md.find(dir_->string()), std::string::npos);
  // The figures: well-formed, linked by relative names, one legend entry per recipe.
  for (const char* model : {"cnn", "transformer"}) {
    const std::string name = std::string("block_scaled-loss-") + model + ".svg";
    const std::string svg = read(dir_->string() + "/reports/" + name);
    ASSERT_FALSE(svg.empty()) << name;
    EXPECT_NO_THROW((void)mpverify::test::XmlReader(svg).parse()) << name;
    EXPECT_NE(md.find("](" + name + ")"), std::string::npos) << name;
    for (const char* label : {"fp32 (ref)", "bf16-o1 (emu)", "nvfp4:hadamard=off (emu)"})
      EXPECT_NE(svg.find(label), std::string::npos) << name << " " << label;
  }
}

TEST_F(BlockScaledExperiment, TheRecipeTablesEqualTheRunDirectories) {
  const BlockScaledConfig& c = *config_;
  const std::string md = read(c.report);
  int rows = 0;
  for (const char* model : {"cnn", "transformer"}) {
    const std::size_t section = md.find(model == std::string("cnn") ? "### CNN (synthetic" : "### transformer (char");
    ASSERT_NE(section, std::string::npos);
    const std::string part = md.substr(section, md.find("![", section) - section);
    for (const auto& [recipe, side] : std::vector<std::pair<std::string, std::string>>{
             {"fp32", "fp32-ref"}, {"bf16-o1", "bf16-o1-emu"}, {"nvfp4", "nvfp4-emu"},
             {"mxfp8:scale_rule=floor", "mxfp8-scale_rule-floor-emu"}}) {
      double acc = 0, loss = 0, tail = 0, gap = 0;
      for (int s = 1; s <= 2; ++s) {
        const json summary = json::parse(read(seed_dir(c, model, side, s) / "summary.json"));
        EXPECT_EQ(summary["config"]["seed"].get<int>(), s);
        acc += 100 * summary["evaluation"]["test_accuracy"].get<double>() / 2;
        loss += summary["evaluation"]["test_loss"].get<double>() / 2;
        gap += (summary["evaluation"]["test_loss"].get<double>() - test_loss(c, model, "bf16-o1-emu", s)) / 2;
        const std::vector<json> steps = read_lines(seed_dir(c, model, side, s) / "steps.jsonl");
        ASSERT_EQ(steps.size(), 3u);
        tail += steps.back()["loss"].get<double>() / 2;  // ceil(10% of 3) = 1 step
      }
      const std::string row = "| " + recipe + " | " + (recipe == "fp32" ? "ref" : "emu") + " | " + f(acc, 2) + " | " +
                              f(loss, 4) + " | " + f(tail, 4) + " | " + signed4(gap) + " |";
      EXPECT_NE(part.find(row + "\n"), std::string::npos) << model << ": " << row << "\n" << part;
      ++rows;
    }
  }
  EXPECT_EQ(rows, 8);
}

TEST_F(BlockScaledExperiment, TheGateComparesTheTestAccuraciesWithFp32) {
  const BlockScaledConfig& c = *config_;
  int checked = 0;
  for (const auto& gate : result_->gates) {
    ASSERT_TRUE(gate.accuracy.test.has_value()) << gate.recipe;
    const std::string side = mpverify::experiments::block_scaled_side_name(gate.recipe);
    double d = 0;
    for (int s = 1; s <= 2; ++s) {
      const auto acc = [&](const std::string& name) {
        return 100 * json::parse(read(seed_dir(c, gate.model, name, s) / "summary.json"))["evaluation"]["test_accuracy"]
                         .get<double>();
      };
      d += (acc(side) - acc("fp32-ref")) / 2;
    }
    EXPECT_NEAR(gate.accuracy.test->difference, d, 1e-9) << gate.model << " " << gate.recipe;
    EXPECT_EQ(gate.accuracy.paired_seeds, (std::vector<std::int64_t>{1, 2}));
    // Each side is an ensemble `mpverify gate` can read.
    EXPECT_EQ(json::parse(read(c.runs / gate.model / side / "ensemble.json"))["seeds"], json::array({1, 2}));
    ++checked;
  }
  EXPECT_EQ(checked, 16);
}

TEST_F(BlockScaledExperiment, ThePerLayerTableIsTheMeanOfBlocksJsonl) {
  const BlockScaledConfig& c = *config_;
  const std::string md = read(c.report);
  int rows = 0;
  for (const char* model : {"cnn", "transformer"}) {
    // Per (layer, operand) of each recipe: the mean of the rates over the lines of both seeds.
    struct Mean {
      double sat = 0, under = 0, sqnr = 0;
      int n = 0, sqnr_n = 0;
    };
    std::vector<std::map<std::string, Mean>> means;
    std::vector<std::string> order;
    for (const char* side : {"mxfp8-emu", "nvfp4-emu", "fp8-blockwise-emu"}) {
      std::map<std::string, Mean> m;
      for (int s = 1; s <= 2; ++s)
        for (const json& line : read_lines(seed_dir(c, model, side, s) / "blocks.jsonl")) {
          const std::string key = line["layer"].get<std::string>() + " | " + line["operand"].get<std::string>();
          if (means.empty() && m.find(key) == m.end()) order.push_back(key);
          Mean& x = m[key];
          ++x.n;
          x.sat += line["saturation_rate"].get<double>();
          x.under += line["underflow_rate"].get<double>();
          if (line["sqnr_db"].is_number()) {
            x.sqnr += line["sqnr_db"].get<double>();
            ++x.sqnr_n;
          }
        }
      means.push_back(m);
    }
    ASSERT_GE(order.size(), model == std::string("cnn") ? 10u : 72u) << model;
    for (const std::string& key : order) {
      std::string row = "| " + key + " |";
      for (const auto& m : means) {
        const Mean& x = m.at(key);
        EXPECT_EQ(x.n, 6) << key;  // 3 steps recorded x 2 seeds
        row += " ";
        row += g4(x.sat / x.n);
        row += " | ";
        row += g4(x.under / x.n);
        row += " | ";
        row += x.sqnr_n ? f(x.sqnr / x.sqnr_n, 2) : std::string("-");
        row += " |";
      }
      EXPECT_NE(md.find("\n" + row + "\n"), std::string::npos) << model << ": " << row;
      ++rows;
    }
  }
  EXPECT_GE(rows, 82);
}

TEST_F(BlockScaledExperiment, ClaimAIsTheSaturationCountsAndTheRuleBlockByBlock) {
  const BlockScaledConfig& c = *config_;
  const std::string md = read(c.report);
  std::uint64_t floor_total = 0, rceil_total = 0;
  for (const char* model : {"cnn", "transformer"})
    for (const auto& [rule, side] : std::vector<std::pair<std::string, std::string>>{
             {"floor", "mxfp8-scale_rule-floor-emu"}, {"rceil", "mxfp8-emu"}}) {
      std::uint64_t elements = 0, saturated = 0, blocks = 0, lines = 0, with = 0;
      for (int s = 1; s <= 2; ++s)
        for (const json& line : read_lines(seed_dir(c, model, side, s) / "blocks.jsonl")) {
          EXPECT_EQ(line["scheme"], "mxfp8-e4m3");
          elements += line["elements"].get<std::uint64_t>();
          saturated += line["saturated"].get<std::uint64_t>();
          blocks += line["blocks"].get<std::uint64_t>();
          ++lines;
          with += line["saturated"].get<std::uint64_t>() > 0;
        }
      (rule == "floor" ? floor_total : rceil_total) += saturated;
      const std::string row = std::string("| ") + model + " | " + rule + " | " + std::to_string(lines) + " | " +
                              std::to_string(elements) + " | " + std::to_string(saturated) + " | " +
                              g4(static_cast<double>(saturated) / static_cast<double>(elements)) + " | " +
                              std::to_string(with) + " | " +
                              g4(static_cast<double>(saturated) / static_cast<double>(blocks)) + " |";
      EXPECT_NE(md.find("\n" + row + "\n"), std::string::npos) << row;
    }
  // The verdict follows its rule from the counts and the block check.
  // One check per model and scheme: E4M3 with the threshold 448 / 2^8 = 1.75, E2M1 with 6 / 2^2 = 1.5.
  ASSERT_EQ(result_->amax_checks.size(), 4u);
  bool rule_holds = true;
  for (const auto& a : result_->amax_checks) {
    EXPECT_GT(a.blocks, 0u);
    EXPECT_GT(a.tensors, 0u);
    EXPECT_EQ(a.threshold, a.scheme == "mxfp4" ? 1.5 : 1.75) << a.scheme;
    rule_holds = rule_holds && a.above == a.above_saturated && a.below_saturated == 0 && a.rceil_saturated == 0;
    const std::string row = "| " + a.model + " | " + a.scheme + " (" + (a.scheme == "mxfp4" ? "1.50" : "1.75") +
                            ") | " + std::to_string(a.tensors) + " | " + std::to_string(a.blocks) + " | " +
                            std::to_string(a.above) + " | " + std::to_string(a.above_saturated) + " | " +
                            std::to_string(a.below_saturated) + " | " + std::to_string(a.rceil_saturated) + " |";
    EXPECT_NE(md.find("\n" + row), std::string::npos) << row;
  }
  const std::string expected = rceil_total > 0 || !rule_holds ? "refuted"
                               : floor_total == 0 ? "not reproduced at this scale (floor saturated nothing)"
                                                  : "reproduced";
  EXPECT_EQ(result_->verdict_a, expected);
}

TEST_F(BlockScaledExperiment, ClaimsBAndCArePairedTestLossDifferences) {
  const BlockScaledConfig& c = *config_;
  const std::string md = read(c.report);
  // t(0.95, 1) = 6.313752 (Abramowitz & Stegun 26.10), 7 digits; the cells are printed to 4 decimals.
  const double t95_df1 = 6.313752;
  int rows = 0;
  for (const char* model : {"cnn", "transformer"})
    for (const char* variant : {"nvfp4:high_precision_last=0", "nvfp4:hadamard=off", "nvfp4:dy_rounding=rne"}) {
      const std::string side = mpverify::experiments::block_scaled_side_name(variant);
      double d[2];
      std::string per_variant, per_reference, per_bf16;
      for (int s = 1; s <= 2; ++s) {
        d[s - 1] = test_loss(c, model, side, s) - test_loss(c, model, "nvfp4-emu", s);
        const std::string sep = s > 1 ? ", " : "";
        per_variant += sep;
        per_variant += f(test_loss(c, model, side, s), 4);
        per_reference += sep;
        per_reference += f(test_loss(c, model, "nvfp4-emu", s), 4);
        per_bf16 += sep;
        per_bf16 += f(test_loss(c, model, "bf16-o1-emu", s), 4);
      }
      const double mean = (d[0] + d[1]) / 2;
      const double sd = std::fabs(d[0] - d[1]) / std::sqrt(2.0);
      const double half = t95_df1 * sd / std::sqrt(2.0);
      const std::string verdict = mean - half > 0   ? "reproduced"
                                  : mean + half < 0 ? "refuted"
                                                    : "not reproduced at this scale";
      const std::string row = std::string("| ") + model + " | " + variant + " | " + per_variant + " | " +
                              per_reference + " | " + per_bf16 + " | " + signed4(mean) + " | [" +
                              f(mean - half, 4) + ", " + f(mean + half, 4) + "] | **" + verdict + "** |";
      EXPECT_NE(md.find("\n" + row + "\n"), std::string::npos) << row;
      ++rows;
    }
  EXPECT_EQ(rows, 6);
  EXPECT_EQ(result_->claims.size(), 6u);
}

TEST_F(BlockScaledExperiment, SameSeedsGiveTheSameBytesWhateverTheThreads) {
  const fs::path other = fresh_dir("det");
  BlockScaledConfig c = quick_in(other, 1);
  (void)run_block_scaled(c);
  int compared = 0;
  for (const char* file : {"block_scaled.md", "block_scaled-loss-cnn.svg", "block_scaled-loss-transformer.svg"}) {
    const std::string x = read(*dir_ / "reports" / file), y = read(other / "reports" / file);
    ASSERT_FALSE(x.empty()) << file;
    EXPECT_EQ(x, y) << file;
    ++compared;
  }
  EXPECT_EQ(compared, 3);
  fs::remove_all(other);
}

TEST(BlockScaledExperimentInput, BadConfigurationsAreRefusedBeforeAnythingIsWritten) {
  const fs::path dir = fresh_dir("bad");
  const auto refused = [&](const std::function<void(BlockScaledConfig&)>& change) {
    BlockScaledConfig c = quick_in(dir, 2);
    change(c);
    EXPECT_THROW((void)run_block_scaled(c), std::invalid_argument);
    return !fs::exists(dir);
  };
  EXPECT_TRUE(refused([](BlockScaledConfig& c) { c.seeds = 0; }));
  EXPECT_TRUE(refused([](BlockScaledConfig& c) { c.cnn_steps = 0; }));
  EXPECT_TRUE(refused([](BlockScaledConfig& c) { c.transformer_steps = 0; }));
  EXPECT_TRUE(refused([](BlockScaledConfig& c) { c.record_every = 0; }));
  EXPECT_TRUE(refused([](BlockScaledConfig& c) { c.record_every = 4; }));  // more than the 3 steps
  EXPECT_TRUE(refused([](BlockScaledConfig& c) { c.report = c.report.parent_path() / "report.txt"; }));
  EXPECT_TRUE(refused([](BlockScaledConfig& c) { c.alpha = 0.5; }));
  EXPECT_TRUE(refused([](BlockScaledConfig& c) { c.margin = 0; }));
  EXPECT_TRUE(refused([](BlockScaledConfig& c) { c.jobs = 0; }));
  // The trainer's own checks: a context longer than the test text's windows allow, a text outside the alphabet.
  EXPECT_TRUE(refused([](BlockScaledConfig& c) { c.context_length = 100000; }));
}

TEST(BlockScaledExperimentInput, TheProgramExitsTwoOnBadInputAndWritesNothing) {
  const fs::path dir = fresh_dir("cli");
  const std::string base = std::string(BLOCK_SCALED_BIN) + " --runs " + (dir / "runs").string() + " --report " +
                           (dir / "reports" / "block_scaled.md").string() + " --quiet ";
  int checked = 0;
  for (const std::string extra : {"--seeds 0", "--steps 0", "--transformer-steps 0", "--record-every 0",
                                  "--alpha 0.5", "--margin -1", "--jobs 0", "--no-such-option", "--report x.txt",
                                  "--quick --report x.txt", "--seeds two"}) {
    const auto r = mpverify::test::run_command(base + extra, "", true);
    EXPECT_EQ(r.exit_code, 2) << extra << ": " << r.out;
    EXPECT_NE(r.out.find("error"), std::string::npos) << extra << ": " << r.out;
    EXPECT_FALSE(fs::exists(dir)) << extra;
    ++checked;
  }
  EXPECT_EQ(checked, 11);
  const auto help = mpverify::test::run_command(std::string(BLOCK_SCALED_BIN) + " --help", "");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("Example: block_scaled"), std::string::npos);
  EXPECT_NE(help.out.find("--quick"), std::string::npos);
}

}  // namespace
