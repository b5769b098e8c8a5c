// The named block-quantization schemes and the scale rules' names.
#include <array>
#include <vector>

#include "emu/block_quantize.h"

namespace mpverify::emu {

namespace {

BlockScheme scheme(std::string name, std::string_view element, ScaleFormat scale, std::size_t rows, std::size_t cols,
                   float amax_floor = 0) {
  return BlockScheme{std::move(name), formats::parse_format(element), scale, rows, cols, amax_floor};
}

}  // namespace

std::span<const BlockScheme> block_schemes() {
  static const std::vector<BlockScheme> schemes = {
      // OCP MX v1.0: 32 consecutive elements along the reduction dimension share an E8M0 scale.
      scheme("mxfp8-e4m3", "fp8-e4m3", ScaleFormat::e8m0, 1, 32),
      scheme("mxfp8-e5m2", "fp8-e5m2", ScaleFormat::e8m0, 1, 32),
      scheme("mxfp6-e2m3", "fp6-e2m3", ScaleFormat::e8m0, 1, 32),
      scheme("mxfp6-e3m2", "fp6-e3m2", ScaleFormat::e8m0, 1, 32),
      scheme("mxfp4", "fp4-e2m1", ScaleFormat::e8m0, 1, 32),
      // NVFP4: 16 elements, a UE4M3 block scale and an fp32 tensor scale (16 x 16 tiles: a copy
      // with block_rows = block_cols = 16).
      scheme("nvfp4", "fp4-e2m1", ScaleFormat::ue4m3_fp32, 1, 16),
      // DeepSeek-V3: activations per 1 x 128 tile, weights per 128 x 128 block, fp32 scales.
      scheme("fp8-tile1x128", "fp8-e4m3", ScaleFormat::fp32, 1, 128, 1e-4f),
      scheme("fp8-block128x128", "fp8-e4m3", ScaleFormat::fp32, 128, 128),
      scheme("fp8-tensor", "fp8-e4m3", ScaleFormat::fp32, 0, 0),
  };
  return schemes;
}

const BlockScheme* find_block_scheme(std::string_view name) {
  for (const BlockScheme& s : block_schemes())
    if (s.name == name) return &s;
  return nullptr;
}

std::string_view to_string(ScaleRule rule) {
  switch (rule) {
    case ScaleRule::floor: return "floor";
    case ScaleRule::ceil: return "ceil";
    case ScaleRule::even: return "even";
    case ScaleRule::rceil: return "rceil";
  }
  return "?";
}

std::optional<ScaleRule> parse_scale_rule(std::string_view name) {
  for (ScaleRule r : {ScaleRule::floor, ScaleRule::ceil, ScaleRule::even, ScaleRule::rceil})
    if (to_string(r) == name) return r;
  return std::nullopt;
}

}  // namespace mpverify::emu
