#include "metrics/fid_features.h"

#include <Eigen/Core>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "refs/eigen_blocking.h"

namespace mpverify::metrics {

namespace {

using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

std::string exact_number_text(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

// The first non-finite value in row-major order, reported with the row
// counted from `first_row`.
void check_finite(std::span<const double> values, std::size_t cols, std::size_t first_row, const std::string& name) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (std::isfinite(values[i])) continue;
    std::string m = name;
    m += ": non-finite value ";
    m += exact_number_text(values[i]);
    m += " at row " + std::to_string(first_row + i / cols) + ", column " + std::to_string(i % cols);
    m += " (rows and columns count from 0; FID and KID need finite features: drop or fix that sample)";
    throw std::invalid_argument(m);
  }
}

}  // namespace

void check_feature_matrix(const FeatureMatrix& m, std::size_t min_rows) {
  if (m.cols == 0) throw std::invalid_argument(m.name + ": no feature dimensions (0 columns)");
  if (m.values.size() != m.rows * m.cols) {
    std::string msg = m.name;
    msg += ": " + std::to_string(m.values.size()) + " values, but " + std::to_string(m.rows) + " rows x " +
           std::to_string(m.cols) + " columns need " + std::to_string(m.rows * m.cols);
    throw std::invalid_argument(msg);
  }
  if (m.rows < min_rows) {
    std::string msg = m.name;
    msg += ": " + std::to_string(m.rows) + " rows (samples); at least " + std::to_string(min_rows) +
           " are needed (a sample covariance needs 2)";
    throw std::invalid_argument(msg);
  }
  check_finite(m.values, m.cols, 0, m.name);
}

void check_same_dimensions(const FeatureMatrix& a, const FeatureMatrix& b) {
  if (a.cols == b.cols) return;
  std::string msg = a.name;
  msg += " has " + std::to_string(a.cols) + " feature dimensions (columns) but " + b.name + " has " +
         std::to_string(b.cols) + ": both must come from the same feature extractor";
  throw std::invalid_argument(msg);
}

FeatureStats::FeatureStats(std::size_t dims, std::string name)
    : dims_(dims), name_(std::move(name)), mean_(dims, 0.0), m2_(dims * dims, 0.0) {
  if (dims == 0) throw std::invalid_argument(name_ + ": no feature dimensions (0 columns)");
}

void FeatureStats::add_batch(std::span<const double> values, std::size_t rows) {
  refs::pin_eigen_blocking();
  if (values.size() != rows * dims_) {
    std::string msg = name_;
    msg += ": a batch of " + std::to_string(values.size()) + " values is not " + std::to_string(rows) + " rows x " +
           std::to_string(dims_) + " columns";
    throw std::invalid_argument(msg);
  }
  if (rows == 0) return;
  check_finite(values, dims_, count_, name_);
  // Two passes over the batch: its mean, then the centred outer products.
  const Eigen::Map<const RowMajor> x(values.data(), static_cast<Eigen::Index>(rows), static_cast<Eigen::Index>(dims_));
  const Eigen::RowVectorXd batch_mean = x.colwise().mean();
  const RowMajor centred = x.rowwise() - batch_mean;
  RowMajor batch_m2 = centred.transpose() * centred;

  Eigen::Map<Eigen::RowVectorXd> mean(mean_.data(), static_cast<Eigen::Index>(dims_));
  Eigen::Map<RowMajor> m2(m2_.data(), static_cast<Eigen::Index>(dims_), static_cast<Eigen::Index>(dims_));
  if (count_ == 0) {
    mean = batch_mean;
    m2 = batch_m2;
    count_ = rows;
    return;
  }
  const double na = static_cast<double>(count_), nb = static_cast<double>(rows), n = na + nb;
  const Eigen::RowVectorXd delta = batch_mean - mean;
  mean += delta * (nb / n);
  m2 += batch_m2 + (na * nb / n) * (delta.transpose() * delta);
  count_ += rows;
}

void FeatureStats::add(const FeatureMatrix& m) {
  if (m.cols != dims_) {
    std::string msg = m.name;
    msg += " has " + std::to_string(m.cols) + " columns; the statistics have " + std::to_string(dims_);
    throw std::invalid_argument(msg);
  }
  add_batch(m.values, m.rows);
}

void FeatureStats::merge(const FeatureStats& other) {
  if (other.dims_ != dims_) {
    std::string msg = name_;
    msg += ": cannot merge statistics of " + std::to_string(other.dims_) + " dimensions into " +
           std::to_string(dims_);
    throw std::invalid_argument(msg);
  }
  if (other.count_ == 0) return;
  if (count_ == 0) {
    count_ = other.count_;
    mean_ = other.mean_;
    m2_ = other.m2_;
    return;
  }
  const auto d = static_cast<Eigen::Index>(dims_);
  Eigen::Map<Eigen::RowVectorXd> mean(mean_.data(), d);
  Eigen::Map<RowMajor> m2(m2_.data(), d, d);
  const Eigen::Map<const Eigen::RowVectorXd> other_mean(other.mean_.data(), d);
  const Eigen::Map<const RowMajor> other_m2(other.m2_.data(), d, d);
  const double na = static_cast<double>(count_), nb = static_cast<double>(other.count_), n = na + nb;
  const Eigen::RowVectorXd delta = other_mean - mean;
  mean += delta * (nb / n);
  m2 += other_m2 + (na * nb / n) * (delta.transpose() * delta);
  count_ += other.count_;
}

GaussianStats FeatureStats::gaussian() const {
  if (count_ < 2) {
    std::string msg = name_;
    msg += ": " + std::to_string(count_) + " rows (samples); at least 2 are needed for a sample covariance";
    throw std::invalid_argument(msg);
  }
  GaussianStats g;
  g.mean = mean_;
  g.count = count_;
  g.covariance.resize(m2_.size());
  const double denominator = static_cast<double>(count_ - 1);
  // M2 is symmetric in exact arithmetic, and centred^T centred is computed
  // symmetrically by Eigen, but the merges add rounding; keep it exactly
  // symmetric so that both triangles say the same.
  for (std::size_t i = 0; i < dims_; ++i)
    for (std::size_t j = 0; j < dims_; ++j)
      g.covariance[i * dims_ + j] = 0.5 * (m2_[i * dims_ + j] + m2_[j * dims_ + i]) / denominator;
  return g;
}

GaussianStats gaussian_stats(const FeatureMatrix& m) {
  check_feature_matrix(m, 2);
  FeatureStats s(m.cols, m.name);
  s.add_batch(m.values, m.rows);
  return s.gaussian();
}

}  // namespace mpverify::metrics
