// A chain of layers: forward runs them in order, backward in reverse, each
// layer receiving the gradient the next one returned. Only the first layer
// is asked for its input gradient when the caller is (need_dx): a model's
// first layer has nobody to hand dx to, while the DCGAN discriminator's
// first layer does (the generator's gradient flows through it).
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "nn/layer.h"

namespace mpverify::nn {

class Sequential final : public Layer {
 public:
  explicit Sequential(std::string name);

  // Appends a layer; returns it, typed.
  template <typename L, typename... Args>
  L& add(Args&&... args) {
    auto layer = std::make_unique<L>(std::forward<Args>(args)...);
    L& ref = *layer;
    layers_.push_back(std::move(layer));
    return ref;
  }
  Layer& add(std::unique_ptr<Layer> layer);

  Tensor forward(Context& ctx, const Tensor& x) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx) override;
  // Every layer's parameters, in layer order.
  std::vector<Parameter*> parameters() override;
  // Sets the mode of this container and of every layer in it.
  void set_training(bool training) override;
  // The step's cast of every master weight to the working weights (nn::cast_weights).
  void cast_weights(const Precision& precision);

  std::size_t size() const { return layers_.size(); }
  Layer& layer(std::size_t i) { return *layers_.at(i); }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
};

}  // namespace mpverify::nn
