// How many values of a tensor are inf or NaN, decided on the bit patterns (an exponent field of all ones),
// for the float types a framework hands over. It answers "did this tensor go non-finite?" in one pass at
// about memory speed, without the recorders' statistics (tensor_stats.h counts the same event among many
// others): the Monitor asks it of module outputs and gradients on every step, recorded or not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace mpverify::record {

// The float types by the width of their patterns and the position of their exponent field.
enum class FloatPattern { fp64, fp32, fp16, bf16 };

// "fp64", "fp32", "fp16", "bf16" (and torch's names float64, float32, float16, bfloat16); nullopt otherwise.
std::optional<FloatPattern> float_pattern(std::string_view name);

// The number of the `count` values at `data` (densely stored, in the pattern's width) that are inf or NaN.
std::uint64_t count_nonfinite(const void* data, std::size_t count, FloatPattern pattern);

}  // namespace mpverify::record
