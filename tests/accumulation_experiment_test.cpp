// Experiment 9 (experiments/accumulation/): its exact product, its error definitions, one cell against the
// instruction model called directly, the a priori bound, the claim's direction, determinism and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "accumulation/accumulation_experiment.h"
#include "emu/mma_model.h"
#include "emu/mma_presets.h"
#include "emu/quantize.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "refs/gemm_ref.h"

namespace {

namespace fs = std::filesystem;
using namespace mpverify;
using experiments::Distribution;

fs::path fresh(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("mpverify-accumulation-" + name);
  fs::remove_all(p);
  return p;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const experiments::OperandPair& pair_named(const std::string& label) {
  for (const auto& p : experiments::operand_pairs())
    if (p.label == label) return p;
  throw std::runtime_error("no operand pair " + label);
}

std::size_t pair_index(const std::string& label) {
  const auto& pairs = experiments::operand_pairs();
  for (std::size_t i = 0; i < pairs.size(); ++i)
    if (pairs[i].label == label) return i;
  throw std::runtime_error("no operand pair " + label);
}

// The exact product of E4M3 operands in integers: every E4M3 value is a multiple of 2^-9 (its smallest
// subnormal), so a product is an integer times 2^-18.
std::vector<double> exact_in_integers(int rows, int K, int cols, const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<double> c;
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      std::int64_t s = 0;
      for (int t = 0; t < K; ++t)
        s += static_cast<std::int64_t>(std::ldexp(a[static_cast<std::size_t>(i) * K + t], 9)) *
             static_cast<std::int64_t>(std::ldexp(b[static_cast<std::size_t>(t) * cols + j], 9));
      c.push_back(std::ldexp(static_cast<double>(s), -18));
    }
  return c;
}

TEST(AccumulationExperiment, ExactProductEqualsTheIntegerSumForE4m3) {
  const int rows = 3, K = 4096, cols = 2;
  const auto& e4m3 = pair_named("e4m3");
  for (Distribution d : {Distribution::positive, Distribution::signed_normal}) {
    const auto real = experiments::draw_operands(d, rows, K, cols, 7);
    const std::vector<float> a = emu::quantized_copy(real.a, e4m3.a), b = emu::quantized_copy(real.b, e4m3.b);
    // Exact equality: N(0,1) values stay below 2^3, so every partial sum and every error term of the
    // double-double is a multiple of 2^-18 below 2^35 and every operation on them is exact.
    EXPECT_EQ(experiments::exact_product(rows, K, cols, a, b), exact_in_integers(rows, K, cols, a, b));
  }
}

TEST(AccumulationExperiment, ExactProductAgreesWithTheFp64Reference) {
  const int rows = 4, K = 4096, cols = 5;
  const auto real = experiments::draw_operands(Distribution::signed_normal, rows, K, cols, 3);
  const auto& fp16 = pair_named("fp16");
  const std::vector<float> a = emu::quantized_copy(real.a, fp16.a), b = emu::quantized_copy(real.b, fp16.b);
  const std::vector<double> exact = experiments::exact_product(rows, K, cols, a, b);
  ops::GemmShape shape;
  shape.m = rows;
  shape.n = cols;
  shape.k = K;
  std::vector<double> fp64(shape.c_size());
  refs::gemm_ref_fp64(shape, a, b, fp64);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      double abs_sum = 0;
      for (int t = 0; t < K; ++t) abs_sum += std::fabs(double(a[i * K + t]) * double(b[t * cols + j]));
      // The fp64 reference sums in some order: |error| <= gamma_K(2^-53) sum |a||b| (Higham eq. 3.5), with
      // K 2^-53 < 2^-40 so gamma_K < 1.01 K 2^-53; the double-double's own error is far below that.
      const double bound = 1.01 * K * 0x1p-53 * abs_sum;
      EXPECT_LE(std::fabs(exact[i * cols + j] - fp64[i * cols + j]), bound) << i << "," << j;
    }
}

TEST(AccumulationExperiment, RelativeErrorsFollowTheirDefinitions) {
  // Half-normal: relative to |exact| per element; errors 0.5, 0, 0.
  auto e = experiments::relative_errors(Distribution::positive, std::vector<float>{1.5f, 2.0f, 4.0f},
                                        std::vector<double>{1.0, 2.0, 4.0});
  EXPECT_DOUBLE_EQ(e.max, 0.5);
  EXPECT_DOUBLE_EQ(e.median, 0.0);
  // Normal: relative to rms(exact) = sqrt((9 + 16) / 2); errors 0 and 1, median their mean.
  e = experiments::relative_errors(Distribution::signed_normal, std::vector<float>{3.0f, -3.0f},
                                   std::vector<double>{3.0, -4.0});
  const double rms = std::sqrt(12.5);
  EXPECT_DOUBLE_EQ(e.max, 1.0 / rms);
  EXPECT_DOUBLE_EQ(e.median, 0.5 / rms);
  EXPECT_THROW(experiments::relative_errors(Distribution::positive, std::vector<float>{1.0f}, std::vector<double>{}),
               std::invalid_argument);
}

// One cell through the GEMM against the same instruction model called on each element directly.
TEST(AccumulationExperiment, CellEqualsTheInstructionModelElementByElement) {
  const int rows = 3, K = 512, cols = 4;
  const auto& e4m3 = pair_named("e4m3");
  const emu::MmaModel& hopper = emu::mma_for_architecture("hopper", e4m3.a, e4m3.b, formats::parse_format("fp32"));
  const auto real = experiments::draw_operands(Distribution::positive, rows, K, cols, 11);
  const std::vector<float> a = emu::quantized_copy(real.a, e4m3.a), b = emu::quantized_copy(real.b, e4m3.b);
  const std::vector<double> exact = exact_in_integers(rows, K, cols, a, b);
  for (int promotion : {0, 128}) {
    const experiments::CellSpec spec{Distribution::positive, pair_index("e4m3"), "hopper", hopper, promotion, K};
    const experiments::CellResult cell = experiments::run_cell(spec, rows, cols, a, b, exact);
    double max_error = 0;
    formats::Flags flags;
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) {
        std::vector<std::uint32_t> x, y;
        for (int t = 0; t < K; ++t) {
          x.push_back(formats::from_float(hopper.a, a[i * K + t], {}, flags));
          y.push_back(formats::from_float(hopper.b, b[t * cols + j], {}, flags));
        }
        const double d = formats::to_float(hopper.c, emu::mma_dot(hopper, x, y, 0, promotion), flags);
        const double c = exact[i * cols + j];
        max_error = std::max(max_error, std::fabs(d - c) / c);
      }
    EXPECT_EQ(cell.error.max, max_error) << "promotion " << promotion;
    // Every instruction aligns 32 products and its accumulator (the first starts from a zero, not counted).
    EXPECT_EQ(cell.accumulate.elements, static_cast<std::uint64_t>(rows * cols * K / 32));
    EXPECT_GT(cell.accumulate.truncated, 0u);
  }
}

// Positive operands have condition 1, so each element's relative error is at most the chain's a priori
// bound gamma_K(u) with u = emu::mma_unit_roundoff (its derivation is at its definition), where K u < 1;
// with promotion, (1 + gamma_P(u)) (1 + gamma_{K/P + 1}(2^-24)) - 1 (the fp32 adds round to nearest).
TEST(AccumulationExperiment, HalfNormalErrorsStayWithinTheAPrioriBound) {
  experiments::AccumulationConfig config;
  config.report = fresh("bound") / "accumulation.md";
  config.lengths = {256, 1024};
  config.rows = 2;
  config.cols = 3;
  const auto result = experiments::run_accumulation(config);
  auto gamma = [](double n, double u) { return n * u / (1 - n * u); };
  int checked = 0;
  for (const auto& cell : result.cells) {
    if (cell.spec.distribution != Distribution::positive) continue;
    const double u = emu::mma_unit_roundoff(cell.spec.model);
    const int P = cell.spec.promotion;
    if ((P > 0 ? P : cell.spec.K) * u >= 1) continue;
    const double bound = P == 0 ? gamma(cell.spec.K, u)
                                : (1 + gamma(P, u)) * (1 + gamma(cell.spec.K / P + 1, 0x1p-24)) - 1;
    EXPECT_LE(cell.error.max, bound) << cell.spec.model.name << " K " << cell.spec.K << " promotion " << P;
    ++checked;
  }
  EXPECT_GE(checked, 40);
  fs::remove_all(config.report.parent_path());
}

// The direction of DeepSeek-V3's claim on Hopper's FP8 wgmma: without promotion the error at K = 4096 is
// above 1% (F = 13 loses about 2^-14 of the accumulator per product on average: thousands of products lose
// percents), and promoting every 128 products cuts it at least fourfold.
TEST(AccumulationExperiment, PromotionCutsHopperFp8ErrorAtK4096) {
  const int rows = 2, K = 4096, cols = 2;
  const auto& e4m3 = pair_named("e4m3");
  const emu::MmaModel& hopper = emu::mma_for_architecture("hopper", e4m3.a, e4m3.b, formats::parse_format("fp32"));
  const auto real = experiments::draw_operands(Distribution::positive, rows, K, cols, 1);
  const std::vector<float> a = emu::quantized_copy(real.a, e4m3.a), b = emu::quantized_copy(real.b, e4m3.b);
  const std::vector<double> exact = experiments::exact_product(rows, K, cols, a, b);
  const auto plain = experiments::run_cell({Distribution::positive, pair_index("e4m3"), "hopper", hopper, 0, K}, rows,
                                           cols, a, b, exact);
  const auto promoted = experiments::run_cell(
      {Distribution::positive, pair_index("e4m3"), "hopper", hopper, 128, K}, rows, cols, a, b, exact);
  EXPECT_GT(plain.error.max, 0.01);
  EXPECT_LT(promoted.error.max, plain.error.max / 4);
}

TEST(AccumulationExperiment, SameSeedSameBytesOnAnyThreadCount) {
  experiments::AccumulationConfig one, two;
  one.report = fresh("jobs1") / "accumulation.md";
  two.report = fresh("jobs2") / "accumulation.md";
  for (auto* c : {&one, &two}) {
    c->lengths = {256};
    c->rows = 2;
    c->cols = 2;
  }
  one.jobs = 1;
  two.jobs = 2;
  const auto r1 = experiments::run_accumulation(one), r2 = experiments::run_accumulation(two);
  // fp16 on 6 architectures, bf16 on 4, each FP8 pair on 3: 16 models, 2 promotions, 2 distributions.
  EXPECT_EQ(r1.cells.size(), 64u);
  EXPECT_EQ(r1.skipped.size(), 8u);  // bf16: volta, turing; FP8 pairs: volta, turing, ampere
  ASSERT_EQ(r1.files.size(), 9u);    // 8 figures and the report
  ASSERT_EQ(r2.files.size(), r1.files.size());
  for (std::size_t i = 0; i < r1.files.size(); ++i) {
    EXPECT_EQ(r1.files[i].filename(), r2.files[i].filename());
    EXPECT_EQ(slurp(r1.files[i]), slurp(r2.files[i])) << r1.files[i];
  }
  experiments::AccumulationConfig other = one;
  other.report = fresh("seed2") / "accumulation.md";
  other.seed = 2;
  const auto r3 = experiments::run_accumulation(other);
  EXPECT_NE(slurp(r3.files.back()), slurp(r1.files.back()));
  for (const auto* c : {&one, &two, &other}) fs::remove_all(c->report.parent_path());
}

TEST(AccumulationExperiment, BadInputNamesTheOptionAndWritesNothing) {
  const fs::path dir = fresh("bad");
  struct Case {
    std::string option;
    experiments::AccumulationConfig config;
  };
  std::vector<Case> cases(6);
  for (auto& c : cases) c.config.report = dir / "accumulation.md";
  cases[0] = {"--report", cases[0].config};
  cases[0].config.report = dir / "accumulation.txt";
  cases[1] = {"--lengths", cases[1].config};
  cases[1].config.lengths = {100};
  cases[2] = {"--lengths", cases[2].config};
  cases[2].config.lengths = {1024, 256};
  cases[3] = {"--promotion", cases[3].config};
  cases[3].config.promotion = 100;
  cases[4] = {"--rows", cases[4].config};
  cases[4].config.rows = 0;
  cases[5] = {"--lengths", cases[5].config};
  cases[5].config.lengths = {};
  for (const Case& c : cases) {
    try {
      experiments::run_accumulation(c.config);
      ADD_FAILURE() << c.option << ": accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(c.option), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(dir)) << c.option;
  }
}

}  // namespace
