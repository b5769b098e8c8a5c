// The reference block-scaled GEMM of block_scaled_ref.h. Every step is exact in FP64 until the one rounding:
// an mxf8f6f4 product of two elements (at most 4 significant bits each) times two powers of two, scaled by
// 2^(F - E), is below 2^(F + 2) = 2^27 and at least 2^-400, so trunc() of it is its truncation; 33 such
// integers add exactly. An mxf4nvf4 group sum (a multiple of 2^-2 below 16 * 36) times two UE4M3 significands
// (4 bits each) has at most 20 significant bits; scaled by 2^(35 + e - E) it is below 2^47, and five sum
// below 2^50. The roundings are binary32 casts and operations, not the library's formats code.
#include "refs/block_scaled_ref.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "refs/mma_ref.h"

namespace mpverify::refs {

namespace {

using Scale = BlockScaledOperandRef::Scale;

float canonical_nan() { return std::bit_cast<float>(0x7FFFFFFFu); }

// e of the rule: floor(log2 |x|), at least `emin`; -126 for a zero.
int exponent_of(double x, int emin) { return x == 0 ? -126 : std::max(std::ilogb(x), emin); }

// The exact value rounded toward zero to binary32; 2^128 or more is infinite; a zero is +0.
float toward_zero(double exact) {
  if (exact == 0.0) return 0.0f;
  if (std::fabs(exact) >= 0x1p128) return exact > 0 ? INFINITY : -INFINITY;
  float r = static_cast<float>(exact);
  if (std::fabs(static_cast<double>(r)) > std::fabs(exact)) r = std::nextafter(r, 0.0f);
  return r == 0.0f ? 0.0f : r;
}

// A scale's exponent (UE4M3: at least -6, its format's minimum normal; zero: -126) and significand.
struct SplitScale {
  int exponent;
  double significand;
};
SplitScale split_scale(float s, Scale kind) {
  const int e = exponent_of(s, kind == Scale::ue4m3 ? -6 : -127);
  return {e, s == 0 ? 0.0 : std::ldexp(static_cast<double>(s), -e)};
}

// One mxf8f6f4 instruction: 32 products with one scale pair, and c.
float mxf8f6f4(std::span<const float> a, std::span<const float> b, float sa, float sb, float c, int emin_a,
               int emin_b) {
  double probe = c;
  for (std::size_t i = 0; i < a.size(); ++i) probe += static_cast<double>(a[i]) * b[i] * sa * sb;
  if (std::isnan(probe)) return canonical_nan();
  if (std::isinf(probe)) return static_cast<float>(probe);
  const int scale_exponent = std::ilogb(sa) + std::ilogb(sb);
  int E = exponent_of(c, -126);
  for (std::size_t i = 0; i < a.size(); ++i)
    E = std::max(E, exponent_of(a[i], emin_a) + exponent_of(b[i], emin_b) + scale_exponent);
  constexpr int F = 25;
  double sum = std::trunc(std::ldexp(static_cast<double>(c), F - E));
  for (std::size_t i = 0; i < a.size(); ++i)
    sum += std::trunc(std::ldexp(static_cast<double>(a[i]) * b[i], scale_exponent + F - E));
  return toward_zero(std::ldexp(sum, E - F));
}

// One mxf4nvf4 instruction: 64 products in 4 groups of 16, the scales of a's and b's blocks, and c.
float mxf4nvf4(std::span<const float> a, std::span<const float> b, std::span<const float> sa,
               std::span<const float> sb, std::size_t block, Scale kind, float c) {
  bool nan = std::isnan(c);
  for (std::size_t i = 0; i < sa.size(); ++i) nan = nan || std::isnan(sa[i]) || std::isnan(sb[i]);
  if (nan) return canonical_nan();
  if (std::isinf(c)) return c;
  std::vector<double> significands{std::ldexp(static_cast<double>(c), -exponent_of(c, -126))};
  std::vector<int> exponents{exponent_of(c, -126)};
  for (std::size_t g = 0; g < 64; g += 16) {
    double group = 0;
    for (std::size_t i = g; i < g + 16; ++i) group += static_cast<double>(a[i]) * b[i];
    const SplitScale x = split_scale(sa[g / block], kind), y = split_scale(sb[g / block], kind);
    significands.push_back(group * x.significand * y.significand);
    exponents.push_back(x.exponent + y.exponent);
  }
  constexpr int F = 35;
  const int E = *std::max_element(exponents.begin(), exponents.end());
  double sum = 0;
  for (std::size_t t = 0; t < significands.size(); ++t)
    sum += std::trunc(std::ldexp(significands[t], F + exponents[t] - E));
  return toward_zero(std::ldexp(sum, E - F));
}

// DeepGEMM's promotion of one block: fl32(X_a X_b), then one fused multiply-add into the accumulator.
float hopper_block(std::span<const float> a, std::span<const float> b, float sa, float sb, float final_accum) {
  const formats::Format e4m3 = formats::parse_format("fp8-e4m3");
  const TensorCoreInstruction wgmma{e4m3, e4m3, formats::parse_format("fp32"), 32, 13, false, false,
                                    TensorCoreInstruction::Output::e8m13_toward_zero};
  const float partial = dot_mma_ref(a, b, 0.0f, wgmma);
  const float s = sa * sb;
  const float r = std::fmaf(s, partial, final_accum);
  return std::isnan(r) ? canonical_nan() : r;
}

std::size_t instruction_k(BlockScaledRule rule) {
  return rule == BlockScaledRule::mxf8f6f4 ? 32 : rule == BlockScaledRule::mxf4nvf4 ? 64 : 128;
}

void check(const BlockScaledOperandRef& x, std::size_t k) {
  if (x.block == 0 || x.k % k != 0 || x.k % x.block != 0 || x.values.size() != x.rows * x.k ||
      x.scales.size() != x.rows * (x.k / x.block))
    throw std::invalid_argument("block_scaled_gemm_ref: an operand needs k a multiple of " + std::to_string(k) +
                                " and of its block, rows x k values and rows x k / block scales");
}

// One output element: the chain of the rule's instructions along K.
float element(const BlockScaledOperandRef& a, const BlockScaledOperandRef& b, std::size_t i, std::size_t j,
              BlockScaledRule rule, float alpha) {
  const std::size_t k = instruction_k(rule);
  const auto row = [&](const BlockScaledOperandRef& x, std::size_t r, std::size_t p) {
    return x.values.subspan(r * x.k + p, k);
  };
  const auto scales = [&](const BlockScaledOperandRef& x, std::size_t r, std::size_t p) {
    return x.scales.subspan(r * (x.k / x.block) + p / x.block, std::max<std::size_t>(1, k / x.block));
  };
  float d = 0.0f;
  for (std::size_t p = 0; p < a.k; p += k) {
    if (rule == BlockScaledRule::mxf8f6f4)
      d = mxf8f6f4(row(a, i, p), row(b, j, p), scales(a, i, p)[0], scales(b, j, p)[0], d, a.element.emin(),
                   b.element.emin());
    else if (rule == BlockScaledRule::mxf4nvf4)
      d = mxf4nvf4(row(a, i, p), row(b, j, p), scales(a, i, p), scales(b, j, p), a.block, a.scale, d);
    else
      d = hopper_block(row(a, i, p), row(b, j, p), scales(a, i, p)[0], scales(b, j, p)[0], d);
  }
  if (rule != BlockScaledRule::mxf4nvf4 || alpha == 1.0f) return d;
  const float r = alpha * d;  // the epilogue's binary32 multiply, to nearest-even
  return std::isnan(r) ? canonical_nan() : r;
}

}  // namespace

void block_scaled_gemm_ref(const BlockScaledOperandRef& a, const BlockScaledOperandRef& b, BlockScaledRule rule,
                           float alpha, std::span<float> c) {
  const std::size_t k = instruction_k(rule);
  check(a, k);
  check(b, k);
  if (a.k != b.k || c.size() != a.rows * b.rows || (rule == BlockScaledRule::mxf4nvf4 && a.block != b.block))
    throw std::invalid_argument("block_scaled_gemm_ref: A and B need the same k (and, for mxf4nvf4, block), c "
                                "a.rows x b.rows");
  for (std::size_t i = 0; i < a.rows; ++i)
    for (std::size_t j = 0; j < b.rows; ++j) c[i * b.rows + j] = element(a, b, i, j, rule, alpha);
}

}  // namespace mpverify::refs
