#include "nn/reshape.h"

#include <stdexcept>
#include <string>

#include "nn/tensor_checks.h"

namespace mpverify::nn {

Reshape::Reshape(std::string name, int channels, int height, int width)
    : Layer(std::move(name)), c_(channels), h_(height), w_(width) {
  if (c_ < 1 || h_ < 1 || w_ < 1) {
    std::string message = "Reshape ";
    message += this->name();
    message += ": channels, height and width must be >= 1";
    throw std::invalid_argument(message);
  }
}

Tensor Reshape::forward(Context&, const Tensor& x) {
  const std::size_t per_example = static_cast<std::size_t>(c_) * h_ * w_;
  if (x.example_size() != per_example) {
    std::string message = "Reshape ";
    message += name();
    message += ": an example has ";
    message += std::to_string(x.example_size());
    message += " values, the target shape ";
    message += std::to_string(c_) + " x " + std::to_string(h_) + " x " + std::to_string(w_);
    message += " needs ";
    message += std::to_string(per_example);
    throw std::invalid_argument(message);
  }
  in_n_ = x.n;
  in_c_ = x.c;
  in_h_ = x.h;
  in_w_ = x.w;
  Tensor y;
  y.n = x.n;
  y.c = c_;
  y.h = h_;
  y.w = w_;
  y.values = x.values;
  return y;
}

Tensor Reshape::backward(Context&, const Tensor& dy, bool need_dx) {
  expect_shape(name(), "dy", dy, in_n_, c_, h_, w_);
  if (!need_dx) return {};
  Tensor dx;
  dx.n = in_n_;
  dx.c = in_c_;
  dx.h = in_h_;
  dx.w = in_w_;
  dx.values = dy.values;
  return dx;
}

}  // namespace mpverify::nn
