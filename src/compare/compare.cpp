#include "compare/compare.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>

namespace mpverify::compare {

std::string_view to_string(Tier t) {
  switch (t) {
    case Tier::bit_exact: return "bit-exact";
    case Tier::ulp_bound: return "ulp-bound";
    case Tier::normwise: return "normwise";
  }
  return "?";
}

Tolerance Tolerance::bit_exact(std::string why) { return {Tier::bit_exact, 0, std::move(why), nullptr}; }
Tolerance Tolerance::ulps(double n, std::string why) { return {Tier::ulp_bound, n, std::move(why), nullptr}; }
Tolerance Tolerance::ulps_at_scale(double n, std::shared_ptr<const std::vector<double>> scale, std::string why) {
  return {Tier::ulp_bound, n, std::move(why), std::move(scale)};
}
Tolerance Tolerance::normwise(double relative, std::string why) { return {Tier::normwise, relative, std::move(why), nullptr}; }

double gamma(std::int64_t k, double unit_roundoff) {
  const double ku = static_cast<double>(k) * unit_roundoff;
  if (!(ku < 1)) throw std::invalid_argument("gamma_k needs k*u < 1, got k*u = " + std::to_string(ku));
  return ku / (1 - ku);
}

double ulp_at(const formats::Format& f, double x) {
  const double a = std::fabs(x);
  int exponent = a == 0 ? f.emin() : std::ilogb(a);
  exponent = std::max(exponent, f.emin());
  return std::ldexp(1.0, exponent - f.mantissa_bits);
}

namespace {

std::size_t bucket(double ulps) {
  if (ulps == 0) return 0;
  if (ulps <= 1) return 1;
  const int b = static_cast<int>(std::ceil(std::log2(ulps))) + 1;  // (2^(b-2), 2^(b-1)]
  return static_cast<std::size_t>(std::min(b, 32));
}

template <typename Ref>
Comparison compare_impl(std::span<const Ref> reference, std::span<const float> subject,
                        const formats::Format& output, const Tolerance& tolerance) {
  Comparison c;
  c.tolerance = tolerance;
  c.ulp_histogram.assign(33, 0);
  if (reference.size() != subject.size()) {
    c.failure = "sizes differ: reference " + std::to_string(reference.size()) + ", subject " +
                std::to_string(subject.size());
    return c;
  }
  c.elements = reference.size();
  const std::vector<double>* scale = tolerance.ulp_scale.get();
  if (scale && scale->size() != c.elements) {
    c.failure = "the tolerance's ulp scale has " + std::to_string(scale->size()) + " elements, not " +
                std::to_string(c.elements);
    return c;
  }
  if (c.elements == 0) {
    c.failure = "no element was compared";
    return c;
  }
  double diff_norm2 = 0, ref_norm2 = 0, subject_norm2 = 0;
  std::size_t identical = 0, nonfinite = 0;
  for (std::size_t i = 0; i < c.elements; ++i) {
    const double r = static_cast<double>(reference[i]);
    const double s = static_cast<double>(subject[i]);
    if (!std::isfinite(r) || !std::isfinite(s)) {
      ++nonfinite;
      continue;
    }
    identical += static_cast<double>(static_cast<float>(r)) == r &&
                 std::bit_cast<std::uint32_t>(static_cast<float>(r)) == std::bit_cast<std::uint32_t>(subject[i]);
    const double d = std::fabs(s - r);
    c.max_abs_error = std::max(c.max_abs_error, d);
    const double ulps = d / ulp_at(output, r);
    c.max_ulp = std::max(c.max_ulp, ulps);
    c.max_scaled_ulp = std::max(c.max_scaled_ulp, scale ? d / ulp_at(output, std::max(std::fabs(r), (*scale)[i])) : ulps);
    c.ulp_histogram[bucket(ulps)] += 1;
    diff_norm2 += d * d;
    ref_norm2 += r * r;
    subject_norm2 += s * s;
  }
  c.bit_identical_fraction = static_cast<double>(identical) / static_cast<double>(c.elements);
  c.relative_error = ref_norm2 > 0 ? std::sqrt(diff_norm2 / ref_norm2) : (diff_norm2 > 0 ? INFINITY : 0.0);
  if (nonfinite > 0) {
    c.failure = std::to_string(nonfinite) + " element(s) are NaN or infinite";
    return c;
  }
  if (ref_norm2 == 0 && subject_norm2 == 0) {
    c.failure = "reference and subject are all zero: the comparison would pass whatever was computed";
    return c;
  }
  switch (tolerance.tier) {
    case Tier::bit_exact:
      c.tolerance_used = c.bit_identical_fraction == 1 ? 0 : INFINITY;
      c.passed = c.bit_identical_fraction == 1;
      if (!c.passed)
        c.failure = std::to_string(c.elements - identical) + " of " + std::to_string(c.elements) +
                    " elements differ (bit-exact tier)";
      break;
    case Tier::ulp_bound:
      c.tolerance_used = c.max_scaled_ulp / tolerance.bound;
      c.passed = c.max_scaled_ulp <= tolerance.bound;
      if (!c.passed)
        c.failure = std::string(scale ? "max ulp distance at the tolerance's scale " : "max ulp distance ") +
                    std::to_string(c.max_scaled_ulp) + " > bound " + std::to_string(tolerance.bound);
      break;
    case Tier::normwise:
      c.tolerance_used = c.relative_error / tolerance.bound;
      c.passed = c.relative_error <= tolerance.bound;
      if (!c.passed)
        c.failure = "normwise relative error " + std::to_string(c.relative_error) + " > bound " +
                    std::to_string(tolerance.bound);
      break;
  }
  return c;
}

}  // namespace

Comparison compare(std::span<const float> reference, std::span<const float> subject, const formats::Format& output,
                   const Tolerance& tolerance) {
  return compare_impl(reference, subject, output, tolerance);
}

Comparison compare(std::span<const double> reference, std::span<const float> subject, const formats::Format& output,
                   const Tolerance& tolerance) {
  return compare_impl(reference, subject, output, tolerance);
}

}  // namespace mpverify::compare
