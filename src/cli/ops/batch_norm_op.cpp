// `ops --op batch-norm|batch-norm-backward` (training mode):
// refs::batch_norm_ref, emu::batch_norm_emu and gpu::batch_norm_gpu. Outputs:
// y, mean, invstd forward; dx, dgamma, dbeta backward (from the statistics
// of the reference's forward, as values of the statistics format).
#include <cmath>
#include <stdexcept>

#include "cli/commands.h"
#include "cli/ops/ops_registry.h"
#include "emu/batch_norm_bounds.h"
#include "emu/batch_norm_emu.h"
#include "emu/quantize.h"
#include "gpu/batch_norm_gpu.h"
#include "refs/batch_norm_ref.h"

namespace mpverify::cli::ops {

namespace {

// Activations as a network has them: per channel an offset (N(0, 3)) and a
// spread (e^N(0, 1/2)) around it, drawn as values of the input format so
// that the bounds cover what the sides compute, not the drawing.
std::vector<float> activations(const mpverify::ops::ChannelShape& s, std::mt19937_64& rng, const formats::Format& f) {
  const std::vector<float> offset = normal_inputs(static_cast<std::size_t>(s.c), rng, 3.0);
  const std::vector<float> spread = normal_inputs(static_cast<std::size_t>(s.c), rng, 0.5);
  std::vector<float> x = normal_inputs(s.size(), rng, 1.0);
  for (int c = 0; c < s.c; ++c)
    for (std::size_t i = 0; i < s.channel_elements(); ++i)
      x[s.index(c, i)] = offset[c] + std::exp(spread[c]) * x[s.index(c, i)];
  return in_format(std::move(x), f);
}

// ||gpu - ref|| <= ||gpu - emu|| + ||emu - ref||, and ||emu|| <= (1 + b_ref) ||ref||.
double via_emulator(double b_ref, double b_gpu) { return b_ref + b_gpu * (1 + b_ref); }

OpResult run_batch_norm(const OpArgs& args, std::vector<Side> sides) {
  const bool backward = args.op == "batch-norm-backward";
  check_keys(args.shape, {"n", "c", "h", "w"}, "--shape");
  const mpverify::ops::ChannelShape s{whole_number(args.shape, "n", "--shape"), whole_number(args.shape, "c", "--shape"),
                             whole_number(args.shape, "h", "--shape", 1), whole_number(args.shape, "w", "--shape", 1)};
  check_keys(args.policy, {"input", "output", "statistics", "parameters", "lanes", "eps", "momentum"}, "--policy");
  emu::BatchNormPolicy policy;
  policy.input = format_option(args.policy, "input", "--policy", policy.input);
  policy.output = format_option(args.policy, "output", "--policy", policy.output);
  policy.statistics = format_option(args.policy, "statistics", "--policy", policy.statistics);
  policy.parameters = format_option(args.policy, "parameters", "--policy", policy.parameters);
  policy.lanes = whole_number(args.policy, "lanes", "--policy", policy.lanes);
  mpverify::ops::BatchNormParams params;
  params.eps = real_number(args.policy, "eps", "--policy", params.eps);
  params.momentum = real_number(args.policy, "momentum", "--policy", params.momentum);
  try {
    mpverify::ops::check_batch_norm_shape(s, "--shape");
    emu::check_lanes(policy.lanes);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (!(params.eps > 0)) throw UsageError("--policy: eps must be positive");

  std::mt19937_64 rng(args.seed);
  const auto c = static_cast<std::size_t>(s.c);
  const auto x = activations(s, rng, policy.input);
  std::vector<float> gamma = normal_inputs(c, rng, 0.2), beta = normal_inputs(c, rng, 0.2);
  for (float& g : gamma) g += 1.0f;
  gamma = in_format(std::move(gamma), policy.parameters);
  beta = in_format(std::move(beta), policy.parameters);
  const auto dy = in_format(normal_inputs(s.size(), rng, 1.0), policy.input);
  const std::vector<float> running_mean(c, 0.0f), running_var(c, 1.0f);  // PyTorch's initial buffers

  // The backward's saved statistics: the reference forward's, as S values.
  std::vector<float> saved_mean(c), saved_invstd(c);
  if (backward) {
    std::vector<float> y(s.size()), rm = running_mean, rv = running_var;
    refs::batch_norm_ref(s, params, x, gamma, beta, y, saved_mean, saved_invstd, rm, rv);
    saved_mean = in_format(std::move(saved_mean), policy.statistics);
    saved_invstd = in_format(std::move(saved_invstd), policy.statistics);
  }

  OpResult r;
  if (backward) r.tensors = {{"dx", policy.output}, {"dgamma", policy.parameters}, {"dbeta", policy.parameters}};
  else r.tensors = {{"y", policy.output}, {"mean", policy.statistics}, {"invstd", policy.statistics}};
  size_outputs(sides, {s.size(), c, c});
  const bool gpu_policy = policy.input.name == "fp16" && policy.output.name == "fp16" &&
                          policy.statistics.name == "fp32" && policy.parameters.name == "fp32" &&
                          policy.lanes == emu::kGpuReductionLanes;
  // The emulator's outputs also feed the GPU pairs' bounds, so it runs even
  // when --backends leaves it out (then without counters).
  bool emu_side = false;
  for (const Side& side : sides) emu_side |= side.name == "emu";
  std::vector<float> emu_out0(s.size()), emu_out1(c), emu_out2(c);
  {
    std::vector<float> rm = running_mean, rv = running_var;
    emu::CounterSet* counters = emu_side ? &r.counters : nullptr;
    if (backward)
      emu::batch_norm_backward_emu(s, x, dy, gamma, saved_mean, saved_invstd, emu_out0, emu_out1, emu_out2, policy,
                                   counters);
    else
      emu::batch_norm_emu(s, params, x, gamma, beta, emu_out0, emu_out1, emu_out2, rm, rv, policy, counters);
  }
  for (Side& side : sides) {
    std::vector<float> rm = running_mean, rv = running_var;
    if (side.name == "ref") {
      if (backward)
        refs::batch_norm_backward_ref(s, x, dy, gamma, saved_mean, saved_invstd, side.out[0], side.out[1],
                                      side.out[2]);
      else
        refs::batch_norm_ref(s, params, x, gamma, beta, side.out[0], side.out[1], side.out[2], rm, rv);
      side.ran = true;
    } else if (side.name == "emu") {
      side.out = {emu_out0, emu_out1, emu_out2};
      side.ran = true;
    } else {
      run_gpu_side(side, gpu_policy ? "" : "the GPU batch norm takes fp16 x/y/dy/dx, fp32 statistics and "
                                           "parameters, 256 lanes", [&] {
        if (backward)
          gpu::batch_norm_backward_gpu(s, x, dy, gamma, saved_mean, saved_invstd, side.out[0], side.out[1],
                                       side.out[2]);
        else
          gpu::batch_norm_gpu(s, params, x, gamma, beta, side.out[0], side.out[1], side.out[2], rm, rv);
      });
    }
  }
  r.sides = std::move(sides);

  const std::string bound_note = "emu/batch_norm_bounds.h: block sums gamma_D(u_S), D = ceil(M/lanes) + "
                                 "log2(lanes), propagated per ";
  if (!backward) {
    const auto b = emu::batch_norm_forward_bounds(s, params, x, gamma, beta, policy);
    const double ref_bounds[3] = {b.y, b.mean, b.invstd};
    // y: the GPU and the emulator share xhat (bit-identical statistics); the
    // GPU rounds fmaf(gamma, xhat, beta) to fp32 before fp16, which moves it
    // by at most one fp16 spacing (no fp16 value lies between a value and
    // its nearest fp32). As a normwise bound: one spacing <= 2 u_out |y| + twice
    // half the smallest subnormal.
    double y2 = 0;
    for (float v : emu_out0) y2 += static_cast<double>(v) * v;
    const double spacing_norm = y2 > 0 ? (2 * policy.output.unit_roundoff() +
                                          policy.output.min_subnormal() * std::sqrt(static_cast<double>(s.size()) / y2))
                                       : INFINITY;
    r.tolerance = [=](std::size_t t, const std::string& a, const std::string& bn) {
      const bool ref = a == "ref" || bn == "ref", gpu = a == "gpu" || bn == "gpu";
      const char* what = t == 0 ? "element (y)" : "channel (mean, invstd)";
      if (ref && !gpu) return compare::Tolerance::normwise(ref_bounds[t], bound_note + what);
      if (ref) return compare::Tolerance::normwise(via_emulator(ref_bounds[t], t == 0 ? spacing_norm : 0.0),
                                                   "ref-emu bound plus the emu-gpu difference");
      if (t == 0)
        return compare::Tolerance::ulps(1, "same xhat; the GPU's fp32 fmaf before the fp16 rounding moves y "
                                           "by at most one fp16 spacing");
      return compare::Tolerance::bit_exact("the same fp32 operations in the same block order, each rounded "
                                           "once to nearest (IEEE intrinsics on the GPU)");
    };
  } else {
    const auto b = emu::batch_norm_backward_bounds(s, x, dy, gamma, saved_mean, saved_invstd, policy);
    const double ref_bounds[3] = {b.dx, b.dgamma, b.dbeta};
    const double gpu_dx = gpu_policy ? emu::batch_norm_gpu_dx_bound(s, x, dy, gamma, saved_mean, saved_invstd,
                                                                    emu_out0, emu_out1, emu_out2)
                                     : INFINITY;
    r.tolerance = [=](std::size_t t, const std::string& a, const std::string& bn) {
      const bool ref = a == "ref" || bn == "ref", gpu = a == "gpu" || bn == "gpu";
      const char* what = t == 0 ? "element (dx)" : "channel (dgamma, dbeta)";
      if (ref && !gpu) return compare::Tolerance::normwise(ref_bounds[t], bound_note + what);
      if (ref) return compare::Tolerance::normwise(via_emulator(ref_bounds[t], t == 0 ? gpu_dx : 0.0),
                                                   "ref-emu bound plus the emu-gpu difference");
      if (t == 0)
        return compare::Tolerance::normwise(gpu_dx, "same xhat, dbeta, dgamma; fp32 dx gamma_6(2^-24)|scale|T "
                                                    "against double, then one fp16 rounding each");
      return compare::Tolerance::bit_exact("the same fp32 fmaf/fadd in the same block order on the same xhat");
    };
  }
  r.title = "op " + args.op + "  n=" + std::to_string(s.n) + " c=" + std::to_string(s.c) + " h=" +
            std::to_string(s.h) + " w=" + std::to_string(s.w) + "  policy input=" + policy.input.name +
            " output=" + policy.output.name + " statistics=" + policy.statistics.name +
            " parameters=" + policy.parameters.name;
  r.shape = {{"n", s.n}, {"c", s.c}, {"h", s.h}, {"w", s.w}};
  r.policy = {{"input", policy.input.name},   {"output", policy.output.name},
              {"statistics", policy.statistics.name}, {"parameters", policy.parameters.name},
              {"lanes", policy.lanes},        {"eps", params.eps},
              {"momentum", params.momentum}};
  return r;
}

}  // namespace

OpFamily batch_norm_op_family() {
  return {{"batch-norm", "batch-norm-backward"},
          run_batch_norm,
          "batch-norm (y, mean, invstd), batch-norm-backward (dx, dgamma, dbeta), training mode: --shape "
          "n=,c=[,h=1,w=1] (n*h*w >= 2); --policy input=, output= (fp16), statistics= (fp32), parameters= (fp32), "
          "lanes= (256), eps= (1e-5), momentum= (0.1)."};
}

}  // namespace mpverify::cli::ops
