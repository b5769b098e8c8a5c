// `ops --op max-pool|max-pool-backward`: refs::max_pool_ref,
// emu::max_pool_emu and gpu::max_pool_gpu.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "cli/commands.h"
#include "cli/ops/ops_registry.h"
#include "emu/max_pool_emu.h"
#include "emu/quantize.h"
#include "gpu/max_pool_gpu.h"
#include "ops/max_pool_argmax.h"
#include "refs/max_pool_ref.h"

namespace mpverify::cli::ops {

namespace {

OpResult run_max_pool(const OpArgs& args, std::vector<Side> sides) {
  const bool backward = args.op == "max-pool-backward";
  check_keys(args.shape, {"n", "c", "h", "w", "r", "s", "stride", "pad"}, "--shape");
  mpverify::ops::PoolShape p;
  p.n = whole_number(args.shape, "n", "--shape");
  p.c = whole_number(args.shape, "c", "--shape");
  p.h = whole_number(args.shape, "h", "--shape");
  p.w = whole_number(args.shape, "w", "--shape");
  p.r = whole_number(args.shape, "r", "--shape");
  p.s = whole_number(args.shape, "s", "--shape");
  p.stride = whole_number(args.shape, "stride", "--shape", 1);
  p.pad = whole_number(args.shape, "pad", "--shape", 0);
  try {
    p.check_dims("--shape");
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  check_keys(args.policy, {"input", "output", "accumulate"}, "--policy");
  emu::MaxPoolPolicy policy;
  policy.input = format_option(args.policy, "input", "--policy", policy.input);
  policy.output = format_option(args.policy, "output", "--policy", policy.output);
  policy.accumulation = format_option(args.policy, "accumulate", "--policy", policy.accumulation);

  std::mt19937_64 rng(args.seed);
  const auto x = normal_inputs_in(policy.input, p.x_size(), rng, 1.0);
  const auto dy = normal_inputs_in(policy.input, p.y_size(), rng, 1.0);
  OpResult r;
  r.tensors = {{backward ? "dx" : "y", policy.output}};
  size_outputs(sides, {backward ? p.x_size() : p.y_size()});
  std::string unsupported;
  if (policy.input.name != "fp16" || policy.output.name != "fp16")
    unsupported = "the GPU max pooling takes fp16 input and output";
  else if (backward && policy.accumulation.name != "fp32")
    unsupported = "the GPU max-pool gradient sums in fp32";
  for (Side& side : sides) {
    std::vector<float>& out = side.out[0];
    if (side.name == "ref") {
      if (backward) refs::max_pool_backward_ref(p, x, dy, out);
      else refs::max_pool_ref(p, x, out);
      side.ran = true;
    } else if (side.name == "emu") {
      if (backward) emu::max_pool_backward_emu(p, x, dy, out, policy, &r.counters);
      else emu::max_pool_emu(p, x, out, policy, &r.counters);
      side.ran = true;
    } else {
      run_gpu_side(side, unsupported, [&] {
        if (backward) gpu::max_pool_backward_gpu(p, x, dy, out);
        else gpu::max_pool_gpu(p, x, out);
      });
    }
  }
  r.sides = std::move(sides);

  if (!backward) {
    // Max selects an input, and every side sees the same input-format values
    // and the same winner; rounding is monotonic, so it commutes with max:
    // the emulator's output is the winner rounded once to the output format
    // (exact when the formats are the same), and the GPU's is the same fp16 value.
    const bool same = policy.input == policy.output;
    r.tolerance = [same](std::size_t, const std::string& a, const std::string& b) {
      if ((a == "ref" || b == "ref") && !same)
        return compare::Tolerance::ulps(0.5, "max selects an input; one rounding of it to the output format");
      return compare::Tolerance::bit_exact("max selects an input value; rounding is monotonic, so it commutes "
                                           "with max and the winner is the same on every side");
    };
  } else {
    // Element i sums the dy of the k_i <= K windows it wins (same winners on
    // every side): the emulator in the accumulation format, gamma_K(u_acc)
    // sum|dy|, then u_out |dx| + half the smallest subnormal; the reference in
    // FP64, gamma_K(2^-53) sum|dy|, then 2^-24 |dx|. K = ceil(r/stride) ceil(s/stride).
    const auto win = mpverify::ops::max_pool_argmax(p, x);
    std::vector<double> exact(p.x_size(), 0.0), abs_sum(p.x_size(), 0.0);
    for (std::size_t o = 0; o < win.size(); ++o) {
      exact[win[o]] += dy[o];
      abs_sum[win[o]] += std::fabs(dy[o]);
    }
    const int k = p.max_windows_per_element();
    const double u_acc = policy.accumulation.unit_roundoff(), u_out = policy.output.unit_roundoff();
    const double g = k * u_acc < 1 ? compare::gamma(k, u_acc) : INFINITY, g64 = compare::gamma(k, 0x1p-53);
    const double tiny = policy.output.min_subnormal() / 2;
    double num = 0, ref2 = 0, dx2 = 0;
    for (std::size_t i = 0; i < exact.size(); ++i) {
      const double emu_err = g * abs_sum[i] + u_out * (std::fabs(exact[i]) + g * abs_sum[i]) + tiny;
      const double ref_err = 0x1p-24 * std::fabs(exact[i]) + 0x1p-150 + g64 * abs_sum[i];
      num += (emu_err + ref_err) * (emu_err + ref_err);
      ref2 += ref_err * ref_err;
      dx2 += exact[i] * exact[i];
    }
    const double denominator = std::sqrt(dx2) - std::sqrt(ref2);
    const double ref_bound = denominator > 0 ? std::sqrt(num) / denominator : INFINITY;
    r.tolerance = [ref_bound](std::size_t, const std::string& a, const std::string& b) {
      if (a == "ref" || b == "ref")
        return compare::Tolerance::normwise(ref_bound, "gamma_K(u_acc) sum|dy| + u_out |dx| per element, K "
                                                       "windows at most, plus the reference's rounding");
      return compare::Tolerance::bit_exact(
          "the same fp16 dy added in fp32 in row-major window order, rounded to fp16 once");
    };
  }
  r.title = "op " + args.op + "  n=" + std::to_string(p.n) + " c=" + std::to_string(p.c) + " h=" +
            std::to_string(p.h) + " w=" + std::to_string(p.w) + " r=" + std::to_string(p.r) + " s=" +
            std::to_string(p.s) + " stride=" + std::to_string(p.stride) + " pad=" + std::to_string(p.pad) +
            "  policy input=" + policy.input.name + " output=" + policy.output.name +
            " accumulate=" + policy.accumulation.name;
  r.shape = {{"n", p.n}, {"c", p.c},           {"h", p.h},     {"w", p.w},
             {"r", p.r}, {"s", p.s}, {"stride", p.stride}, {"pad", p.pad}};
  r.policy = {{"input", policy.input.name},
              {"output", policy.output.name},
              {"accumulate", policy.accumulation.name}};
  return r;
}

}  // namespace

OpFamily max_pool_op_family() {
  return {{"max-pool", "max-pool-backward"},
          run_max_pool,
          "max-pool, max-pool-backward: --shape n=,c=,h=,w=,r=,s=[,stride=1,pad=0] (pad < r, s); --policy "
          "input=, output= (fp16), accumulate= (fp32: dx where windows overlap)."};
}

}  // namespace mpverify::cli::ops
