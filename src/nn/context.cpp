#include "nn/context.h"

#include <algorithm>
#include <cmath>

#include "emu/quantize.h"
#include "emu/rounding_key.h"

namespace mpverify::nn {

std::string_view to_string(Role r) {
  switch (r) {
    case Role::activation: return "activation";
    case Role::activation_grad: return "activation_grad";
    case Role::weight: return "weight";
    case Role::weight_grad: return "weight_grad";
    case Role::update: return "update";
  }
  return "?";
}

std::string_view to_string(Pass p) {
  switch (p) {
    case Pass::forward: return "forward";
    case Pass::backward: return "backward";
    case Pass::optimizer: return "optimizer";
  }
  return "?";
}

bool BlockScaling::applies_to(std::string_view layer) const {
  return std::find(high_precision_layers.begin(), high_precision_layers.end(), layer) == high_precision_layers.end();
}

bool Precision::is_fp32() const {
  const formats::Format f = fp32();
  for (const formats::Format* g : {&matmul_forward, &matmul_backward, &activations, &activation_grads, &weights,
                                   &weight_grads, &master, &elementwise, &norm_statistics, &norm_parameters,
                                   &loss_input, &loss_accumulate})
    if (!(*g == f)) return false;
  return accumulation == emu::Accumulation::fp32 && !operand_scale && !block_scaling &&
         grad_rounding == formats::Rounding::nearest_even && update_rounding == formats::Rounding::nearest_even;
}

const formats::Format& Context::format_of(Role role) const {
  switch (role) {
    case Role::activation: return precision_->activations;
    case Role::activation_grad: return precision_->activation_grads;
    case Role::weight: return precision_->weights;
    case Role::weight_grad: return precision_->weight_grads;
    case Role::update: return precision_->master;
  }
  return precision_->activations;
}

void Context::store(std::string_view layer, std::string_view tensor, Role role, std::span<float> values) {
  store(layer, tensor, role, format_of(role), values);
}

void Context::store(std::string_view layer, std::string_view tensor, Role role, const formats::Format& format,
                    std::span<float> values) {
  if (observer_) exact_.assign(values.begin(), values.end());
  const bool gradient = role == Role::activation_grad || role == Role::weight_grad;
  if (gradient && precision_->grad_rounding == formats::Rounding::stochastic) {
    const emu::RoundingKey key = rounding_key(layer, tensor);
    emu::quantize(values, values, emu::stochastic_spec(format, key));
  } else {
    emu::quantize(values, values, emu::QuantizeSpec{format});
  }
  if (observer_) observer_->on_store(layer, tensor, role, pass_, exact_, values, format);
  if (!first_nonfinite_) {
    std::uint64_t nonfinite = 0;
    for (float v : values) nonfinite += !std::isfinite(v);
    if (nonfinite) first_nonfinite_ = NonfiniteOrigin{std::string(layer), std::string(tensor), pass_, nonfinite};
  }
}

void Context::note_nonfinite(std::string_view layer, std::string_view tensor, std::uint64_t count) {
  if (!first_nonfinite_ && count) first_nonfinite_ = NonfiniteOrigin{std::string(layer), std::string(tensor), pass_, count};
}

emu::RoundingKey Context::rounding_key(std::string_view layer, std::string_view tensor) {
  return emu::rounding_key(seed_, rounding_name(layer, tensor), step_);
}

std::string Context::rounding_name(std::string_view layer, std::string_view tensor) {
  std::string name(layer);
  name += '.';
  name += tensor;
  const std::uint64_t seen = stored_this_step_[name]++;
  if (seen > 0) {
    name += '#';
    name += std::to_string(seen);
  }
  return name;
}

void Context::reset_step() {
  first_nonfinite_.reset();
  stored_this_step_.clear();
}

}  // namespace mpverify::nn
