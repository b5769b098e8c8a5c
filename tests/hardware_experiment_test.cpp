// Experiment 6 (experiments/hardware): the CPU side everywhere, the hardware
// side where a device is usable (skipped with the reason otherwise).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "gpu/device.h"
#include "hardware/hardware_experiment.h"

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
