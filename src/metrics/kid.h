// Kernel Inception Distance (Bińkowski et al., 2018): the unbiased estimate of
// the squared maximum mean discrepancy between two feature sets, with the
// polynomial kernel k(x, y) = (x.y / d + 1)^3, averaged over random subsets.
// Unlike FID it is unbiased, so values at different sample sizes compare.
//
// Defaults follow torch-fidelity (defaults.py, metric_kid.py): 100 subsets of
// min(1000, n_a, n_b) rows each, drawn without replacement independently from
// each set for every subset; the result is the mean over subsets and their
// standard deviation with the 1/K denominator (numpy's std, as torch-fidelity
// reports `kernel_inception_distance_std`). The subsets come from our Philox
// draws, not numpy's RandomState, so they are not torch-fidelity's subsets.
//
// What `kid_stderr` is, precisely: the standard deviation of the K per-subset
// estimates, i.e. the spread of one subset's MMD^2 estimate at this subset
// size (what KID papers quote as "KID ± std"). It is NOT the standard error of
// the mean over the K subsets: the subsets overlap (they are drawn from the
// same rows), so dividing by sqrt(K) would claim a precision that resampling
// the same rows cannot give.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "metrics/fid_features.h"

namespace mpverify::metrics {

struct KidOptions {
  std::size_t subsets = 100;
  std::size_t subset_size = 0;  // 0: min(1000, n_a, n_b)
  std::uint64_t seed = 0;
};

struct KidResult {
  double kid = 0.0;     // mean of the per-subset unbiased MMD^2 estimates
  double kid_stderr = 0.0;  // their standard deviation, 1/K denominator (see the top of this file)
  std::size_t subsets = 0, subset_size = 0;
  std::size_t n_a = 0, n_b = 0, dims = 0;
  std::vector<double> subset_values;  // the K estimates, in draw order
};

// The polynomial kernel (x.y / d + 1)^3.
double polynomial_kernel(std::span<const double> x, std::span<const double> y);

// The unbiased MMD^2 estimate over all rows of x and y (sizes m and n, both
// >= 2): sum_{i != j} k(x_i, x_j) / (m (m - 1)) + sum_{i != j} k(y_i, y_j) /
// (n (n - 1)) - 2 sum_{i, j} k(x_i, y_j) / (m n). With m = n it is
// torch-fidelity's mmd2(..., mmd_est='unbiased'). May be negative.
double mmd2_unbiased(const FeatureMatrix& x, const FeatureMatrix& y);

// KID over seeded subsets. Throws std::invalid_argument for matrices that
// check_feature_matrix rejects, different D, subsets == 0, or a subset size
// below 2 or above min(n_a, n_b).
KidResult kernel_inception_distance(const FeatureMatrix& a, const FeatureMatrix& b, const KidOptions& options = {});

}  // namespace mpverify::metrics
