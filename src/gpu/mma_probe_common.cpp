// Which models the probe kernel can issue: mma.sync shapes of Turing and Ampere (kept by every later
// architecture) and Ada's FP8 m16n8k32 with fp32 output, by the model's name (emu/mma_presets.h spells the PTX: smXX.mma.SHAPE.OUT.IN).
#include <string>

#include "gpu/mma_probe.h"

namespace mpverify::gpu {

std::string mma_probe_unsupported_reason(const emu::MmaModel& m) {
  const auto dot = m.name.find('.');
  const std::string ptx = dot == std::string::npos ? "" : m.name.substr(dot + 1);
  for (const char* probed : {"mma.m16n8k16.f32.f16", "mma.m16n8k16.f16.f16", "mma.m16n8k16.f32.bf16",
                             "mma.m16n8k8.f32.f16", "mma.m16n8k8.f16.f16", "mma.m16n8k8.f32.bf16",
                             "mma.m16n8k8.f32.tf32", "mma.m16n8k4.f32.tf32", "mma.m16n8k32.f32.e4m3",
                             "mma.m16n8k32.f32.e4m3.e5m2", "mma.m16n8k32.f32.e5m2.e4m3", "mma.m16n8k32.f32.e5m2"})
    if (ptx == probed) return "";
  return "the probe kernel issues mma.sync m16n8k16 and m16n8k8 (f16, bf16), m16n8k8 and m16n8k4 (tf32) and "
         "m16n8k32 (FP8, fp32 output) only, "
         "not " + (m.name == "custom" ? std::string("a custom model") : m.name);
}

}  // namespace mpverify::gpu
