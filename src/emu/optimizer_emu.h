// Emulated optimizer updates: the reference's float steps (refs/optimizer_ref.h,
// PyTorch's operation order, each operation rounded to fp32) with the tensors
// kept in the policy's formats:
//  - the gradient arrives in `grad` (fp16: as an fp16 model produced it);
//  - the state (SGD's momentum buffer v; Adam's m and v) is stored in `state`,
//    rounded once after each step's fp32 update of it;
//  - the weights are stored in `weights`, and the update is applied as
//    w <- round_weights(w + u) with u = fl32(-lr g'') (SGD) or
//    fl32(fl32(-step_size m) / denom) (Adam): the sum w + u is rounded ONCE
//    into the weight format (emu::add_arrays), which counts lost updates.
// With every format fp32 this is the FP32 reference, bit for bit.
//
// weights=fp32 is the master-weight setup (mixed-precision training keeps an
// fp32 copy the optimizer updates). weights=fp16 is "fp16-pure": no master
// copy, the optimizer writes the fp16 weights directly, and an update smaller
// than half the spacing of fp16 around w is lost (w + u rounds back to w,
// counted as `swamped`). fp16 has p = 11 significant bits: for w in
// [2^e, 2^(e+1)) the spacing is 2^(e-10), so an update with |w|/|u| > 2^12 is
// always lost, one with |w|/|u| < 2^11 is never lost, and in between it
// depends on w's significand, the direction, and ties to even. Example: w = 1,
// u = -2^-12 lands on the midpoint of 1 - 2^-11 and 1 and rounds to the even
// one, 1 (lost); u = -2^-11 gives 1 - 2^-11 (kept); u = +2^-11 is again a tie
// (the spacing above 1 is 2^-10) and is lost. With lr = 1e-3 and gradients of
// 1e-3, SGD's updates are 1e-6 against weights of order 1: almost all lost in
// fp16, and most small steps of the momentum buffer never reach the weights.
// bf16 (p = 8) loses updates below 2^-9 |w| likewise; fp32 only below 2^-25 |w|.
// A real fp16-pure PyTorch step computes w + u in fp32 and rounds that to fp16
// (two roundings); see gpu/optimizer_gpu.h for that variant.
//
// Counter sites (nullptr: counting off): "sgd.w" / "adam.w" (the weights
// given, rounded to the weight format: inexact 0 when they are already in it),
// "sgd.grad" / "adam.grad" (gradient rounding), "sgd.state" / "adam.m",
// "adam.v" (state storage), "sgd.update" / "adam.update" (w + u, with
// addends_nonzero and swamped), and "adam.decay" (adamw's w * (1 - lr wd),
// rounded once into the weight format; a decay that leaves w unchanged is
// counted as swamped).
//
// Stochastic rounding of the write (update_rounding below) rounds w + u up
// with probability equal to its distance from the format's value below, so
// an update too small to move w in nearest-even moves it with probability
// |u| / spacing and the expected weight follows w + u: the weight update of
// Gupta et al. (2015) and of bf16 training without master weights (Zamirai et
// al., 2020). `swamped` then counts the updates that did not move w this
// time, not ones that never can.
#pragma once

#include <span>

#include "emu/counters.h"
#include "emu/rounding_key.h"
#include "formats/format.h"
#include "ops/optimizer_params.h"

namespace mpverify::emu {

struct OptimizerPolicy {
  formats::Format weights = formats::parse_format("fp32");
  formats::Format state = formats::parse_format("fp32");
  formats::Format grad = formats::parse_format("fp32");
  // How the step writes into `weights`: the update w + u and adamw's decay w * c, each rounded once,
  // to nearest even or stochastically (nearest_even or stochastic; anything else is refused). Stochastic:
  // element i of w draws stochastic_draw(key.seed, key.stream, i), update_key for the update and
  // decay_key for the decay (two keys, so that the two roundings of one step never share a draw; the
  // trainer takes both from emu::rounding_key). The gradient and state roundings stay nearest-even.
  formats::Rounding update_rounding = formats::Rounding::nearest_even;
  RoundingKey update_key{}, decay_key{};
};

// Same arguments as refs::sgd_step_ref / adam_step_ref, plus the policy.
// `update` (empty, or the size of w) receives each element's u, the fp32
// value added to w (the recorders' lost-update statistics need it).
void sgd_step_emu(const ops::SgdParams& p, std::int64_t step, std::span<float> w, std::span<float> v,
                  std::span<const float> g, const OptimizerPolicy& policy, CounterSet* counters = nullptr,
                  std::span<float> update = {});
void adam_step_emu(const ops::AdamParams& p, std::int64_t step, std::span<float> w, std::span<float> m, std::span<float> v,
                   std::span<const float> g, const OptimizerPolicy& policy, CounterSet* counters = nullptr,
                   std::span<float> update = {});

}  // namespace mpverify::emu
