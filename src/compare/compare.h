// Comparing a subject tensor (emulated or GPU output) against a reference.
//
// Three tolerance tiers, each carrying the derivation of its bound so that a
// report can say which bound was used and how much of it an output used:
//  - bit_exact: inputs chosen so that every product and sum is exact
//    (small integers), or conversions compared against hardware;
//  - ulp_bound: element-wise ops, |subject - reference| <= N ulps of the
//    output format at |reference| (or at a per-element scale such as
//    (|A||B|)_ij, for a componentwise bound);
//  - normwise: reductions, ||subject - reference||_2 <= bound * ||reference||_2,
//    with bounds like gamma_k = k u / (1 - k u) from the accumulation length.
// A comparison with no elements, or whose tensors are all zero, fails: it
// would otherwise pass whatever the code computed.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "formats/format.h"

namespace mpverify::compare {

enum class Tier { bit_exact, ulp_bound, normwise };
std::string_view to_string(Tier t);

struct Tolerance {
  Tier tier = Tier::bit_exact;
  double bound = 0;        // ulps for ulp_bound; relative norm for normwise; unused for bit_exact
  std::string derivation;  // where the bound comes from, in one sentence
  // ulp_bound only: when set, element i's ulps are those at max(|reference[i]|, (*ulp_scale)[i]) rather than
  // at |reference[i]|: a componentwise bound such as a dot product's, |error| <= c (|a| . |b|), which
  // cancellation would make unbounded in ulps of the result itself.
  std::shared_ptr<const std::vector<double>> ulp_scale;

  static Tolerance bit_exact(std::string why);
  static Tolerance ulps(double n, std::string why);
  static Tolerance ulps_at_scale(double n, std::shared_ptr<const std::vector<double>> scale, std::string why);
  static Tolerance normwise(double relative, std::string why);
};

// gamma_k = k u / (1 - k u) (Higham, "Accuracy and Stability of Numerical
// Algorithms", 3.1): the bound on the relative error of a length-k recursive
// sum or dot product with unit roundoff u. Throws if k u >= 1.
double gamma(std::int64_t k, double unit_roundoff);

struct Comparison {
  std::size_t elements = 0;
  double max_abs_error = 0;
  double relative_error = 0;          // ||subject - reference||_2 / ||reference||_2
  double bit_identical_fraction = 0;  // float bit patterns equal
  double max_ulp = 0;                 // in the output format, at |reference|
  double max_scaled_ulp = 0;          // at the tolerance's ulp_scale (ulp_bound with a scale), else max_ulp
  // ULP distances in buckets: [0], (0,1], (1,2], (2,4], (4,8], ..., (2^30, inf)
  std::vector<std::uint64_t> ulp_histogram;
  Tolerance tolerance;
  double tolerance_used = 0;  // the tier's metric divided by its bound (<= 1 passes)
  bool passed = false;
  std::string failure;  // why it failed, empty when it passed
};

// Both spans hold the same tensor in the same layout; `output` is the format
// whose ulps measure the distance (values need not be representable in it).
Comparison compare(std::span<const float> reference, std::span<const float> subject,
                   const formats::Format& output, const Tolerance& tolerance);
Comparison compare(std::span<const double> reference, std::span<const float> subject,
                   const formats::Format& output, const Tolerance& tolerance);

// The spacing of `f` at magnitude |x| (the ulp of the binade x lies in; the
// subnormal spacing below the smallest normal).
double ulp_at(const formats::Format& f, double x);

}  // namespace mpverify::compare
