// Experiment 6: the emulator against the hardware. The emulated
// GEMM and conv2d, under each accumulation model the emulator offers (plain
// fp32 accumulation with one rounding per step; the tensor-core model of
// Fasi, Higham, Mikaitis and Pranesh with blocks of 4, 8 and 16 products,
// alignment without guard bits and truncation; fp16 accumulation), against
// cuBLAS and cuDNN on the same seeded inputs: the fraction of output
// elements whose float bits are identical, and the largest distance in ulps.
//
// The GPU side needs a usable device. Without one the report says so (and
// why), and keeps what the CPU can still say: each model's error against
// FP64, and how far the models differ from one another on these inputs
// (which is what lets the hardware comparison tell the models apart).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mpverify::experiments {

struct HardwareConfig {
  std::filesystem::path report = "reports/hardware.md";
  std::uint64_t seed = 1;
  bool gpu = true;  // false: the CPU part only, even when a device is usable
};

struct ModelOutcome {
  std::string model;                // "plain fp32 accumulation", "tensor-core model, block 8", ...
  double error_vs_fp64 = 0;         // normwise relative error
  double identical_to_first = 0;    // bit-identical fraction against the case's first model
  std::optional<double> identical_to_hardware;  // empty without a GPU
  std::optional<double> max_ulp_to_hardware;
};

struct HardwareCase {
  std::string op, shape, formats, hardware;  // hardware: the cuBLAS/cuDNN configuration compared with
  std::vector<ModelOutcome> models;
  std::string hardware_error;  // why the library refused this case on the device ("" when it ran or no GPU)
  std::optional<double> hardware_vs_fp64;  // the hardware's own normwise relative error against FP64
};

struct HardwareResult {
  std::vector<HardwareCase> cases;
  std::string gpu_reason;   // why the GPU side did not run ("" when it ran)
  std::string device;       // the device's name when it ran
  std::vector<std::filesystem::path> files;
  nlohmann::ordered_json json;
};

// Throws std::invalid_argument for a report path that is not NAME.md.
void validate_hardware(const HardwareConfig& config);

// Runs every case, writes the report, returns the figures.
HardwareResult run_hardware(const HardwareConfig& config, const std::function<void(const std::string&)>& progress = {});

}  // namespace mpverify::experiments
