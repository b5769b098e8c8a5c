#include "nn/embedding.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "nn/init.h"
#include "nn/tensor_checks.h"

namespace mpverify::nn {

namespace {

[[noreturn]] void refuse(std::string_view layer, const std::string& what) {
  std::string message = "Embedding ";
  message += layer;
  message += ": ";
  message += what;
  throw std::invalid_argument(message);
}

}  // namespace

std::vector<std::int32_t> token_ids(std::string_view layer, const Tensor& x, int vocab) {
  if (x.example_size() != 1) {
    std::string what = "expected one token id per row (n x 1), got ";
    what += std::to_string(x.example_size());
    what += " values per row";
    refuse(layer, what);
  }
  std::vector<std::int32_t> ids(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float v = x.values[i];
    if (!(v >= 0.0f && v < static_cast<float>(vocab) && std::trunc(v) == v)) {
      std::string what = "row ";
      what += std::to_string(i);
      what += " holds ";
      what += std::to_string(v);
      what += ", not a token id (an integer in [0, ";
      what += std::to_string(vocab);
      what += "))";
      refuse(layer, what);
    }
    ids[i] = static_cast<std::int32_t>(v);
  }
  return ids;
}

Embedding::Embedding(std::string name, int vocab, int dim, std::uint64_t seed, std::uint64_t stream)
    : Layer(std::move(name)), vocab_(vocab), dim_(dim) {
  if (vocab < 1 || dim < 1 || vocab >= (1 << 24)) refuse(this->name(), "vocab must be in [1, 2^24) and dim >= 1");
  w_ = make_parameter(this->name() + ".w", static_cast<std::size_t>(vocab) * static_cast<std::size_t>(dim),
                      ParameterKind::weight);
  fill_noise(w_.master, kEmbeddingInitStddev, seed, stream);
}

Tensor Embedding::forward(Context& ctx, const Tensor& x) {
  ids_ = token_ids(name(), x, vocab_);
  const auto D = static_cast<std::size_t>(dim_);
  Tensor y(x.n, dim_);
  for (std::size_t i = 0; i < ids_.size(); ++i)
    for (std::size_t j = 0; j < D; ++j) y.values[i * D + j] = w_.value[static_cast<std::size_t>(ids_[i]) * D + j];
  ctx.store(name(), "y", Role::activation, y.span());
  return y;
}

Tensor Embedding::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  if (need_dx) refuse(name(), "token ids have no gradient (an Embedding is a model's first layer: need_dx false)");
  expect_shape(name(), "dy", dy, static_cast<int>(ids_.size()), dim_, 1, 1);
  const auto D = static_cast<std::size_t>(dim_);
  w_.grad.assign(w_.size(), 0.0f);
  for (std::size_t i = 0; i < ids_.size(); ++i) {
    float* row = w_.grad.data() + static_cast<std::size_t>(ids_[i]) * D;
    for (std::size_t j = 0; j < D; ++j) row[j] += dy.values[i * D + j];  // fp32, row order
  }
  ctx.store(name(), "dw", Role::weight_grad, w_.grad);
  return {};
}

}  // namespace mpverify::nn
