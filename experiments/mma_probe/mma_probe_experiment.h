// The tensor-core models against the instruction itself: for each mma.sync the probe kernel issues
// (gpu/mma_probe.h), seeded adversarial dot products (mma_vectors.h) of one instruction and of a chain of
// four go through every architecture's model of that PTX (emu/mma_presets.h: sm75, sm80, sm89, sm90, sm100)
// and through the present GPU; the report gives, per model, the bit-identical fraction and the mismatches
// by kind of case. Without a GPU it says so and gives the models against one another (how many cases can
// tell them apart).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mpverify::experiments {

struct MmaProbeConfig {
  std::filesystem::path report = "reports/mma_probe.md";
  std::uint64_t seed = 1;
  std::size_t cases = 16000;  // per instruction and length
  bool gpu = true;
  // When the GPU ran: one file per instruction and length, DIR/INSTRUCTION.kK.txt, each case as a line of
  // `mpverify eval --op dot` with the GPU's d as the expected result (a recording to check models against).
  std::filesystem::path dump;
  std::size_t dump_cases = 4000;  // the first this many cases of each file
};

struct MmaProbeResult {
  std::string gpu_reason;  // why the GPU side did not run ("" when it ran)
  std::string device;
  int failed_models = 0;   // models of the present GPU's architecture that did not match it bit for bit
  std::vector<std::string> not_probed;  // wgmma instructions the device refused, each with the reason
  std::vector<std::filesystem::path> files;
  nlohmann::ordered_json json;
};

// Throws std::invalid_argument for a report that is not NAME.md or a case count outside 8..10^7.
void validate_mma_probe(const MmaProbeConfig& config);

MmaProbeResult run_mma_probe(const MmaProbeConfig& config, const std::function<void(const std::string&)>& progress = {});

}  // namespace mpverify::experiments
