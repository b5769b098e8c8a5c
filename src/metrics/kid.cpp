#include "metrics/kid.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "data/random.h"
#include "refs/eigen_blocking.h"

namespace mpverify::metrics {

namespace {

using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

Eigen::Map<const RowMajor> as_matrix(const FeatureMatrix& m) {
  return {m.values.data(), static_cast<Eigen::Index>(m.rows), static_cast<Eigen::Index>(m.cols)};
}

// The kernel matrix (x_i . y_j / d + 1)^3.
RowMajor kernel_matrix(const RowMajor& x, const RowMajor& y) {
  refs::pin_eigen_blocking();
  const double d = static_cast<double>(x.cols());
  RowMajor k = x * y.transpose();
  k = (k.array() / d + 1.0).cube().matrix();
  return k;
}

double sum_off_diagonal(const RowMajor& k) { return k.sum() - k.trace(); }

double mmd2(const RowMajor& x, const RowMajor& y) {
  const double m = static_cast<double>(x.rows()), n = static_cast<double>(y.rows());
  return sum_off_diagonal(kernel_matrix(x, x)) / (m * (m - 1.0)) +
         sum_off_diagonal(kernel_matrix(y, y)) / (n * (n - 1.0)) - 2.0 * kernel_matrix(x, y).sum() / (m * n);
}

// `size` distinct rows of `m`, chosen by a partial Fisher-Yates shuffle.
RowMajor draw_rows(const FeatureMatrix& m, std::size_t size, data::Draws& draws, std::vector<std::size_t>& order) {
  order.resize(m.rows);
  std::iota(order.begin(), order.end(), std::size_t{0});
  RowMajor out(static_cast<Eigen::Index>(size), static_cast<Eigen::Index>(m.cols));
  const auto all = as_matrix(m);
  for (std::size_t i = 0; i < size; ++i) {
    const std::size_t j = i + draws.below(m.rows - i);
    std::swap(order[i], order[j]);
    out.row(static_cast<Eigen::Index>(i)) = all.row(static_cast<Eigen::Index>(order[i]));
  }
  return out;
}

}  // namespace

double polynomial_kernel(std::span<const double> x, std::span<const double> y) {
  if (x.size() != y.size() || x.empty())
    throw std::invalid_argument("polynomial_kernel: vectors of " + std::to_string(x.size()) + " and " +
                                std::to_string(y.size()) + " elements (need the same, non-zero size)");
  double dot = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) dot += x[i] * y[i];
  const double base = dot / static_cast<double>(x.size()) + 1.0;
  return base * base * base;
}

double mmd2_unbiased(const FeatureMatrix& x, const FeatureMatrix& y) {
  check_feature_matrix(x);
  check_feature_matrix(y);
  check_same_dimensions(x, y);
  return mmd2(as_matrix(x), as_matrix(y));
}

KidResult kernel_inception_distance(const FeatureMatrix& a, const FeatureMatrix& b, const KidOptions& options) {
  check_feature_matrix(a);
  check_feature_matrix(b);
  check_same_dimensions(a, b);
  if (options.subsets == 0) throw std::invalid_argument("KID: the number of subsets must be at least 1");
  const std::size_t largest = std::min(a.rows, b.rows);
  const std::size_t size = options.subset_size == 0 ? std::min<std::size_t>(1000, largest) : options.subset_size;
  if (size < 2 || size > largest) {
    std::string m = "KID: subset size " + std::to_string(size);
    m += " must be between 2 and the smaller set's " + std::to_string(largest) + " rows (" + a.name + " has " +
         std::to_string(a.rows) + ", " + b.name + " has " + std::to_string(b.rows) + ")";
    throw std::invalid_argument(m);
  }
  if (std::max(a.rows, b.rows) > (std::size_t{1} << 32))
    throw std::invalid_argument("KID: more than 2^32 rows in a set");

  KidResult r;
  r.subsets = options.subsets;
  r.subset_size = size;
  r.n_a = a.rows;
  r.n_b = b.rows;
  r.dims = a.cols;
  r.subset_values.reserve(options.subsets);
  std::vector<std::size_t> order;
  for (std::size_t s = 0; s < options.subsets; ++s) {
    // Streams 2s and 2s + 1: subset s is the same whatever K is.
    data::Draws draws_a(options.seed, 2 * s), draws_b(options.seed, 2 * s + 1);
    const RowMajor x = draw_rows(a, size, draws_a, order);
    const RowMajor y = draw_rows(b, size, draws_b, order);
    r.subset_values.push_back(mmd2(x, y));
  }
  const double k = static_cast<double>(options.subsets);
  double sum = 0.0;
  for (const double v : r.subset_values) sum += v;
  r.kid = sum / k;
  double squares = 0.0;
  for (const double v : r.subset_values) squares += (v - r.kid) * (v - r.kid);
  r.kid_stderr = std::sqrt(squares / k);
  return r;
}

}  // namespace mpverify::metrics
