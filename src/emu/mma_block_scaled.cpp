// The block-scaled instructions of mma_block_scaled.h on the fused sum of mma_terms.h. Exactness: an
// mxf8f6f4 product term is mma_model's (the scale exponents only move it); an mxf4nvf4 group term's magnitude
// is |sum of 16 products| * 4 (at most 16 * 36 * 4 = 2304 < 2^12) times two scale significands times 8 (each
// below 16), so below 2^20 with 8 fraction bits; aligned with F = 35 it is shifted left by at most 27 bits,
// below 2^47, and five terms sum below 2^50 (mma_terms.h asks for 2^62 / 5).
#include "emu/mma_block_scaled.h"

#include <array>
#include <cmath>
#include <stdexcept>
#include <string>

#include "emu/mma_terms.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"

namespace mpverify::emu {

namespace {

using detail::MmaTerm;

bool is_e8m0(const formats::Format& f) { return f.name == "e8m0"; }
bool is_ue4m3(const formats::Format& f) { return f.name == "ue4m3"; }

MmaModel block_model(std::string name, const formats::Format& a, const formats::Format& b, int k, int F) {
  MmaModel m{std::move(name), a, b, formats::fp32(), k, F, false, false, MmaOutput::fp32_toward_zero};
  validate(m);
  return m;
}

using ScaleTerm = detail::BlockScaleTerm;

[[noreturn]] void bad_scale(const formats::Format& f, float v) {
  throw std::invalid_argument("block-scaled instruction: " + std::to_string(v) + " is not a value of the scale "
                              "format " + f.name);
}

ScaleTerm scale_term(const formats::Format& f, float v) {
  const ScaleTerm t = detail::block_scale_term(f, v);
  if (!t.valid) bad_scale(f, v);
  return t;
}

void check_lengths(const BlockScaledInstruction& in, std::span<const std::uint32_t> a, std::span<const std::uint32_t> b,
                   std::span<const float> sa, std::span<const float> sb) {
  const std::size_t k = static_cast<std::size_t>(in.model.k), scales = k / static_cast<std::size_t>(in.block);
  if (a.size() != k || b.size() != k || sa.size() != scales || sb.size() != scales)
    throw std::invalid_argument("block_scaled_dot_add: " + in.model.name + " takes k = " + std::to_string(k) +
                                " codes and " + std::to_string(scales) + " scales per operand");
  for (std::size_t i = 0; i < k; ++i)
    if (a[i] >= (1u << in.model.a.width()) || b[i] >= (1u << in.model.b.width()))
      throw std::invalid_argument("block_scaled_dot_add: a code wider than its element format");
}

std::uint32_t nan_result(const MmaModel& m, MmaCounts& counts) {
  ++counts.roundings;
  ++counts.nans;
  return detail::mma_nan_bits(m);
}

std::uint32_t mxf8f6f4(const BlockScaledInstruction& in, std::span<const std::uint32_t> a,
                       std::span<const std::uint32_t> b, float scale_a, float scale_b, std::uint32_t c,
                       MmaCounts& counts) {
  const ScaleTerm sa = scale_term(in.scale, scale_a), sb = scale_term(in.scale, scale_b);
  if (sa.nan || sb.nan) return nan_result(in.model, counts);
  return detail::mma_fused_dot_add(in.model, a, b, c, sa.exponent + sb.exponent, counts);
}

// 2 x each E2M1 code's value: an integer in [-12, 12].
const std::array<int, 16>& fp4_doubled() {
  static const std::array<int, 16> table = [] {
    const formats::Format f = formats::parse_format("fp4-e2m1");
    std::array<int, 16> t{};
    for (std::uint32_t i = 0; i < 16; ++i) t[i] = static_cast<int>(formats::to_double(f, i) * 2);
    return t;
  }();
  return table;
}

std::uint32_t mxf4nvf4(const BlockScaledInstruction& in, std::span<const std::uint32_t> a,
                       std::span<const std::uint32_t> b, std::span<const float> scale_a,
                       std::span<const float> scale_b, std::uint32_t c, MmaCounts& counts) {
  const MmaTerm tc = detail::mma_term(formats::fp32(), c);
  bool nan = tc.nan;
  std::array<ScaleTerm, 4> sa{}, sb{};
  for (std::size_t i = 0; i < scale_a.size(); ++i) {
    sa[i] = scale_term(in.scale, scale_a[i]);
    sb[i] = scale_term(in.scale, scale_b[i]);
    nan = nan || sa[i].nan || sb[i].nan;
  }
  if (nan) return nan_result(in.model, counts);
  if (tc.infinite) {
    ++counts.roundings;
    return detail::mma_infinity_bits(in.model, tc.negative);
  }
  const auto& doubled = fp4_doubled();
  std::array<MmaTerm, 5> terms{};
  terms[0] = tc;
  for (std::size_t g = 0; g < 4; ++g) {
    std::int64_t sum4 = 0;  // the group's exact sum times 4
    for (std::size_t i = g * 16; i < g * 16 + 16; ++i) sum4 += doubled[a[i]] * doubled[b[i]];
    const std::size_t s = g * 16 / static_cast<std::size_t>(in.block);
    const auto magnitude = static_cast<std::uint64_t>(sum4 < 0 ? -sum4 : sum4);
    terms[g + 1] = {sum4 < 0, magnitude * sa[s].significand8 * sb[s].significand8, 2 + 3 + 3,
                    sa[s].exponent + sb[s].exponent};
  }
  return detail::mma_fused_sum(in.model, terms, counts);
}

}  // namespace

namespace detail {

BlockScaleTerm block_scale_term(const formats::Format& f, float v) {
  if (std::isnan(v)) return {0, 0, true, true};
  if (is_e8m0(f)) {
    const int e = std::ilogb(v);  // exact for float subnormals too (2^-127)
    if (!(v > 0) || std::isinf(v) || v != std::ldexp(1.0f, e) || e < -127 || e > 127) return {8, 0, false, false};
    return {8, e, false, true};
  }
  formats::Flags flags;
  if (v < 0 || formats::to_double(f, formats::from_float(f, v, {}, flags)) != v) return {8, 0, false, false};
  if (v == 0) return {0, -126, false, true};
  const int e = std::max(std::ilogb(v), -6);
  return {static_cast<std::uint64_t>(std::ldexp(v, 3 - e)), e, false, true};
}

}  // namespace detail

BlockScaledInstruction mxf8f6f4_instruction(const formats::Format& a, const formats::Format& b) {
  for (const formats::Format* f : {&a, &b})
    if (f->width() > 8 || !f->is_signed || f->exponent_bits < 2)
      throw std::invalid_argument("kind::mxf8f6f4 takes FP8, FP6 or FP4 elements, not " + f->name);
  return {BlockScaledInstruction::Kind::mxf8f6f4,
          block_model("sm100.tcgen05.mxf8f6f4.block32.f32." + a.name + "." + b.name + ".ue8m0", a, b, 32, 25),
          formats::parse_format("e8m0"), 32};
}

BlockScaledInstruction mxf4nvf4_instruction(const formats::Format& scale, int block) {
  if (!(is_e8m0(scale) && (block == 32 || block == 16)) && !(is_ue4m3(scale) && block == 16))
    throw std::invalid_argument("kind::mxf4nvf4 takes e8m0 scales per 32 or 16 elements or ue4m3 scales per 16, "
                                "not " + scale.name + " per " + std::to_string(block));
  const formats::Format fp4 = formats::parse_format("fp4-e2m1");
  return {BlockScaledInstruction::Kind::mxf4nvf4,
          block_model("sm100.tcgen05.mxf4nvf4.block" + std::to_string(block) + ".f32.e2m1." + scale.name, fp4, fp4,
                      64, 35),
          scale, block};
}

std::uint32_t block_scaled_dot_add(const BlockScaledInstruction& in, std::span<const std::uint32_t> a,
                                   std::span<const std::uint32_t> b, std::span<const float> scale_a,
                                   std::span<const float> scale_b, std::uint32_t c, MmaCounts* counts) {
  check_lengths(in, a, b, scale_a, scale_b);
  MmaCounts local;
  MmaCounts& n = counts ? *counts : local;
  if (in.kind == BlockScaledInstruction::Kind::mxf8f6f4) return mxf8f6f4(in, a, b, scale_a[0], scale_b[0], c, n);
  return mxf4nvf4(in, a, b, scale_a, scale_b, c, n);
}

}  // namespace mpverify::emu
