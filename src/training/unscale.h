// Unscaling the gradients after a loss-scaled backward, as each framework
// does it (training/loss_scaler.h lists the number types):
//  - PyTorch (torch), Apex, DeepSpeed, Megatron and the constant scalers
//    multiply by the fp32 inverse: g * fl32(1 / s), the inverse computed in
//    double (PyTorch: scale.double().reciprocal().float());
//  - Keras divides in fp32: g / fl32(s).
// For the usual power-of-two scales the two agree exactly.
#pragma once

#include <span>
#include <string_view>

namespace mpverify::training {

// In place; returns the number of non-finite results (the found_inf check,
// which the frameworks run on the unscaled values).
std::size_t unscale_gradient(std::string_view scaler_name, double scale, std::span<float> grad);

}  // namespace mpverify::training
