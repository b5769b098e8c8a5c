#include "nn/positional_embedding.h"

#include <stdexcept>
#include <string>

#include "nn/embedding.h"
#include "nn/init.h"
#include "nn/tensor_checks.h"

namespace mpverify::nn {

int sequence_count(std::string_view layer, const Tensor& x, int context_length, int dim) {
  if (x.n >= 1 && x.n % context_length == 0 && x.example_size() == static_cast<std::size_t>(dim))
    return x.n / context_length;
  std::string message = "layer ";
  message += layer;
  message += ": expected a sequence batch of B*T rows (T = ";
  message += std::to_string(context_length);
  message += ") of ";
  message += std::to_string(dim);
  message += " features, got ";
  message += std::to_string(x.n);
  message += " rows of ";
  message += std::to_string(x.example_size());
  throw std::invalid_argument(message);
}

PositionalEmbedding::PositionalEmbedding(std::string name, int context_length, int dim, std::uint64_t seed,
                                         std::uint64_t stream)
    : Layer(std::move(name)), context_length_(context_length), dim_(dim) {
  if (context_length < 1 || dim < 1) {
    std::string message = "PositionalEmbedding ";
    message += this->name();
    message += ": context_length and dim must be >= 1";
    throw std::invalid_argument(message);
  }
  p_ = make_parameter(this->name() + ".w",
                      static_cast<std::size_t>(context_length) * static_cast<std::size_t>(dim),
                      ParameterKind::weight);
  fill_noise(p_.master, kEmbeddingInitStddev, seed, stream);
}

Tensor PositionalEmbedding::forward(Context& ctx, const Tensor& x) {
  sequence_count(name(), x, context_length_, dim_);
  rows_ = x.n;
  const std::size_t block = static_cast<std::size_t>(context_length_) * static_cast<std::size_t>(dim_);
  Tensor y(x.n, dim_);
  for (std::size_t i = 0; i < y.size(); ++i) y.values[i] = x.values[i] + p_.value[i % block];
  ctx.store(name(), "y", Role::activation, y.span());
  return y;
}

Tensor PositionalEmbedding::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  expect_shape(name(), "dy", dy, rows_, dim_, 1, 1);
  const std::size_t block = static_cast<std::size_t>(context_length_) * static_cast<std::size_t>(dim_);
  p_.grad.assign(p_.size(), 0.0f);
  for (std::size_t i = 0; i < dy.size(); ++i) p_.grad[i % block] += dy.values[i];  // fp32, sequence order
  ctx.store(name(), "dw", Role::weight_grad, p_.grad);
  if (!need_dx) return {};
  return dy;
}

}  // namespace mpverify::nn
