// The Fréchet distance between two Gaussians fitted to features (FID when the
// features come from an image classifier):
//
//   FID = ||mu_a - mu_b||^2 + Tr(S_a) + Tr(S_b) - 2 Tr((S_a S_b)^(1/2))
//
// in FP64, with sample covariances (N - 1 denominator). The trace term is
// never taken from a general matrix square root of the non-symmetric product
// S_a S_b (scipy's sqrtm, as pytorch-fid does, which can return complex values
// and needs an eps offset on singular inputs). Both routes here work with
// symmetric eigen-decompositions only, whose eigenvalues are real; the few
// negative ones that rounding gives a positive semi-definite matrix are set to
// zero and counted (FidResult::clamping).
//
// Routes (the identity behind both: S_a S_b is similar to S_a^½ S_b S_a^½, so
// Tr((S_a S_b)^½) = Tr((S_a^½ S_b S_a^½)^½)):
// - symmetric_eigen: A = S_a^½ = V diag(sqrt(l)) V^T from S_a = V diag(l) V^T,
//   then the eigenvalues m of the symmetric A S_b A, trace term sum(sqrt(m)).
//   Weakness: an eigenvalue of A S_b A that is only rounding noise, about
//   eps ||A S_b A||, becomes sqrt(eps ||A S_b A||) ~ 1e-8 ||S|| under the
//   square root, and these add up over the null space. FID(X, X) with fewer
//   samples than dimensions then comes out around -d * 1e-8 * ||S||.
// - nuclear_norm (the default): with F = diag(sqrt(l)) V^T (so F^T F = S), the
//   trace term is the sum of the singular values of F_a F_b^T, i.e. the
//   nuclear norm ||S_a^½ S_b^½||_*: (F_a F_b^T)(F_a F_b^T)^T = F_a S_b F_a^T has
//   the non-zero eigenvalues of S_a S_b. Singular values are computed to an
//   absolute error of about eps ||F_a F_b^T||, so noise stays at eps, not
//   sqrt(eps): on identical inputs F_a F_b^T = diag(l) up to eps and the
//   trace term equals Tr(S) to rounding, so FID(X, X) is 0 to about
//   d * eps * ||S|| (tests/fid_test.cpp bounds it).
//   The same holds for singular inputs whose null spaces coincide. (Where the
//   two null spaces differ the answer itself moves by sqrt(eps)-sized amounts
//   under the eps-sized rounding of the covariances: no route that starts
//   from rounded covariances can do better.)
// On full-rank covariances the routes agree with each other to ~1e-14
// relative, and with pytorch-fid's scipy sqrtm recipe within the 1e-6
// relative that tests/fid_test.cpp requires. The singular values on the
// nuclear-norm route come from a bidiagonalisation and the Golub-Kahan
// tridiagonal eigenvalues (fid.cpp says why not Eigen's BDCSVD).
//
// The result is clamped at 0 (the exact FID is non-negative; a computed one
// can come out at -d * eps * ||S|| on identical inputs); fid_raw keeps the
// unclamped value.
//
// FID is biased by the sample size: its expectation falls as N grows (Chong
// & Forsyth, CVPR 2020). Compare FIDs only at equal N (or use KID, kid.h).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "metrics/fid_features.h"

namespace mpverify::metrics {

enum class TraceRoute { nuclear_norm, symmetric_eigen };

std::string to_string(TraceRoute route);
// "nuclear-norm" or "symmetric-eigen"; throws std::invalid_argument otherwise.
TraceRoute parse_trace_route(std::string_view name);

// The negative eigenvalues that rounding left in matrices that are positive
// semi-definite in exact arithmetic (the covariances, and A S_b A on the
// symmetric route), set to zero before their square roots were taken.
struct EigenClamping {
  std::size_t count = 0;           // eigenvalues clamped, over every decomposition made
  double largest_magnitude = 0.0;  // the largest |eigenvalue| among them (0 when none)
  double largest_relative = 0.0;   // that |eigenvalue| over the largest eigenvalue of its matrix
};

struct FidResult {
  double fid = 0.0;         // max(0, fid_raw)
  double fid_raw = 0.0;     // mean_term + trace_a + trace_b - 2 trace_sqrt
  double mean_term = 0.0;   // ||mu_a - mu_b||^2
  double trace_a = 0.0;     // Tr(S_a)
  double trace_b = 0.0;     // Tr(S_b)
  double trace_sqrt = 0.0;  // Tr((S_a^½ S_b S_a^½)^½)
  TraceRoute route = TraceRoute::nuclear_norm;
  EigenClamping clamping;
  std::size_t n_a = 0, n_b = 0, dims = 0;  // samples (0 for given statistics) and dimensions
};

// From statistics: throws std::invalid_argument when the dimensions differ, a
// covariance is not D x D, or a value is not finite. The covariances are
// symmetrised ((S + S^T) / 2) before use.
FidResult frechet_distance(const GaussianStats& a, const GaussianStats& b,
                           TraceRoute route = TraceRoute::nuclear_norm);

// From features: checks both matrices (fid_features.h: at least 2 rows, the
// same D, finite values) and fits their Gaussians.
FidResult fid(const FeatureMatrix& a, const FeatureMatrix& b, TraceRoute route = TraceRoute::nuclear_norm);

}  // namespace mpverify::metrics
