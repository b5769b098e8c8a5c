// Block quantization (block_quantize.h): one pass per block, its amax, then
// its scale (block_scale.cpp), then each element rounded once by the format
// layer's round_pack, counted as it is stored.
#include "emu/block_quantize.h"

#include <array>
#include <cmath>
#include <limits>
#include <string>

#include "emu/block_grid.h"
#include "emu/block_scale.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "formats/philox.h"
#include "formats/round_pack.h"

namespace mpverify::emu {

using detail::Block;
using detail::BlockScale;
using formats::Format;

BlockCounters& BlockCounters::operator+=(const BlockCounters& o) {
  elements += o.elements;
  blocks += o.blocks;
  nonfinite_in += o.nonfinite_in;
  saturated += o.saturated;
  underflow_to_zero += o.underflow_to_zero;
  subnormal += o.subnormal;
  scales_clamped += o.scales_clamped;
  inexact += o.inexact;
  return *this;
}

void block_counters_into(const BlockCounters& from, Counters& to) {
  to.elements += from.elements;
  to.inexact += from.inexact;
  to.nonfinite_in += from.nonfinite_in;
  to.overflow += from.saturated;
  to.underflow_to_zero += from.underflow_to_zero;
  to.subnormal += from.subnormal;
}

namespace {

// The element format as the block cast uses it, saturating like Transformer
// Engine's SATFINITE casts, with each code's value and class in a table.
struct ElementCodes {
  Format format;
  double max = 0;
  std::uint32_t max_bits = 0;
  std::array<double, 256> value{};
  std::array<bool, 256> zero{};
  std::array<bool, 256> subnormal{};

  explicit ElementCodes(const Format& element) : format(element) {
    if (element.width() > 8 || !element.is_signed || !element.has_zero)
      throw std::invalid_argument("block quantization: element format " + element.name +
                                  " must be signed, have a zero and fit in 8 bits");
    format.overflow = formats::Overflow::saturate;
    format.validate();
    max = format.max_finite();
    max_bits = format.max_finite_bits();
    for (std::uint32_t b = 0; b < (1u << format.width()); ++b) {
      value[b] = formats::to_double(format, b);
      zero[b] = formats::is_zero(format, b);
      subnormal[b] = formats::is_subnormal(format, b);
    }
  }
};

// The sign of (exact |x / d| - |q|) for q = RN(x / d), d > 0, from the exact
// remainder x - q d (as formats::div decides its quotient's rounding).
int quotient_residual(double x, double d, double q) {
  const double remainder = std::fma(-q, d, x);
  if (remainder == 0) return 0;
  return (remainder > 0) == (q > 0) ? 1 : -1;
}

class Quantizer {
 public:
  Quantizer(std::span<const float> x, const Format& element, const BlockQuantizeOptions& options,
            BlockQuantized& out)
      : x_(x), codes_(element), options_(options), out_(out) {}

  // max |x| over the block, NaN ignored (fmaxf).
  float amax(const Block& b) const {
    float m = 0;
    detail::for_each_index(b, [&](std::size_t i) {
      const float a = std::fabs(x_[i]);
      m = a > m ? a : m;
    });
    return m;
  }

  void quantize(const Block& b, const BlockScale& s) {
    counters_.blocks += 1;
    counters_.elements += b.lines * b.line_len;
    counters_.scales_clamped += s.clamped;
    const bool stochastic = options_.rounding == formats::Rounding::stochastic;
    if (s.divisor == 0) zero_scale(b);
    else if (s.power_of_two) stochastic ? run<true, true>(b, s) : run<true, false>(b, s);
    else stochastic ? run<false, true>(b, s) : run<false, false>(b, s);
  }

  const BlockCounters& counters() const { return counters_; }

 private:
  void store(std::size_t i, std::uint32_t bits, double divisor) {
    out_.codes[i] = static_cast<std::uint8_t>(bits);
    out_.values[i] = static_cast<float>(codes_.value[bits] * divisor);  // one rounding (exact for E8M0)
  }

  // Infinities become +-max (SATFINITE); NaN becomes the format's NaN, or
  // for FP4/FP6 from_float's stand-in +max.
  void nonfinite(std::size_t i, float x, double divisor) {
    counters_.nonfinite_in += 1;
    std::uint32_t bits = 0;
    if (std::isinf(x)) {
      bits = (std::signbit(x) ? codes_.format.sign_mask() : 0u) | codes_.max_bits;
    } else {
      formats::Flags ignored;
      bits = formats::from_float(codes_.format, x, {}, ignored);
    }
    store(i, bits, divisor);
  }

  // X = 0 (a UE4M3 block scale that rounded to 0): x / 0 saturates, 0 stays
  // a signed zero (Transformer Engine multiplies by FLT_MAX here).
  void zero_scale(const Block& b) {
    detail::for_each_index(b, [&](std::size_t i) {
      const float x = x_[i];
      if (!std::isfinite(x)) return nonfinite(i, x, 0.0);
      const std::uint32_t sign = std::signbit(x) ? codes_.format.sign_mask() : 0u;
      store(i, x == 0 ? formats::zero_bits(codes_.format, std::signbit(x)) : sign | codes_.max_bits, 0.0);
      counters_.saturated += x != 0;
      counters_.inexact += x != 0;
    });
  }

  template <bool PowerOfTwo, bool Stochastic>
  void run(const Block& b, const BlockScale& s) {
    const double divisor = s.divisor;
    const double inverse = 1.0 / divisor;            // exact for a power of two
    const double threshold = codes_.max * divisor;   // exact: at most 4 + 28 significant bits
    formats::RoundingContext rc;
    if constexpr (Stochastic) rc.mode = formats::Rounding::stochastic;
    BlockCounters c;
    detail::for_each_index(b, [&](std::size_t i) {
      const float x = x_[i];
      if (!std::isfinite(x)) return nonfinite(i, x, divisor);
      const double wide = x;
      double q = 0;
      int residual = 0;
      if constexpr (PowerOfTwo) {
        q = wide * inverse;  // exact: a power-of-two scaling well inside double's range
      } else {
        q = wide / divisor;
        residual = quotient_residual(wide, divisor, q);
      }
      if constexpr (Stochastic) rc.random = formats::stochastic_draw(options_.seed, options_.stream, i);
      formats::Flags flags;
      const std::uint32_t bits = formats::round_pack(codes_.format, std::signbit(q), std::fabs(q), residual, rc, flags);
      store(i, bits, divisor);
      c.saturated += std::fabs(wide) > threshold;
      c.inexact += flags.has(formats::Flags::inexact);
      c.underflow_to_zero += x != 0 && codes_.zero[bits];
      c.subnormal += codes_.subnormal[bits];
    });
    counters_ += c;
  }

  std::span<const float> x_;
  ElementCodes codes_;
  const BlockQuantizeOptions& options_;
  BlockQuantized& out_;
  BlockCounters counters_;
};

float tensor_amax(std::span<const float> x) {
  float m = 0;
  for (float v : x) {
    const float a = std::fabs(v);
    m = a > m ? a : m;
  }
  return m;
}

BlockScale scale_of(const BlockScheme& scheme, const BlockQuantizeOptions& options, float amax, float tensor_scale) {
  switch (scheme.scale_format) {
    case ScaleFormat::e8m0: return detail::e8m0_scale(amax, scheme.element, options.scale_rule);
    case ScaleFormat::ue4m3_fp32: return detail::nvfp4_block_scale(amax, tensor_scale, scheme.element);
    case ScaleFormat::fp32: return detail::fp32_scale(amax, scheme.element, scheme.amax_floor);
  }
  return {};
}

void check_rounding(formats::Rounding r) {
  if (r != formats::Rounding::nearest_even && r != formats::Rounding::stochastic)
    throw std::invalid_argument("block quantization: rounding " + std::string(formats::to_string(r)) +
                                " is not offered (rne or stochastic)");
}

}  // namespace

BlockQuantized block_quantize(std::span<const float> x, std::span<const std::size_t> shape, int axis,
                              const BlockScheme& scheme, const BlockQuantizeOptions& options) {
  check_rounding(options.rounding);
  const detail::BlockGrid grid(x.size(), shape, axis, scheme);
  BlockQuantized out;
  out.values.resize(x.size());
  out.codes.resize(x.size());
  out.scales.resize(grid.block_count());
  out.scale_shape = grid.scale_shape();
  Quantizer quantizer(x, scheme.element, options, out);
  float tensor_scale = 1;
  if (scheme.scale_format == ScaleFormat::ue4m3_fp32) {
    tensor_scale = detail::nvfp4_tensor_scale(tensor_amax(x), scheme.element);
    out.tensor_scale = tensor_scale;
  }
  grid.for_each_block([&](const Block& b) {
    const BlockScale s = scale_of(scheme, options, quantizer.amax(b), tensor_scale);
    out.scales[b.scale_index] = s.stored;
    quantizer.quantize(b, s);
  });
  out.counters = quantizer.counters();
  return out;
}

double sqnr_db(std::span<const float> reference, std::span<const float> values) {
  if (reference.size() != values.size())
    throw std::invalid_argument("sqnr_db: reference has " + std::to_string(reference.size()) + " elements, values " +
                                std::to_string(values.size()));
  double signal = 0, noise = 0;
  std::size_t counted = 0;
  for (std::size_t i = 0; i < reference.size(); ++i) {
    if (!std::isfinite(reference[i]) || !std::isfinite(values[i])) continue;
    const double r = reference[i], d = r - static_cast<double>(values[i]);
    signal += r * r;
    noise += d * d;
    counted += 1;
  }
  if (counted == 0) return std::numeric_limits<double>::quiet_NaN();
  if (noise == 0) return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(signal / noise);
}

}  // namespace mpverify::emu
