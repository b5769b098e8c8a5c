// Feature matrices and their Gaussian statistics, the inputs of FID and KID.
//
// A feature matrix is N rows (one per sample) of D features, row-major, in
// double. Its statistics are the mean and the sample covariance with the N - 1
// denominator (numpy's `cov`, pytorch-fid), accumulated in FP64 batch by batch
// with Chan et al.'s merge: each batch's mean and centred sum of outer
// products M2 are computed in two passes over the batch, then combined with
//   M2 = M2_a + M2_b + (n_a n_b / n) (mean_b - mean_a)(mean_b - mean_a)^T,
// so features can be streamed and no one-pass sum(x x^T) - n mean mean^T,
// which cancels badly, is ever formed.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace mpverify::metrics {

// A view of N x D features, row-major. `name` is how errors refer to it ("A").
struct FeatureMatrix {
  std::span<const double> values;
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::string name = "features";

  double at(std::size_t row, std::size_t col) const { return values[row * cols + col]; }
};

// Throws std::invalid_argument when values.size() != rows * cols, cols == 0,
// rows < min_rows, or some value is not finite (the message names the matrix,
// the row and the column, counted from 0).
void check_feature_matrix(const FeatureMatrix& m, std::size_t min_rows = 2);

// Throws std::invalid_argument when a and b have different numbers of columns.
void check_same_dimensions(const FeatureMatrix& a, const FeatureMatrix& b);

// Mean and covariance (row-major D x D) of a Gaussian fitted to features, or
// given directly (e.g. precomputed statistics, as pytorch-fid's .npz files).
struct GaussianStats {
  std::vector<double> mean;
  std::vector<double> covariance;  // D x D, symmetric
  std::size_t count = 0;           // samples it came from (0 when given directly)
  std::size_t dims() const { return mean.size(); }
};

// Streaming FP64 mean and covariance (see the top of this file).
class FeatureStats {
 public:
  explicit FeatureStats(std::size_t dims, std::string name = "features");

  // Adds `rows` rows of dims() features. Non-finite values are rejected with
  // their row counted over everything added so far; nothing is added then.
  void add_batch(std::span<const double> values, std::size_t rows);
  void add(const FeatureMatrix& m);
  // Merges another accumulator over the same dimensions (Chan's formula).
  void merge(const FeatureStats& other);

  std::size_t count() const { return count_; }
  std::size_t dims() const { return dims_; }
  const std::vector<double>& mean() const { return mean_; }
  // The centred sum of outer products, row-major D x D.
  const std::vector<double>& m2() const { return m2_; }
  // Mean and covariance M2 / (N - 1); throws std::invalid_argument when N < 2.
  GaussianStats gaussian() const;

 private:
  std::size_t dims_;
  std::string name_;
  std::size_t count_ = 0;
  std::vector<double> mean_;
  std::vector<double> m2_;
};

// FeatureStats over one matrix (checked with check_feature_matrix).
GaussianStats gaussian_stats(const FeatureMatrix& m);

}  // namespace mpverify::metrics
