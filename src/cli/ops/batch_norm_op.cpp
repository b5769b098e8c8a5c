// `ops --op batch-norm|batch-norm-backward` (training mode):
// refs::batch_norm_ref, emu::batch_norm_emu and gpu::batch_norm_gpu. Outputs:
// y, mean, invstd forward; dx, dgamma, dbeta backward (from the statistics
// of the reference's forward, as values of the statistics format).
#include <array>
#include <cmath>
#include <functional>
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

// The tolerance of one output tensor between two sides (OpResult::tolerance).

// The op, shape, formats and parameters from --op, --shape and --policy.
struct BatchNormSetup {
  bool backward = false;
  mpverify::ops::ChannelShape s;
  emu::BatchNormPolicy policy;
  mpverify::ops::BatchNormParams params;
};

BatchNormSetup batch_norm_setup(const OpArgs& args) {
  BatchNormSetup o;
  o.backward = args.op == "batch-norm-backward";
  check_keys(args.shape, {"n", "c", "h", "w"}, "--shape");
  o.s = mpverify::ops::ChannelShape{whole_number(args.shape, "n", "--shape"), whole_number(args.shape, "c", "--shape"),
                           whole_number(args.shape, "h", "--shape", 1), whole_number(args.shape, "w", "--shape", 1)};
  check_keys(args.policy, {"input", "output", "statistics", "parameters", "lanes", "eps", "momentum"}, "--policy");
  emu::BatchNormPolicy& policy = o.policy;
  policy.input = format_option(args.policy, "input", "--policy", policy.input);
  policy.output = format_option(args.policy, "output", "--policy", policy.output);
  policy.statistics = format_option(args.policy, "statistics", "--policy", policy.statistics);
  policy.parameters = format_option(args.policy, "parameters", "--policy", policy.parameters);
  policy.lanes = whole_number(args.policy, "lanes", "--policy", policy.lanes);
  o.params.eps = real_number(args.policy, "eps", "--policy", o.params.eps);
  o.params.momentum = real_number(args.policy, "momentum", "--policy", o.params.momentum);
  try {
    mpverify::ops::check_batch_norm_shape(o.s, "--shape");
    emu::check_lanes(policy.lanes);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (!(o.params.eps > 0)) throw UsageError("--policy: eps must be positive");
  return o;
}

// The seeded inputs every side gets, and the backward's saved statistics.
struct BatchNormInputs {
  std::vector<float> x, gamma, beta, dy;
  std::vector<float> running_mean, running_var;
  std::vector<float> saved_mean, saved_invstd;
};

BatchNormInputs batch_norm_inputs(const BatchNormSetup& o, std::uint64_t seed) {
  const mpverify::ops::ChannelShape& s = o.s;
  const emu::BatchNormPolicy& policy = o.policy;
  BatchNormInputs in;
  std::mt19937_64 rng(seed);
  const auto c = static_cast<std::size_t>(s.c);
  in.x = activations(s, rng, policy.input);
  in.gamma = normal_inputs(c, rng, 0.2);
  in.beta = normal_inputs(c, rng, 0.2);
  for (float& g : in.gamma) g += 1.0f;
  in.gamma = in_format(std::move(in.gamma), policy.parameters);
  in.beta = in_format(std::move(in.beta), policy.parameters);
  in.dy = in_format(normal_inputs(s.size(), rng, 1.0), policy.input);
  in.running_mean.assign(c, 0.0f);  // PyTorch's initial buffers
  in.running_var.assign(c, 1.0f);

  // The backward's saved statistics: the reference forward's, as S values.
  in.saved_mean.resize(c);
  in.saved_invstd.resize(c);
  if (o.backward) {
    std::vector<float> y(s.size()), rm = in.running_mean, rv = in.running_var;
    refs::batch_norm_ref(s, o.params, in.x, in.gamma, in.beta, y, in.saved_mean, in.saved_invstd, rm, rv);
    in.saved_mean = in_format(std::move(in.saved_mean), policy.statistics);
    in.saved_invstd = in_format(std::move(in.saved_invstd), policy.statistics);
  }
  return in;
}

// The emulator's three outputs (counted into counters when not null).
std::vector<std::vector<float>> emulator_outputs(const BatchNormSetup& o, const BatchNormInputs& in,
                                                 emu::CounterSet* counters) {
  const mpverify::ops::ChannelShape& s = o.s;
  const auto c = static_cast<std::size_t>(s.c);
  std::vector<std::vector<float>> out{std::vector<float>(s.size()), std::vector<float>(c), std::vector<float>(c)};
  std::vector<float> rm = in.running_mean, rv = in.running_var;
  if (o.backward)
    emu::batch_norm_backward_emu(s, in.x, in.dy, in.gamma, in.saved_mean, in.saved_invstd, out[0], out[1], out[2],
                                 o.policy, counters);
  else
    emu::batch_norm_emu(s, o.params, in.x, in.gamma, in.beta, out[0], out[1], out[2], rm, rv, o.policy, counters);
  return out;
}

void run_batch_norm_sides(const BatchNormSetup& o, const BatchNormInputs& in,
                          const std::vector<std::vector<float>>& emu_out, bool gpu_policy, std::vector<Side>& sides) {
  const mpverify::ops::ChannelShape& s = o.s;
  for (Side& side : sides) {
    std::vector<float> rm = in.running_mean, rv = in.running_var;
    if (side.name == "ref") {
      if (o.backward)
        refs::batch_norm_backward_ref(s, in.x, in.dy, in.gamma, in.saved_mean, in.saved_invstd, side.out[0],
                                      side.out[1], side.out[2]);
      else
        refs::batch_norm_ref(s, o.params, in.x, in.gamma, in.beta, side.out[0], side.out[1], side.out[2], rm, rv);
      side.ran = true;
    } else if (side.name == "emu") {
      side.out = emu_out;
      side.ran = true;
    } else {
      run_gpu_side(side, gpu_policy ? "" : "the GPU batch norm takes fp16 x/y/dy/dx, fp32 statistics and "
                                           "parameters, 256 lanes", [&] {
        if (o.backward)
          gpu::batch_norm_backward_gpu(s, in.x, in.dy, in.gamma, in.saved_mean, in.saved_invstd, side.out[0],
                                       side.out[1], side.out[2]);
        else
          gpu::batch_norm_gpu(s, o.params, in.x, in.gamma, in.beta, side.out[0], side.out[1], side.out[2], rm, rv);
      });
    }
  }
}

const std::string kBoundNote = "emu/batch_norm_bounds.h: block sums gamma_D(u_S), D = ceil(M/lanes) + "
                               "log2(lanes), propagated per ";

ToleranceFn forward_tolerance(const BatchNormSetup& o, const BatchNormInputs& in,
                                       const std::vector<float>& emu_y) {
  const mpverify::ops::ChannelShape& s = o.s;
  const emu::BatchNormPolicy& policy = o.policy;
  const std::string bound_note = kBoundNote;
  const auto b = emu::batch_norm_forward_bounds(s, o.params, in.x, in.gamma, in.beta, policy);
  const std::array<double, 3> ref_bounds{b.y, b.mean, b.invstd};
  // y: the GPU and the emulator share xhat (bit-identical statistics); the
  // GPU rounds fmaf(gamma, xhat, beta) to fp32 before fp16, which moves it
  // by at most one fp16 spacing (no fp16 value lies between a value and
  // its nearest fp32). As a normwise bound: one spacing <= 2 u_out |y| + twice
  // half the smallest subnormal.
  double y2 = 0;
  for (float v : emu_y) y2 += static_cast<double>(v) * v;
  const double spacing_norm = y2 > 0 ? (2 * policy.output.unit_roundoff() +
                                        policy.output.min_subnormal() * std::sqrt(static_cast<double>(s.size()) / y2))
                                     : INFINITY;
  return [=](std::size_t t, const std::string& a, const std::string& bn) {
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
}

ToleranceFn backward_tolerance(const BatchNormSetup& o, const BatchNormInputs& in,
                                        const std::vector<std::vector<float>>& emu_out, bool gpu_policy) {
  const mpverify::ops::ChannelShape& s = o.s;
  const std::string bound_note = kBoundNote;
  const auto b = emu::batch_norm_backward_bounds(s, in.x, in.dy, in.gamma, in.saved_mean, in.saved_invstd, o.policy);
  const std::array<double, 3> ref_bounds{b.dx, b.dgamma, b.dbeta};
  const double gpu_dx = gpu_policy ? emu::batch_norm_gpu_dx_bound(s, in.x, in.dy, in.gamma, in.saved_mean,
                                                                  in.saved_invstd, emu_out[0], emu_out[1], emu_out[2])
                                   : INFINITY;
  return [=](std::size_t t, const std::string& a, const std::string& bn) {
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

OpResult run_batch_norm(const OpArgs& args, std::vector<Side> sides) {
  const BatchNormSetup o = batch_norm_setup(args);
  const mpverify::ops::ChannelShape& s = o.s;
  const emu::BatchNormPolicy& policy = o.policy;
  const BatchNormInputs in = batch_norm_inputs(o, args.seed);
  const auto c = static_cast<std::size_t>(s.c);

  OpResult r;
  if (o.backward) r.tensors = {{"dx", policy.output}, {"dgamma", policy.parameters}, {"dbeta", policy.parameters}};
  else r.tensors = {{"y", policy.output}, {"mean", policy.statistics}, {"invstd", policy.statistics}};
  size_outputs(sides, {s.size(), c, c});
  const bool gpu_policy = policy.input.name == "fp16" && policy.output.name == "fp16" &&
                          policy.statistics.name == "fp32" && policy.parameters.name == "fp32" &&
                          policy.lanes == emu::kGpuReductionLanes;
  // The emulator's outputs also feed the GPU pairs' bounds, so it runs even
  // when --backends leaves it out (then without counters).
  bool emu_side = false;
  for (const Side& side : sides) emu_side |= side.name == "emu";
  const std::vector<std::vector<float>> emu_out = emulator_outputs(o, in, emu_side ? &r.counters : nullptr);
  run_batch_norm_sides(o, in, emu_out, gpu_policy, sides);
  r.sides = std::move(sides);

  r.tolerance = o.backward ? backward_tolerance(o, in, emu_out, gpu_policy) : forward_tolerance(o, in, emu_out[0]);
  r.title = "op " + args.op + "  n=" + std::to_string(s.n) + " c=" + std::to_string(s.c) + " h=" +
            std::to_string(s.h) + " w=" + std::to_string(s.w) + "  policy input=" + policy.input.name +
            " output=" + policy.output.name + " statistics=" + policy.statistics.name +
            " parameters=" + policy.parameters.name;
  r.shape = {{"n", s.n}, {"c", s.c}, {"h", s.h}, {"w", s.w}};
  r.policy = {{"input", policy.input.name},   {"output", policy.output.name},
              {"statistics", policy.statistics.name}, {"parameters", policy.parameters.name},
              {"lanes", policy.lanes},        {"eps", o.params.eps},
              {"momentum", o.params.momentum}};
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
