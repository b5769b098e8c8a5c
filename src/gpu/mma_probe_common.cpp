// Which models the probe kernel can issue, by the model's name (emu/mma_presets.h spells the PTX after the
// architecture: smXX.mma.SHAPE.OUT.IN).
#include <algorithm>
#include <string>
#include <vector>

#include "gpu/mma_probe.h"

namespace mpverify::gpu {

const std::vector<std::string>& mma_probe_instructions() {
  static const std::vector<std::string> instructions = {
      "mma.m16n8k16.f32.f16", "mma.m16n8k16.f16.f16",       "mma.m16n8k16.f32.bf16",      "mma.m16n8k8.f32.f16",
      "mma.m16n8k8.f16.f16",  "mma.m16n8k8.f32.bf16",       "mma.m16n8k8.f32.tf32",       "mma.m16n8k4.f32.tf32",
      "mma.m16n8k32.f32.e4m3", "mma.m16n8k32.f32.e4m3.e5m2", "mma.m16n8k32.f32.e5m2.e4m3", "mma.m16n8k32.f32.e5m2",
      // Hopper's wgmma (sm_90a; wgmma_probe.cu), after the mma.sync list whose order the kernel's enum follows
      "wgmma.k16.f32.f16", "wgmma.k16.f16.f16", "wgmma.k16.f32.bf16", "wgmma.k32.f32.e4m3", "wgmma.k32.f32.e4m3.e5m2",
      "wgmma.k32.f32.e5m2.e4m3", "wgmma.k32.f32.e5m2"};
  return instructions;
}

std::string mma_probe_unsupported_reason(const emu::MmaModel& m) {
  const auto dot = m.name.find('.');
  const std::string ptx = dot == std::string::npos ? "" : m.name.substr(dot + 1);
  const auto& probed = mma_probe_instructions();
  if (std::find(probed.begin(), probed.end(), ptx) != probed.end()) return "";
  return "the probe kernels issue mma.sync m16n8k16 and m16n8k8 (f16, bf16), m16n8k8 and m16n8k4 (tf32) and "
         "m16n8k32 (FP8, fp32 output), and Hopper's wgmma k16 (f16, bf16) and k32 (FP8, fp32 output) only, "
         "not " + (m.name == "custom" ? std::string("a custom model") : m.name);
}

}  // namespace mpverify::gpu
