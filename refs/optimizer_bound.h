// A priori error bounds for the optimizer sides, by running error analysis
// (Higham, "Accuracy and Stability of Numerical Algorithms", 3.3): the steps
// of refs/optimizer_ref.h are replayed on (value, bound) pairs, where value is
// the result in exact arithmetic from the same inputs and hyperparameters (as
// Python computes them in double), and bound bounds |side's result - value|
// given how that side rounds. Each operation adds its propagated error plus
// its own rounding, u |result| + eta for a format with unit roundoff u and
// half its smallest subnormal eta; a hyperparameter rounded to float adds its
// own, known, error. Two sides a and b then differ by at most
// bound_a + bound_b, element by element.
//
// Storing w + u in the weight format errs by at most min(u_w |w + u| + eta_w,
// |u|): w is a value of the format, so rounding to nearest is never farther
// from w + u than w itself. That is why an fp16-pure side, which loses most of
// its updates, is still within about sum |u| of the others, not sum u_w |w|.
//
// The exact values are computed in double (the FP64 reference's values), and
// magnitudes are taken from them; their own error is below 2^-40 of them in
// these short recurrences, which the factor 1 + 2^-20 in normwise_bound
// absorbs. Preconditions: the initial weights are values of every side's
// weight format, the initial state is zero, no overflow (a side that
// overflows is not finite and fails its comparison anyway).
#pragma once

#include <span>
#include <vector>

#include "formats/format.h"
#include "refs/optimizer_ref.h"

namespace mpverify::refs {

// How a side rounds. A unit roundoff of 0 means "no rounding there".
struct SideRounding {
  bool fp32_math = true;  // false: every operation in double, hyperparameters unrounded
  double grad_u = 0, grad_eta = 0;    // the gradient rounded on entry
  double state_u = 0, state_eta = 0;  // the state rounded when stored, after its fp32 update
  double weight_u = 0x1p-24, weight_eta = 0x1p-150;  // the weight storage
  bool weights_via_fp32 = false;  // w + u rounded to fp32 first, then to the weight format

  static SideRounding fp64_reference();
  static SideRounding fp32_reference();
  // fp32 math with the tensors stored in these formats (fp32 adds no rounding
  // of its own); via_fp32 as gpu::*_step_gpu rounds its fp16 weights.
  static SideRounding stored(const formats::Format& weights, const formats::Format& state,
                             const formats::Format& grad, bool weights_via_fp32 = false);
};

struct TensorBound {
  std::vector<double> exact;  // the exact result
  std::vector<double> bound;  // |side - exact| <= bound, per element
};

struct OptimizerBounds {
  TensorBound w, v, m;  // m only for Adam; v empty for SGD without momentum
};

// T = grads.size() steps from weights w0 and zero state.
OptimizerBounds sgd_error_bounds(const ops::SgdParams& p, const SideRounding& side, std::span<const float> w0,
                                 const std::vector<std::vector<float>>& grads);
OptimizerBounds adam_error_bounds(const ops::AdamParams& p, const SideRounding& side, std::span<const float> w0,
                                  const std::vector<std::vector<float>>& grads);

// A bound on ||b - a||_2 / ||a||_2 for sides a and b of the same tensor:
// ||bound_a + bound_b|| / (||exact|| - ||bound_a||), times 1 + 2^-20; infinity
// when the denominator is not positive.
double normwise_bound(const TensorBound& a, const TensorBound& b);

}  // namespace mpverify::refs
