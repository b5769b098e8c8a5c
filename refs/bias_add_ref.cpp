#include "refs/bias_add_ref.h"

#include <cstddef>

#include "ops/size_check.h"

namespace mpverify::refs {

namespace {

void check_forward(const ops::ChannelShape& s, std::size_t x, std::size_t b, std::size_t y) {
  s.check_dims("bias_add");
  ops::check_size("bias_add", "x", x, s.size());
  ops::check_size("bias_add", "b", b, static_cast<std::size_t>(s.c));
  ops::check_size("bias_add", "y", y, s.size());
}

void check_backward(const ops::ChannelShape& s, std::size_t dy, std::size_t db) {
  s.check_dims("bias_add_backward");
  ops::check_size("bias_add_backward", "dy", dy, s.size());
  ops::check_size("bias_add_backward", "db", db, static_cast<std::size_t>(s.c));
}

}  // namespace

std::vector<double> bias_add_fp64(const ops::ChannelShape& s, std::span<const double> x, std::span<const double> b) {
  check_forward(s, x.size(), b.size(), x.size());
  std::vector<double> y(x.size());
  for (int c = 0; c < s.c; ++c)
    for (std::size_t i = 0; i < s.channel_elements(); ++i) y[s.index(c, i)] = x[s.index(c, i)] + b[c];
  return y;
}

std::vector<double> bias_add_backward_fp64(const ops::ChannelShape& s, std::span<const double> dy) {
  check_backward(s, dy.size(), static_cast<std::size_t>(s.c));
  std::vector<double> db(static_cast<std::size_t>(s.c), 0.0);
  for (int c = 0; c < s.c; ++c)
    for (std::size_t i = 0; i < s.channel_elements(); ++i) db[c] += dy[s.index(c, i)];
  return db;
}

void bias_add_ref(const ops::ChannelShape& s, std::span<const float> x, std::span<const float> b, std::span<float> y) {
  check_forward(s, x.size(), b.size(), y.size());
  const std::vector<double> y64 =
      bias_add_fp64(s, std::vector<double>(x.begin(), x.end()), std::vector<double>(b.begin(), b.end()));
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(y64[i]);
}

void bias_add_backward_ref(const ops::ChannelShape& s, std::span<const float> dy, std::span<float> db) {
  check_backward(s, dy.size(), db.size());
  const std::vector<double> db64 = bias_add_backward_fp64(s, std::vector<double>(dy.begin(), dy.end()));
  for (std::size_t c = 0; c < db.size(); ++c) db[c] = static_cast<float>(db64[c]);
}

}  // namespace mpverify::refs
