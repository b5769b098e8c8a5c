// A priori error bounds for the three sides of the losses (refs::*_ref,
// emu::*_emu, gpu::*_gpu), element by element: one element for a forward
// loss, one per gradient element for a backward. The tests hold each side
// to them and `mpverify ops` turns them into its normwise tolerances.
//
// Each side is bounded against the FP64 value on its own view of the inputs:
// the reference sees the float inputs, the emulator and the GPU see them
// rounded to the input format. `input` bounds how far rounding the inputs
// moves the FP64 value, so two sides differ by at most
//   E_a + E_b (+ input when exactly one of them is the reference).
// The derivations are in loss_bounds.cpp, next to each formula. Notation:
// u_F the unit roundoff of format F, eta_F its smallest subnormal (a bound on
// the absolute error of rounding into F's subnormal range, flush-to-zero
// included), gamma_k(u) = k u / (1 - k u).
//
// The GPU bounds assume the GPU kernels of gpu/loss_gpu.cu: fp16 input and
// gradient output, fp32 arithmetic, CUDA's expf within 2 ulps, logf and
// log1pf within 1 ulp (CUDA C Programming Guide, "Mathematical functions"),
// IEEE division (no fast-math). Bounds assume no overflow: an input beyond
// the input format's range makes `input` infinite.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "compare/compare.h"
#include "emu/loss_emu.h"

namespace mpverify::emu {

struct LossErrorBounds {
  std::vector<double> exact;  // the FP64 value on the float inputs
  std::vector<double> input;  // |FP64 on the rounded inputs - exact|
  std::vector<double> ref, emu, gpu;  // each side against FP64 on its own view

  // E_a + E_b (+ input) for sides "ref", "emu" or "gpu", element by element.
  std::vector<double> pair_bound(std::string_view a, std::string_view b) const;
  // The normwise tolerance between two sides: ||pair_bound||_2 over a lower
  // bound on the norm of the first side's output (||exact||_2 less every
  // error term); infinite when that lower bound is not positive.
  compare::Tolerance tolerance(std::string_view a, std::string_view b) const;
  const std::vector<double>& side(std::string_view name) const;
};

LossErrorBounds softmax_cross_entropy_bounds(const ops::SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                             std::span<const std::int32_t> labels, const LossPolicy& policy,
                                             bool backward);
LossErrorBounds mse_bounds(std::span<const float> y, std::span<const float> t, const LossPolicy& policy,
                           bool backward);
LossErrorBounds bce_with_logits_bounds(std::span<const float> x, std::span<const float> t, const LossPolicy& policy,
                                       bool backward);

}  // namespace mpverify::emu
