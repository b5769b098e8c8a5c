// A seeded bootstrap interval for FID(generated, real): each replicate
// resamples the rows of both sets with replacement (same sizes) and computes
// the FID of the resampled pair; the interval is the percentile interval of
// the replicates at the chosen level, and the standard error their standard
// deviation (N - 1 denominator).
//
// What it measures: the spread of FID that comes from which samples were
// drawn, at these sample sizes. Not the bias: FID's expectation depends on N
// (it falls as N grows, Chong & Forsyth 2020), and a resample with
// replacement holds only about 63% distinct rows, so its effective N is
// smaller and the replicates sit above the full-set FID (visibly so for
// small N). The interval says how much FID moves with the sample; it does
// not correct the bias. Compare FIDs (and their intervals) only at equal N.
//
// Replicate r draws set A's rows from Philox stream 2r and B's from stream
// 2r + 1 under `seed`, so the same seed gives bitwise the same replicates and
// the first R replicates do not depend on how many are asked for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "metrics/fid.h"
#include "metrics/fid_features.h"

namespace mpverify::metrics {

struct FidBootstrapOptions {
  std::size_t replicates = 200;
  double level = 0.95;  // in (0, 1)
  std::uint64_t seed = 0;
  TraceRoute route = TraceRoute::nuclear_norm;
};

struct FidBootstrap {
  double fid = 0.0;             // on the full sets
  double low = 0.0, high = 0.0; // percentile interval of the replicates
  double standard_error = 0.0;  // standard deviation of the replicates, N - 1 denominator
  double level = 0.0;
  std::size_t replicates = 0;
  std::uint64_t seed = 0;
  std::vector<double> values;  // the replicates' FIDs, in draw order
};

// The q-quantile (0 <= q <= 1) of `values` by linear interpolation between
// order statistics (numpy's default "linear" method): position q (n - 1).
double percentile(std::vector<double> values, double q);

// Throws std::invalid_argument for inputs fid() rejects, replicates < 2 or a
// level outside (0, 1).
FidBootstrap fid_bootstrap(const FeatureMatrix& generated, const FeatureMatrix& real,
                           const FidBootstrapOptions& options = {});

}  // namespace mpverify::metrics
