#include "ops/conv2d_shape.h"

#include <initializer_list>
#include <stdexcept>
#include <string>

namespace mpverify::ops {

int Conv2dShape::p() const { return (h + 2 * pad - r) / stride + 1; }
int Conv2dShape::q() const { return (w + 2 * pad - s) / stride + 1; }

namespace {
std::size_t product(std::initializer_list<int> dims) {
  std::size_t out = 1;
  for (int d : dims) out *= static_cast<std::size_t>(d);
  return out;
}
std::int64_t ceil_div(int a, int b) { return (a + b - 1) / b; }
}  // namespace

std::size_t Conv2dShape::x_size() const { return product({n, c, h, w}); }
std::size_t Conv2dShape::weight_size() const { return product({k, c, r, s}); }
std::size_t Conv2dShape::y_size() const { return product({n, k, p(), q()}); }

std::int64_t Conv2dShape::forward_terms() const { return std::int64_t{c} * r * s; }
std::int64_t Conv2dShape::backward_data_terms() const { return k * ceil_div(r, stride) * ceil_div(s, stride); }
std::int64_t Conv2dShape::backward_filter_terms() const { return std::int64_t{n} * p() * q(); }

void Conv2dShape::check(std::size_t x, std::size_t weight, std::size_t y, const char* x_name,
                        const char* weight_name, const char* y_name) const {
  auto dims = [&] {
    return "n=" + std::to_string(n) + " c=" + std::to_string(c) + " h=" + std::to_string(h) + " w=" +
           std::to_string(w) + " k=" + std::to_string(k) + " r=" + std::to_string(r) + " s=" + std::to_string(s) +
           " stride=" + std::to_string(stride) + " pad=" + std::to_string(pad);
  };
  if (n <= 0 || c <= 0 || h <= 0 || w <= 0 || k <= 0 || r <= 0 || s <= 0)
    throw std::invalid_argument("conv2d: n, c, h, w, k, r, s must be positive, got " + dims());
  if (stride <= 0 || pad < 0)
    throw std::invalid_argument("conv2d: need stride >= 1 and pad >= 0, got " + dims());
  if (h + 2 * pad < r || w + 2 * pad < s)
    throw std::invalid_argument("conv2d: the filter is larger than the padded input, got " + dims());
  auto expect = [](std::size_t got, std::size_t want, const char* name, const char* formula) {
    if (got != want)
      throw std::invalid_argument(std::string("conv2d: ") + name + " has " + std::to_string(got) + " elements, " +
                                  formula + " = " + std::to_string(want));
  };
  expect(x, x_size(), x_name, "n*c*h*w");
  expect(weight, weight_size(), weight_name, "k*c*r*s");
  expect(y, y_size(), y_name, "n*k*p*q");
}

}  // namespace mpverify::ops
