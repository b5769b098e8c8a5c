// The default of nn::Backend's transformer ops (layer norm, softmax): a
// refusal naming the backend. ref and emu override them; the gpu backend has
// no CUDA kernel for them yet and keeps this default, so a gpu run that
// reaches one stops with the reason instead of computing it some other way.
#include <stdexcept>
#include <string>
#include <string_view>

#include "nn/backend.h"

namespace mpverify::nn {

namespace {

[[noreturn]] void no_kernel(BackendKind kind, std::string_view op) {
  std::string message = "the ";
  message += to_string(kind);
  message += " backend has no ";
  message += op;
  message += " kernel yet; use --backend emu (or ref for the fp32 recipe)";
  throw std::invalid_argument(message);
}

}  // namespace

void Backend::layer_norm(const ops::LayerNormShape&, const ops::LayerNormParams&, std::span<const float>,
                         std::span<const float>, std::span<const float>, std::span<float>, std::span<float>,
                         std::span<float>, const emu::LayerNormPolicy&, emu::CounterSet*) {
  no_kernel(kind(), "layer norm");
}

void Backend::layer_norm_backward(const ops::LayerNormShape&, std::span<const float>, std::span<const float>,
                                  std::span<const float>, std::span<const float>, std::span<const float>,
                                  std::span<float>, std::span<float>, std::span<float>, const emu::LayerNormPolicy&,
                                  emu::CounterSet*) {
  no_kernel(kind(), "layer norm backward");
}

void Backend::softmax(const ops::SoftmaxShape&, std::span<const float>, std::span<float>, const emu::SoftmaxPolicy&,
                      emu::CounterSet*) {
  no_kernel(kind(), "softmax");
}

void Backend::softmax_backward(const ops::SoftmaxShape&, std::span<const float>, std::span<const float>,
                               std::span<float>, const emu::SoftmaxPolicy&, emu::CounterSet*) {
  no_kernel(kind(), "softmax backward");
}

}  // namespace mpverify::nn
