// GELU in FP64, PyTorch's exact form (torch.nn.GELU(approximate='none')):
//   gelu(x)  = x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)),
//   gelu'(x) = Phi(x) + x phi(x),  phi(x) = exp(-x^2 / 2) / sqrt(2 pi),
// not the tanh approximation. 1 + erf(z) is evaluated as erfc(-z), which
// keeps its relative accuracy where erf(z) is near -1 (x << 0: gelu(-10) is
// -7.6e-23, which 1 + erf cancels to 0). Shared by refs/ and the emulator
// through ops::activation_fp64 (ops/fp64_math.h).
#pragma once

namespace mpverify::ops {

double gelu_fp64(double x);
double gelu_derivative_fp64(double x);

// max |gelu'''| over the reals: gelu''' = phi(x) (x^3 - 4x), extreme where
// x^2 = (7 - sqrt 33) / 2 (x = 0.7923...), 0.77877: a bound for the
// truncation of central differences.
inline constexpr double kGeluMaxThirdDerivative = 0.7788;

}  // namespace mpverify::ops
