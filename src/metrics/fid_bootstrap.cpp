#include "metrics/fid_bootstrap.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "data/random.h"

namespace mpverify::metrics {

namespace {

// The statistics of n rows of m drawn with replacement.
GaussianStats resampled_stats(const FeatureMatrix& m, data::Draws& draws, std::vector<double>& rows) {
  rows.resize(m.rows * m.cols);
  for (std::size_t i = 0; i < m.rows; ++i) {
    const std::size_t source = draws.below(m.rows);
    std::copy_n(m.values.begin() + static_cast<std::ptrdiff_t>(source * m.cols), m.cols,
                rows.begin() + static_cast<std::ptrdiff_t>(i * m.cols));
  }
  FeatureStats s(m.cols, m.name);
  s.add_batch(rows, m.rows);
  return s.gaussian();
}

}  // namespace

double percentile(std::vector<double> values, double q) {
  if (values.empty()) throw std::invalid_argument("percentile of no values");
  if (!(q >= 0.0 && q <= 1.0)) throw std::invalid_argument("percentile: q must be in [0, 1]");
  std::sort(values.begin(), values.end());
  const double position = q * static_cast<double>(values.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(position));
  if (below + 1 >= values.size()) return values.back();
  const double fraction = position - static_cast<double>(below);
  return values[below] + fraction * (values[below + 1] - values[below]);
}

FidBootstrap fid_bootstrap(const FeatureMatrix& generated, const FeatureMatrix& real,
                           const FidBootstrapOptions& options) {
  check_feature_matrix(generated);
  check_feature_matrix(real);
  check_same_dimensions(generated, real);
  if (options.replicates < 2)
    throw std::invalid_argument("FID bootstrap: at least 2 replicates are needed for a standard error");
  if (!(options.level > 0.0 && options.level < 1.0))
    throw std::invalid_argument("FID bootstrap: the interval's level must be in (0, 1), e.g. 0.95");
  if (std::max(generated.rows, real.rows) > (std::size_t{1} << 32))
    throw std::invalid_argument("FID bootstrap: more than 2^32 rows in a set");

  FidBootstrap b;
  b.level = options.level;
  b.replicates = options.replicates;
  b.seed = options.seed;
  b.fid = fid(generated, real, options.route).fid;
  b.values.reserve(options.replicates);
  std::vector<double> rows;
  for (std::size_t r = 0; r < options.replicates; ++r) {
    data::Draws draws_a(options.seed, 2 * r), draws_b(options.seed, 2 * r + 1);
    const GaussianStats a = resampled_stats(generated, draws_a, rows);
    const GaussianStats c = resampled_stats(real, draws_b, rows);
    b.values.push_back(frechet_distance(a, c, options.route).fid);
  }
  const double n = static_cast<double>(b.values.size());
  double sum = 0.0;
  for (const double v : b.values) sum += v;
  const double mean = sum / n;
  double squares = 0.0;
  for (const double v : b.values) squares += (v - mean) * (v - mean);
  b.standard_error = std::sqrt(squares / (n - 1.0));
  const double tail = (1.0 - options.level) / 2.0;
  b.low = percentile(b.values, tail);
  b.high = percentile(b.values, 1.0 - tail);
  return b;
}

}  // namespace mpverify::metrics
