// The scale rules of block_quantize.h, one function per scale format.
#include "emu/block_scale.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "formats/round_pack.h"

namespace mpverify::emu {

namespace {

// floor(log2 a) for a finite a > 0, fp32 subnormals included.
int floor_log2(double a) { return std::ilogb(a); }

// ceil(log2 a) for a finite a > 0.
int ceil_log2(double a) {
  const int e = std::ilogb(a);
  return std::ldexp(1.0, e) == a ? e : e + 1;
}

// Transformer Engine's rceil (transformer_engine/common/util/ptx_arch_spec.cuh, float_to_e8m0,
// fed `amax * Quantized_Limits<OType>::max_norm_rcp` in cast/mxfp8/quantize_mxfp8.cuh): the
// product is an fp32 multiplication by fl32(1/max_elem), and float_to_e8m0 rounds it up to a
// power of two (cvt.rp.satfinite.ue8m0x2.f32 on Blackwell), an fp32 subnormal counting as
// itself (2^-127 stays 2^-127). torchao's _to_mx_rceil computes the same product.
int rceil_exponent(float amax, const formats::Format& element) {
  const float max_rcp = 1.0f / static_cast<float>(element.max_finite());
  const float descale = amax * max_rcp;
  // A product that underflows to 0 (amax below about 2^-141) is far below
  // 2^-127 whichever way it is rounded: clamped either way.
  if (descale == 0) return ceil_log2(static_cast<double>(amax) / element.max_finite());
  return ceil_log2(descale);
}

}  // namespace

// torchao (torchao/prototype/mx_formats/mx_tensor.py, to_mx) reads the
// exponent from the fp32 bits: FLOOR takes it as is, CEIL adds one when the
// fraction bits are non-zero, EVEN first adds half an element ulp to the bits
// (1 << (23 - mbits - 1)) and clears the fraction. For normal amax these are
// the formulas below; for an fp32-subnormal amax every rule falls below -127
// and is clamped, as torchao's are.
int e8m0_scale_exponent(float amax, const formats::Format& element, ScaleRule rule) {
  if (!(amax > 0) || std::isinf(amax))
    throw std::invalid_argument("e8m0_scale_exponent: the amax must be finite and positive");
  const int emax_elem = element.emax();
  switch (rule) {
    case ScaleRule::floor: return floor_log2(amax) - emax_elem;
    case ScaleRule::ceil: return ceil_log2(amax) - emax_elem;
    case ScaleRule::even: {
      // The significand in [1, 2) rounded to mantissa_bits fraction bits
      // (ties up, as torchao's add-and-clear) reaches 2 iff it is at least
      // 2 - 2^-(mantissa_bits + 1); then the exponent is one higher.
      const int e = floor_log2(amax);
      const double significand = std::ldexp(static_cast<double>(amax), -e);
      const bool carries = significand >= 2.0 - std::ldexp(1.0, -(element.mantissa_bits + 1));
      return e + (carries ? 1 : 0) - emax_elem;
    }
    case ScaleRule::rceil: return rceil_exponent(amax, element);
  }
  return 0;
}

namespace detail {

BlockScale e8m0_scale(float amax, const formats::Format& element, ScaleRule rule) {
  int k = 0;
  bool clamped = false;
  if (amax == 0) {
    k = -127;  // Transformer Engine: float_to_e8m0(0) = 0x00
  } else if (std::isinf(amax)) {
    k = 127;  // float_to_e8m0(inf) = 0xFE (satfinite)
  } else {
    const int chosen = e8m0_scale_exponent(amax, element, rule);
    k = std::clamp(chosen, -127, 127);
    clamped = k != chosen;
  }
  return BlockScale{std::ldexp(1.0, k), std::ldexp(1.0f, k), true, clamped};
}

BlockScale fp32_scale(float amax, const formats::Format& element, float amax_floor) {
  amax = std::max(amax, amax_floor);
  // Transformer Engine's compute_scale_from_amax (recipe/recipe_common.cuh)
  // returns scale 1 for an amax of 0 or infinity.
  if (amax == 0 || std::isinf(amax)) return BlockScale{1.0, 1.0f, true, false};
  // DeepSeek-V3 (inference/kernel.py, act_quant_kernel): s = amax / 448. in fp32.
  const float s = amax / static_cast<float>(element.max_finite());
  return BlockScale{static_cast<double>(s), s, false, s == 0};
}

float nvfp4_tensor_scale(float tensor_amax, const formats::Format& element) {
  // Transformer Engine's compute_global_encode_scaling_factor_FP4
  // (cast/nvfp4/core_nvfp4.cuh) is 1 for a global amax of 0 or infinity.
  if (tensor_amax == 0 || std::isinf(tensor_amax)) return 1.0f;
  return tensor_amax / (448.0f * static_cast<float>(element.max_finite()));  // 448 * 6 = 2688 exactly
}

BlockScale nvfp4_block_scale(float block_amax, float tensor_scale, const formats::Format& element) {
  static const formats::Format ue4m3 = formats::parse_format("ue4m3");
  if (block_amax == 0) return BlockScale{0.0, 0.0f, false, false};
  // The quotient rounded once: q = RN(a / d) and the sign of the exact
  // remainder a - q d (fma), as formats::div rounds a quotient.
  const double a = block_amax;
  const double d = element.max_finite() * static_cast<double>(tensor_scale);  // exact: 6 = 3 * 2
  const double q = a / d;                                      // +inf when d is 0
  int residual = 0;
  if (std::isfinite(q)) {
    const double remainder = std::fma(-q, d, a);
    residual = remainder == 0 ? 0 : (remainder > 0 ? 1 : -1);
  }
  formats::Flags flags;
  const formats::RoundingContext rne{};
  const std::uint32_t bits = std::isinf(q) ? ue4m3.max_finite_bits()
                                           : formats::round_pack(ue4m3, false, q, residual, rne, flags);
  const double stored = formats::to_double(ue4m3, bits);
  // Clamped: the rounding overflowed (the quotient lay beyond 464, where RNE
  // would leave 448) or a positive quotient rounded to 0.
  const bool clamped = std::isinf(q) || flags.has(formats::Flags::overflow) || stored == 0;
  return BlockScale{stored * tensor_scale, static_cast<float>(stored), false, clamped};
}

}  // namespace detail

}  // namespace mpverify::emu
