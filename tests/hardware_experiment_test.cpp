// Experiment 6 (experiments/hardware): the CPU side everywhere, the hardware
// side where a device is usable (skipped with the reason otherwise).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <limits>
#include <stdexcept>
#include <vector>

#include "gpu/device.h"
#include "hardware/hardware_experiment.h"
#include "hardware/tf32_conversion.h"

namespace {

namespace fs = std::filesystem;
using namespace mpverify::experiments;

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path temp_dir(const char* name) {
  const fs::path d = fs::temp_directory_path() / ("mpverify-hardware-" + std::string(name) + "-" +
                                                  std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  fs::remove_all(d);
  return d;
}

TEST(HardwareExperiment, CpuSideIsDeterministicAndSaysNoGpuWasUsed) {
  const fs::path dir = temp_dir("cpu");
  HardwareConfig c;
  c.gpu = false;
  c.report = dir / "a.md";
  const HardwareResult a = run_hardware(c);
  c.report = dir / "b.md";
  run_hardware(c);
  EXPECT_EQ(read(dir / "a.md"), read(dir / "b.md"));
  EXPECT_NE(read(dir / "a.md").find("No GPU was available"), std::string::npos);
  ASSERT_FALSE(a.cases.empty());
  for (const HardwareCase& hc : a.cases) {
    ASSERT_GE(hc.models.size(), 2u) << hc.op;
    EXPECT_EQ(hc.models.front().identical_to_first, 1.0) << hc.op << ": the first model against itself";
    for (const ModelOutcome& m : hc.models) {
      EXPECT_FALSE(m.identical_to_hardware) << "no hardware figure may appear without a GPU";
      EXPECT_GT(m.error_vs_fp64, 0.0) << hc.op << " " << m.model << ": rounded inputs and sums are not exact";
    }
  }
  fs::remove_all(dir);
}

// The comparison must be able to tell the models apart: with fp16 inputs, fp32 outputs and
// k = 4096 (4096 roundings per output in the plain model, truncations in the
// tensor-core one) the two cannot agree on most outputs (FP8 products, of at most 8 bits, leave the
// F = 25 instructions exact on most outputs, so the FP8 cases are not held to this); one agreement would
// be luck, so more than half differing is a weak, safe claim.
TEST(HardwareExperiment, ModelsDifferOnLongFp32Sums) {
  const fs::path dir = temp_dir("models");
  HardwareConfig c;
  c.gpu = false;
  c.report = dir / "h.md";
  const HardwareResult r = run_hardware(c);
  bool found = false;
  for (const HardwareCase& hc : r.cases)
    if (hc.op == "GEMM" && hc.shape.find("k=4096") != std::string::npos && hc.formats.starts_with("fp16")) {
      found = true;
      for (std::size_t i = 1; i < hc.models.size(); ++i) EXPECT_LT(hc.models[i].identical_to_first, 0.5) << hc.models[i].model;
    }
  EXPECT_TRUE(found);
  fs::remove_all(dir);
}

TEST(HardwareExperiment, RejectsAReportThatIsNotMarkdown) {
  HardwareConfig c;
  c.report = temp_dir("bad") / "report.txt";
  EXPECT_THROW(validate_hardware(c), std::invalid_argument);
  EXPECT_THROW(run_hardware(c), std::invalid_argument);
  EXPECT_FALSE(fs::exists(c.report.parent_path()));
}

TEST(HardwareExperiment, HardwareSideFillsEveryRow) {
  if (const std::string reason = mpverify::gpu::gpu_unavailable_reason(); !reason.empty()) GTEST_SKIP() << reason;
  const fs::path dir = temp_dir("gpu");
  HardwareConfig c;
  c.report = dir / "h.md";
  const HardwareResult r = run_hardware(c);
  for (const HardwareCase& hc : r.cases)
    for (const ModelOutcome& m : hc.models) {
      ASSERT_TRUE(m.identical_to_hardware) << hc.op << " " << m.model;
      RecordProperty(hc.op + " " + hc.shape + " " + m.model, std::to_string(*m.identical_to_hardware));
    }
  fs::remove_all(dir);
}

}  // namespace

// The tf32 probe's rules and operands (experiments/hardware/tf32_conversion.h), held without a GPU.
namespace tf32_probe {

using namespace mpverify::experiments;

// The rules by exact arithmetic in double: the operand's multiple of its tf32 spacing (2^(e - 10) in
// binade e, 2^-136 among subnormals), rounded by the C library's trunc, round (ties away) and nearbyint
// (ties even, the default environment), times the spacing; a result of 2^128 becomes inf when cast.
float reference(float x, int rule) {
  const double v = x;
  int e = 0;
  std::frexp(v, &e);  // v = f * 2^e, f in [0.5, 1): binade e - 1
  const double spacing = std::ldexp(1.0, std::max(e - 1, -126) - 10);
  const double q = v / spacing;
  const double r = rule == 0 ? std::trunc(q) : rule == 1 ? std::round(q) : std::nearbyint(q);
  return static_cast<float>(r * spacing);
}

std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }

TEST(Tf32Probe, RulesEqualExactArithmeticOnEveryOperandClassAndTheEdges) {
  std::vector<Tf32Operand> operands = tf32_operands(70000, 3);
  for (const float edge : {std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                           std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(),
                           std::bit_cast<float>(0x007FFFFFu), std::bit_cast<float>(0x3F7FF000u), 1.0f, -0.0f})
    operands.push_back({edge, 0});
  std::size_t checked = 0;
  for (const Tf32Operand& o : operands) {
    const std::uint32_t b = bits(o.value);
    ASSERT_EQ(tf32_truncate(b), bits(reference(o.value, 0))) << std::hex << b;
    ASSERT_EQ(tf32_nearest_away(b), bits(reference(o.value, 1))) << std::hex << b;
    ASSERT_EQ(tf32_nearest_even(b), bits(reference(o.value, 2))) << std::hex << b;
    ++checked;
  }
  EXPECT_EQ(checked, 70008u);
  EXPECT_EQ(tf32_nearest_even(0x7F7FFFFFu), 0x7F800000u);  // FLT_MAX rounds to inf, truncation keeps it finite
  EXPECT_EQ(tf32_truncate(0x7F7FFFFFu), 0x7F7FE000u);
}

// The operands tell every rule from every other: outputs made by one rule fail each other rule somewhere,
// and the census names the rule that made them.
TEST(Tf32Probe, OperandsSeparateEveryPairOfRules) {
  const std::vector<Tf32Operand> operands = tf32_operands(7 * 64, 5);
  for (int made_by = 0; made_by < kTf32Rules; ++made_by) {
    std::vector<float> outputs;
    for (const Tf32Operand& o : operands)
      outputs.push_back(made_by == 3 ? o.value : reference(o.value, made_by));
    const Tf32Census census = tf32_census(operands, outputs);
    EXPECT_EQ(census.all, operands.size());
    EXPECT_EQ(tf32_verdict(census), tf32_rule_names()[static_cast<std::size_t>(made_by)]);
    for (int other = 0; other < kTf32Rules; ++other)
      if (other != made_by) {
        EXPECT_LT(census.total[static_cast<std::size_t>(other)], census.all) << made_by << other;
      }
  }
  // Outputs that follow no rule (each a tf32 step away) get no verdict.
  std::vector<float> off;
  for (const Tf32Operand& o : operands) off.push_back(std::bit_cast<float>(tf32_truncate(bits(o.value)) + 0x4000u));
  EXPECT_EQ(tf32_verdict(tf32_census(operands, off)), "");
}

TEST(Tf32Probe, WithoutAGpuTheSectionSaysTheQuestionIsOpen) {
  nlohmann::ordered_json json = 1;
  const std::string md = tf32_section(false, 1, json);
  EXPECT_NE(md.find("Not measured: no GPU"), std::string::npos);
  EXPECT_TRUE(json.is_null());
}

}  // namespace tf32_probe
