#include "metrics/fid_statistics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <Eigen/Eigenvalues>

#include "io/npz.h"

namespace mpverify::metrics {

namespace {

namespace fs = std::filesystem;

std::string stats_number_text(double v) {
  char text[64];
  std::snprintf(text, sizeof text, "%.9g", v);
  return text;
}

std::string npz_shape_text(const std::vector<std::uint64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

[[noreturn]] void fail(const fs::path& file, const std::string& what) {
  throw std::invalid_argument(file.string() + ": " + what);
}

constexpr const char* kExpected =
    "a FID statistics file holds mu [d] and sigma [d, d] as float32 or float64, as pytorch-fid --save-stats and "
    "clean-fid write it (np.savez(path, mu=mu, sigma=sigma))";

// The member `key`, checked to be float32/float64 of the given rank, in C order.
std::vector<double> member(const io::TensorFile& f, const std::string& key, std::size_t rank,
                           std::vector<std::uint64_t>& shape) {
  const auto it = std::find_if(f.tensors.begin(), f.tensors.end(), [&](const io::TensorEntry& e) { return e.name == key; });
  if (it == f.tensors.end()) {
    for (const std::string& s : f.skipped)
      if (s.rfind(key + " (", 0) == 0)
        fail(f.path, "'" + key + "' has dtype " + s.substr(key.size() + 2, s.size() - key.size() - 3) +
                         ", not float32 or float64; " + kExpected);
    std::string held;
    for (const io::TensorEntry& e : f.tensors) held += (held.empty() ? "" : ", ") + e.name;
    for (const std::string& s : f.skipped) held += (held.empty() ? "" : ", ") + s;
    fail(f.path, "no array '" + key + "' (the file holds: " + (held.empty() ? "nothing" : held) + "); " + kExpected);
  }
  const io::TensorEntry& e = *it;
  if (e.dtype != io::Dtype::f32 && e.dtype != io::Dtype::f64)
    fail(f.path, "'" + key + "' is " + std::string(io::to_string(e.dtype)) + "; statistics must be float32 or float64 "
                 "(a covariance in half precision has lost the digits FID subtracts)");
  if (e.shape.size() != rank)
    fail(f.path, "'" + key + "' has shape " + npz_shape_text(e.shape) + "; " + kExpected);
  shape = e.shape;
  std::vector<double> values(e.count);
  io::decode_doubles(e.dtype, e.big_endian, e.data.data(), values);
  if (e.fortran_order && rank > 1) values = io::fortran_to_c_order(std::span<const double>(values), e.shape);
  return values;
}

std::string index_text(const std::string& key, std::size_t i) { return key + "[" + std::to_string(i) + "]"; }
std::string index_text(const std::string& key, std::size_t i, std::size_t j) {
  return key + "[" + std::to_string(i) + ", " + std::to_string(j) + "]";
}

void check_values(const fs::path& file, const GaussianStats& g) {
  const std::size_t d = g.dims();
  for (std::size_t i = 0; i < d; ++i)
    if (!std::isfinite(g.mean[i])) fail(file, index_text("mu", i) + " is " + stats_number_text(g.mean[i]) + ", not finite");
  for (std::size_t i = 0; i < d; ++i)
    for (std::size_t j = 0; j < d; ++j)
      if (!std::isfinite(g.covariance[i * d + j]))
        fail(file, index_text("sigma", i, j) + " is " + stats_number_text(g.covariance[i * d + j]) + ", not finite");
  double largest = 0;
  for (std::size_t i = 0; i < d; ++i) {
    const double v = g.covariance[i * d + i];
    if (v < 0)
      fail(file, index_text("sigma", i, i) + " = " + stats_number_text(v) +
                     " is a negative variance: sigma is not a covariance matrix");
    largest = std::max(largest, v);
  }
  const double tolerance = kSymmetryTolerance * largest;
  for (std::size_t i = 0; i < d; ++i)
    for (std::size_t j = i + 1; j < d; ++j) {
      const double a = g.covariance[i * d + j], b = g.covariance[j * d + i];
      if (std::abs(a - b) > tolerance)
        fail(file, "sigma is not symmetric: " + index_text("sigma", i, j) + " = " + stats_number_text(a) + " but " +
                       index_text("sigma", j, i) + " = " + stats_number_text(b) + ", a difference above " +
                       stats_number_text(kSymmetryTolerance) + " of the largest variance (" + stats_number_text(largest) +
                       "); a covariance matrix is symmetric");
    }
}

// A covariance is positive semi-definite. Symmetric with a non-negative diagonal is not enough
// ([[1, 2], [2, 1]] has the eigenvalue -1): clamping such an eigenvalue to 0 as rounding would give a FID
// of a matrix nobody wrote, negative before its clamp at 0. Rounding leaves only small negative eigenvalues:
// float32 storage moves each entry by at most 2^-24 of its size, |sigma_ij| <= the largest variance v, so
// the eigenvalues move by at most ||E||_2 <= d * 2^-24 * v. A Cholesky factorisation of sigma + d * 2^-23 * v * I
// (twice that bound) succeeds for every matrix that is a covariance up to such rounding, and fails where an
// eigenvalue lies further below 0; only then are the eigenvalues computed, to name the smallest.
void check_positive_semidefinite(const fs::path& file, const GaussianStats& g) {
  const auto d = static_cast<Eigen::Index>(g.dims());
  const Eigen::Map<const Eigen::MatrixXd> given(g.covariance.data(), d, d);
  const Eigen::MatrixXd sigma = (given + given.transpose()) / 2;
  const double largest = sigma.diagonal().maxCoeff();
  const double shift = static_cast<double>(d) * 0x1p-23 * largest;
  const Eigen::MatrixXd shifted = sigma + shift * Eigen::MatrixXd::Identity(d, d);
  if (Eigen::LLT<Eigen::MatrixXd>(shifted).info() == Eigen::Success) return;
  const double smallest = Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(sigma, Eigen::EigenvaluesOnly).eigenvalues()(0);
  fail(file, "sigma has the eigenvalue " + stats_number_text(smallest) + ", below 0 by more than rounding (" +
                 stats_number_text(shift) + "): it is not a covariance matrix (positive semi-definite)");
}

}  // namespace

bool is_fid_statistics_file(const fs::path& path) { return path.extension() == ".npz"; }

GaussianStats read_fid_statistics(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) fail(file, "no such file (a FID statistics .npz with mu and sigma)");
  if (fs::is_directory(file, ec)) fail(file, "is a directory, not a FID statistics .npz");
  io::TensorFile f;
  try {
    f = io::read_npz(file);
  } catch (const std::exception& e) {  // io::FileError names the file, the member and the offset
    throw std::invalid_argument(std::string(e.what()) + " (" + kExpected + ")");
  }
  GaussianStats g;
  std::vector<std::uint64_t> mu_shape, sigma_shape;
  g.mean = member(f, "mu", 1, mu_shape);
  g.covariance = member(f, "sigma", 2, sigma_shape);
  const std::uint64_t d = mu_shape[0];
  if (d == 0) fail(file, "'mu' is empty (shape [0]): no features");
  if (sigma_shape[0] != d || sigma_shape[1] != d)
    fail(file, "'sigma' has shape " + npz_shape_text(sigma_shape) + " but 'mu' has " + std::to_string(d) +
                   " features: sigma must be [" + std::to_string(d) + ", " + std::to_string(d) + "]");
  check_values(file, g);
  check_positive_semidefinite(file, g);
  return g;
}

}  // namespace mpverify::metrics
