#include "record/nonfinite_count.h"

#include <algorithm>
#include <cstring>

namespace mpverify::record {

namespace {

// Non-finite: every exponent bit set (inf when the fraction is 0, NaN otherwise). The inner loop has no
// branch, a fixed-width load and a counter of the patterns' own width (blocks short enough not to wrap it),
// so the compiler vectorizes it; memcpy reads the bytes without type punning.
template <class Bits>
std::uint64_t count_exponent_all_ones(const void* data, std::size_t count, Bits exponent_mask) {
  constexpr std::size_t kBlock = std::size_t{1} << (sizeof(Bits) == 2 ? 15 : 30);  // below the counter's range
  const auto* bytes = static_cast<const unsigned char*>(data);
  std::uint64_t total = 0;
  for (std::size_t begin = 0; begin < count; begin += kBlock) {
    const std::size_t end = std::min(count, begin + kBlock);
    Bits n = 0;
    for (std::size_t i = begin; i < end; ++i) {
      Bits b;
      std::memcpy(&b, bytes + i * sizeof(Bits), sizeof(Bits));
      n = static_cast<Bits>(n + ((b & exponent_mask) == exponent_mask));
    }
    total += n;
  }
  return total;
}

}  // namespace

std::optional<FloatPattern> float_pattern(std::string_view name) {
  if (name == "fp64" || name == "float64") return FloatPattern::fp64;
  if (name == "fp32" || name == "float32") return FloatPattern::fp32;
  if (name == "fp16" || name == "float16") return FloatPattern::fp16;
  if (name == "bf16" || name == "bfloat16") return FloatPattern::bf16;
  return std::nullopt;
}

std::uint64_t count_nonfinite(const void* data, std::size_t count, FloatPattern pattern) {
  switch (pattern) {
    case FloatPattern::fp64: return count_exponent_all_ones<std::uint64_t>(data, count, 0x7ff0000000000000u);
    case FloatPattern::fp32: return count_exponent_all_ones<std::uint32_t>(data, count, 0x7f800000u);
    case FloatPattern::fp16: return count_exponent_all_ones<std::uint16_t>(data, count, 0x7c00u);
    case FloatPattern::bf16: return count_exponent_all_ones<std::uint16_t>(data, count, 0x7f80u);
  }
  return 0;
}

}  // namespace mpverify::record
