#include "record/tensor_stats.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <numbers>
#include <stdexcept>
#include <string>
#include <vector>

#include "emu/quantize.h"
#include "formats/arithmetic.h"
#include "record/tensor_stats_fused.h"

namespace mpverify::record {

namespace {

bool exact_in_float(double v) {
  if (!std::isfinite(v)) return true;  // NaN and infinities only come from x itself
  const float f = static_cast<float>(v);
  return std::isfinite(f) && static_cast<double>(f) == v;
}

// The largest finite |x| (0 when none), on the bit patterns: |x| orders as its pattern with the sign
// cleared, and every pattern below infinity's is finite. Integer compares without a branch, which the
// compiler vectorizes (a float max with an isfinite test per element does not).
float finite_max_abs(std::span<const float> x) {
  constexpr std::int32_t infinity_bits = 0x7f800000;
  std::int32_t max_bits = 0;
  for (const float xi : x) {
    const std::int32_t b = std::bit_cast<std::int32_t>(xi) & 0x7fffffff;
    max_bits = std::max(max_bits, b < infinity_bits ? b : 0);
  }
  return std::bit_cast<float>(max_bits);
}

// The norm's definition (tensor_stats.h), the order the fused pass keeps: eight interleaved partial sums
// keep the adder busy and vectorize. Non-finite values add 0, without a branch (|v| <= FLT_MAX is false
// for infinities and NaN).
double l2_norm(std::span<const float> x) {
  constexpr std::size_t lanes = 8;
  std::array<double, lanes> sums{};
  auto square = [](float v) {
    const double d = std::fabs(v) <= std::numeric_limits<float>::max() ? static_cast<double>(v) : 0.0;
    return d * d;
  };
  std::size_t i = 0;
  for (; i + lanes <= x.size(); i += lanes)
    for (std::size_t j = 0; j < lanes; ++j) sums[j] += square(x[i + j]);
  for (; i < x.size(); ++i) sums[0] += square(x[i]);
  return std::sqrt(((sums[0] + sums[1]) + (sums[2] + sums[3])) + ((sums[4] + sums[5]) + (sums[6] + sums[7])));
}

double rate(std::uint64_t part, std::uint64_t whole) {
  return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

// log2(a / b) for positive a, b as n + log2(r), with a = ma 2^ea and
// b = mb 2^eb read exactly by frexp, r = ma / mb (one rounding) brought into
// [1/sqrt 2, sqrt 2) by an exact factor 2 and n = ea - eb adjusted to match:
// an exact integer when a / b is a power of two (r == 1), and a small headroom
// (r near 1, n == 0) keeps log2's relative accuracy instead of cancelling.
double headroom_log2(double a, double b) {
  int ea = 0, eb = 0;
  const double ma = std::frexp(a, &ea), mb = std::frexp(b, &eb);
  double r = ma / mb;
  int n = ea - eb;
  if (r >= std::numbers::sqrt2) { r /= 2; n += 1; }
  else if (r < std::numbers::sqrt2 / 2) { r *= 2; n -= 1; }
  return static_cast<double>(n) + std::log2(r);
}

// The counters and the histogram by the separate passes (the definition): quantize or scalar rounding,
// ExponentHistogram::add; returns the largest finite |x|.
float separate_passes(std::span<const float> x, const formats::Format& target, double scale, StatsPath path,
                      TensorStats& s) {
  // Products computed once; `all_exact` decides the path. At scale 1 (activations, and every tensor of a
  // run without a loss scale) x is its own product: no copy, and the quantize path.
  std::vector<float> products;
  bool all_exact = true;
  if (scale != 1.0) {
    products.resize(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double v = static_cast<double>(x[i]) * scale;
      all_exact = all_exact && exact_in_float(v);
      products[i] = std::isnan(x[i]) ? x[i] : static_cast<float>(v);  // NaN kept as in x (payload, signalling bit)
    }
  }
  const std::span<const float> exact = scale != 1.0 ? std::span<const float>(products) : x;
  const float max_abs = finite_max_abs(x);
  if (path == StatsPath::quantize && !all_exact)
    throw std::invalid_argument("tensor_stats: path quantize, but some x * scale is not exactly a float");
  if (path == StatsPath::automatic) path = all_exact ? StatsPath::quantize : StatsPath::scalar;

  if (path == StatsPath::quantize) {
    // Rounded in chunks through a small buffer: the values are not kept, and a buffer the tensor's size
    // would be a fresh allocation (and its page faults) on every call. The counters add up.
    const emu::QuantizeSpec spec{target};
    std::array<float, 4096> rounded;
    for (std::size_t i = 0; i < exact.size(); i += rounded.size()) {
      const auto part = exact.subspan(i, std::min(rounded.size(), exact.size() - i));
      emu::quantize(part, std::span<float>(rounded).first(part.size()), spec, &s.counters);
    }
  } else {
    const formats::RoundingContext rc{};
    for (const float xi : x) {
      formats::Flags flags;
      std::uint32_t bits = 0;
      double v = 0;
      if (std::isnan(xi)) {
        // From the float, as quantize does: widening would quiet a signalling NaN.
        v = xi;
        bits = formats::from_float(target, xi, rc, flags);
      } else {
        v = static_cast<double>(xi) * scale;
        bits = formats::from_double(target, v, rc, flags);
      }
      emu::count_rounding(s.counters, target, v, bits, flags);
    }
  }
  s.histogram.add(x, static_cast<float>(scale));
  s.norm = l2_norm(x);
  return max_abs;
}


void check_stats_scale(double scale) {
  if (!(std::isfinite(scale) && scale > 0 && static_cast<double>(static_cast<float>(scale)) == scale))
    throw std::invalid_argument("tensor_stats: scale " + std::to_string(scale) +
                                " is not a finite positive float value");
}

// What tensor_stats derives from the counters and the largest |x|.
void derive_tensor_stats(TensorStats& s, const formats::Format& target, double scale) {
  const emu::Counters& c = s.counters;
  s.thresholds = emu::format_thresholds(target);
  s.count = c.elements;
  s.zeros_in = c.zeros_in;
  s.nonfinite_in = c.nonfinite_in;
  s.nonzero_finite = c.elements - c.zeros_in - c.nonfinite_in;
  s.underflow_to_zero_rate = rate(c.underflow_to_zero, s.nonzero_finite);
  s.subnormal_rate = rate(c.subnormal, s.nonzero_finite);
  s.overflow_rate = rate(c.overflow, s.nonzero_finite);
  s.headroom_log2 = s.max_abs == 0 ? std::numeric_limits<double>::infinity()
                                   : headroom_log2(target.max_finite(), s.max_abs * scale);
}

}  // namespace

TensorStats finish_tensor_stats(TensorStats counted, const formats::Format& target, double scale) {
  check_stats_scale(scale);
  const emu::Counters& c = counted.counters;
  if (c.zeros_in > c.elements || c.nonfinite_in > c.elements - c.zeros_in)
    throw std::invalid_argument("finish_tensor_stats: " + std::to_string(c.zeros_in) + " zeros and " +
                                std::to_string(c.nonfinite_in) + " non-finite values in " +
                                std::to_string(c.elements) + " elements");
  const std::uint64_t nonzero = c.elements - c.zeros_in - c.nonfinite_in;
  if (c.underflow_to_zero > nonzero || c.subnormal > nonzero - c.underflow_to_zero || c.overflow > nonzero)
    throw std::invalid_argument("finish_tensor_stats: more values underflowing, subnormal or overflowing than the " +
                                std::to_string(nonzero) + " non-zero finite ones");
  if (!(counted.max_abs >= 0 && std::isfinite(counted.max_abs)))
    throw std::invalid_argument("finish_tensor_stats: max_abs " + std::to_string(counted.max_abs) +
                                " is not a finite |x|");
  derive_tensor_stats(counted, target, scale);
  return counted;
}

TensorStats tensor_stats(std::span<const float> x, const formats::Format& target, double scale, StatsPath path) {
  check_stats_scale(scale);
  TensorStats s;

  float max_abs = 0;
  const detail::RoundingClassifier* fused =
      scale == 1.0 && (path == StatsPath::automatic || path == StatsPath::fused) ? &detail::rounding_classifier(target)
                                                                               : nullptr;
  if (fused != nullptr && fused->usable) {
    detail::FusedResult r = detail::fused_pass(
        x, *fused, detail::fastest_fused_kernel());
    s.counters = r.counters;
    s.histogram = r.histogram;
    s.norm = r.norm;
    max_abs = r.max_abs;
  } else if (path == StatsPath::fused) {
    throw std::invalid_argument("tensor_stats: path fused needs scale 1 and a signed format with a zero and "
                                "subnormals that the fused pass classifies; " + target.name + " at scale " +
                                std::to_string(scale) + " is not one");
  } else {
    max_abs = separate_passes(x, target, scale, path, s);
  }

  s.max_abs = max_abs;
  derive_tensor_stats(s, target, scale);
  return s;
}

}  // namespace mpverify::record
