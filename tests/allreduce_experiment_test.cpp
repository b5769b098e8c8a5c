// The all-reduce experiment (experiments/allreduce/) on a tiny configuration
// (the CNN, N = 2, 4, 16): one cell of its report's table recomputed here with
// the allreduce library and a double sum, the fp32 cells within the a priori
// bounds gamma_k kappa computed here, and bad configurations refused.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/directory_files.h"
#include "allreduce/allreduce_experiment.h"
#include "collective/allreduce.h"
#include "formats/format.h"
#include "training/shard_gradients.h"

namespace {

namespace fs = std::filesystem;
using namespace mpverify;

fs::path fresh(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("mpverify-allreduce-experiment-" + name);
  fs::remove_all(p);
  return p;
}

std::string slurp(const fs::path& p) { return mpverify::test::file_bytes(p); }

// The "Every cell" table's normwise column for (N, format label, order): the line
// "| N | format | order | normwise | ...".
double table_normwise(const std::string& md, std::size_t n, const std::string& format, const std::string& order) {
  const std::string key = "| " + std::to_string(n) + " | " + format + " | " + order + " | ";
  const std::size_t at = md.rfind(key);  // the full table is the report's last with these three columns
  EXPECT_NE(at, std::string::npos) << key;
  if (at == std::string::npos) return NAN;
  return std::stod(md.substr(at + key.size()));
}

// The report prints 3 significant digits (%.3g): within half a unit of the third.
bool printed_as(double printed, double value) {
  if (value == 0) return printed == 0;
  const double unit = std::pow(10.0, std::floor(std::log10(std::abs(value))) - 2);
  return std::abs(printed - value) <= 0.5 * unit * (1 + 1e-9);
}

struct Rows {
  training::ShardGradients g;
  std::vector<double> sum, abs_sum;  // per element, in double (relative error < 2^-50 for 16 terms)
};
Rows rows_for(std::size_t ranks) {
  training::ShardGradientOptions o;
  o.ranks = ranks;  // cnn, synthetic, B = 2, seed 0, step 0: the experiment's defaults
  Rows r{training::shard_gradients(o), {}, {}};
  r.sum.assign(r.g.n, 0.0);
  r.abs_sum.assign(r.g.n, 0.0);
  for (std::size_t k = 0; k < ranks; ++k)
    for (std::size_t i = 0; i < r.g.n; ++i) {
      r.sum[i] += r.g.rows[k * r.g.n + i];
      r.abs_sum[i] += std::abs(r.g.rows[k * r.g.n + i]);
    }
  return r;
}

class AllreduceExperiment : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const fs::path dir = fresh("report");
    config_ = new experiments::AllreduceExperimentConfig();
    config_->ranks = {2, 4, 16};
    config_->report = dir / "allreduce.md";
    experiments::run_allreduce_experiment(*config_, {});
    md_ = new std::string(slurp(config_->report));
  }
  static void TearDownTestSuite() {
    fs::remove_all(config_->report.parent_path());
    delete config_;
    delete md_;
  }
  static experiments::AllreduceExperimentConfig* config_;
  static std::string* md_;
};
experiments::AllreduceExperimentConfig* AllreduceExperiment::config_ = nullptr;
std::string* AllreduceExperiment::md_ = nullptr;

TEST_F(AllreduceExperiment, WritesTheReportAndFigures) {
  EXPECT_NE(md_->find("# What does reduced-precision all-reduce lose?"), std::string::npos);
  EXPECT_NE(md_->find("no GPU"), std::string::npos);
  EXPECT_NE(md_->find("Not done here"), std::string::npos);
  EXPECT_TRUE(fs::exists(config_->report.parent_path() / "allreduce-error.svg"));
  EXPECT_TRUE(fs::exists(config_->report.parent_path() / "allreduce-swamped.svg"));
}

// bf16, ring, N = 4: the rows from shard_gradients, the sum by collective::allreduce, the exact sum in double,
// the normwise error ||s^ - s|| / ||s|| computed here.
TEST_F(AllreduceExperiment, OneCellRecomputedWithTheLibrary) {
  const Rows r = rows_for(4);
  collective::AllreduceSpec spec;
  spec.rounding.format = formats::parse_format("bf16");
  spec.algorithm = collective::Algorithm::ring;
  const collective::AllreduceResult out = collective::allreduce({r.g.rows, r.g.ranks, r.g.n}, spec);
  double ee = 0, ss = 0;
  for (std::size_t i = 0; i < r.g.n; ++i) {
    ASSERT_TRUE(std::isfinite(out.values[i]));
    ee += (out.values[i] - r.sum[i]) * (out.values[i] - r.sum[i]);
    ss += r.sum[i] * r.sum[i];
  }
  const double normwise = std::sqrt(ee / ss);
  ASSERT_GT(normwise, 0);
  EXPECT_TRUE(printed_as(table_normwise(*md_, 4, "bf16", "ring"), normwise))
      << table_normwise(*md_, 4, "bf16", "ring") << " vs " << normwise;
}

// fp32 (inputs exact): a sum of N floats by k additions in any order has |s^_i - s_i| <= gamma_k sum_r |x_ri|
// (Higham, Accuracy and Stability of Numerical Algorithms, 4.2), k = N - 1 for the ring and ceil(log2 N) for the
// tree, so normwise <= gamma_k ||sum |x| || / ||s||; printed with 3 digits, so allowed half a unit of the third.
TEST_F(AllreduceExperiment, Fp32CellsWithinTheirBounds) {
  const double u = 0x1p-24;
  for (std::size_t n : {std::size_t{4}, std::size_t{16}}) {
    const Rows r = rows_for(n);
    double aa = 0, ss = 0;
    for (std::size_t i = 0; i < r.g.n; ++i) aa += r.abs_sum[i] * r.abs_sum[i], ss += r.sum[i] * r.sum[i];
    const double kappa = std::sqrt(aa / ss);
    for (const auto& [order, k] : {std::pair{std::string("ring"), double(n - 1)}, std::pair{std::string("tree"), std::ceil(std::log2(double(n)))}}) {
      const double bound = k * u / (1 - k * u) * kappa, printed = table_normwise(*md_, n, "fp32", order);
      EXPECT_LE(printed, bound * 1.005) << order << " N = " << n;
      EXPECT_GT(printed, 0) << order << " N = " << n;  // fp32 sums of these gradients do round
    }
  }
}

TEST(AllreduceExperimentConfig, BadConfigurationsAreRefused) {
  experiments::AllreduceExperimentConfig c;
  c.ranks = {};
  EXPECT_THROW(experiments::validate(c), std::invalid_argument);
  c.ranks = {1};
  EXPECT_THROW(experiments::validate(c), std::invalid_argument);
  c.ranks = {2};
  c.shard_batch = 0;
  EXPECT_THROW(experiments::validate(c), std::invalid_argument);
  c.shard_batch = 2;
  c.model = "dcgan";
  EXPECT_THROW(experiments::validate(c), std::invalid_argument);
}

}  // namespace
