#include "nn/sequential.h"

#include <stdexcept>

namespace mpverify::nn {

Sequential::Sequential(std::string name) : Layer(std::move(name)) {}

Layer& Sequential::add(std::unique_ptr<Layer> layer) {
  if (!layer) {
    std::string message = "Sequential ";
    message += name();
    message += ": add() was given no layer";
    throw std::invalid_argument(message);
  }
  layers_.push_back(std::move(layer));
  return *layers_.back();
}

Tensor Sequential::forward(Context& ctx, const Tensor& x) {
  Tensor h = x;
  for (const auto& layer : layers_) h = layer->forward(ctx, h);
  return h;
}

Tensor Sequential::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  Tensor g = dy;
  for (std::size_t i = layers_.size(); i-- > 0;) g = layers_[i]->backward(ctx, g, i > 0 || need_dx);
  return g;
}

std::vector<Parameter*> Sequential::parameters() {
  std::vector<Parameter*> all;
  for (const auto& layer : layers_)
    for (Parameter* p : layer->parameters()) all.push_back(p);
  return all;
}

void Sequential::set_training(bool training) {
  Layer::set_training(training);
  for (const auto& layer : layers_) layer->set_training(training);
}

void Sequential::cast_weights(const Precision& precision) {
  for (Parameter* p : parameters()) nn::cast_weights(*p, precision);
}

}  // namespace mpverify::nn
