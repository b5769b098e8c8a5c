// `ops --op bias-add|bias-add-backward`: refs::bias_add_ref, emu::bias_add_emu
// and gpu::bias_add_gpu. The backward's output is db alone: dx = dy is the
// identity (no arithmetic, nothing to compare).
#include <cmath>
#include <stdexcept>

#include "cli/commands.h"
#include "cli/ops/ops_registry.h"
#include "emu/bias_add_emu.h"
#include "emu/quantize.h"
#include "gpu/bias_add_gpu.h"
#include "refs/bias_add_ref.h"

namespace mpverify::cli::ops {

namespace {

OpResult run_bias_add(const OpArgs& args, std::vector<Side> sides) {
  const bool backward = args.op == "bias-add-backward";
  check_keys(args.shape, {"n", "c", "h", "w"}, "--shape");
  const mpverify::ops::ChannelShape s{whole_number(args.shape, "n", "--shape"), whole_number(args.shape, "c", "--shape"),
                             whole_number(args.shape, "h", "--shape", 1), whole_number(args.shape, "w", "--shape", 1)};
  if (s.n < 1 || s.c < 1 || s.h < 1 || s.w < 1) throw UsageError("--shape: n, c, h and w must be at least 1");
  check_keys(args.policy, {"input", "output", "accumulate", "lanes"}, "--policy");
  emu::BiasAddPolicy policy;
  policy.input = format_option(args.policy, "input", "--policy", policy.input);
  policy.output = format_option(args.policy, "output", "--policy", policy.output);
  policy.accumulation = format_option(args.policy, "accumulate", "--policy", policy.accumulation);
  policy.lanes = whole_number(args.policy, "lanes", "--policy", policy.lanes);
  try {
    emu::check_lanes(policy.lanes);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--policy: ") + e.what());
  }

  std::mt19937_64 rng(args.seed);
  const auto x = normal_inputs_in(policy.input, s.size(), rng, 1.0);
  const auto b = normal_inputs_in(policy.input, static_cast<std::size_t>(s.c), rng, 1.0);
  const auto dy = normal_inputs_in(policy.input, s.size(), rng, 1.0);
  OpResult r;
  r.tensors = {{backward ? "db" : "y", policy.output}};
  size_outputs(sides, {backward ? static_cast<std::size_t>(s.c) : s.size()});
  const bool fp16_io = policy.input.name == "fp16" && policy.output.name == "fp16";
  const bool gpu_sum = policy.accumulation.name == "fp32" && policy.lanes == emu::kGpuReductionLanes;
  std::string unsupported;
  if (!fp16_io) unsupported = "the GPU bias add takes fp16 input and output";
  else if (backward && !gpu_sum) unsupported = "the GPU bias gradient sums in fp32 over 256 lanes";
  for (Side& side : sides) {
    std::vector<float>& out = side.out[0];
    if (side.name == "ref") {
      if (backward) refs::bias_add_backward_ref(s, dy, out);
      else refs::bias_add_ref(s, x, b, out);
      side.ran = true;
    } else if (side.name == "emu") {
      if (backward) emu::bias_add_backward_emu(s, dy, out, policy, &r.counters);
      else emu::bias_add_emu(s, x, b, out, policy, &r.counters);
      side.ran = true;
    } else {
      run_gpu_side(side, unsupported, [&] {
        if (backward) gpu::bias_add_backward_gpu(s, dy, out);
        else gpu::bias_add_gpu(s, x, b, out);
      });
    }
  }
  r.sides = std::move(sides);

  const double u_out = policy.output.unit_roundoff();
  if (!backward) {
    // The emulator rounds the exact x + b once to the output format: half an
    // ulp. The reference rounds it once to fp32: 2^-24 relative, which is at
    // most 2^(p_out - 24) ulps of the output format.
    const double ref_bound = 0.5 + std::ldexp(1.0, policy.output.precision() - 24);
    r.tolerance = [ref_bound](std::size_t, const std::string& a, const std::string& b_name) {
      if (a == "ref" || b_name == "ref")
        return compare::Tolerance::ulps(ref_bound, "one rounding of the exact x + b to the output format, "
                                                   "against one to fp32");
      return compare::Tolerance::bit_exact("__hadd rounds the exact sum of the same fp16 values once, as the emulator");
    };
  } else {
    // Per channel, the block sum errs by gamma_D(u_acc) sum |dy| (D: the
    // longest path of a term through the block order, emu/block_sum.h), the
    // output rounding by u_out |db| + half the smallest subnormal; the FP64
    // reference by gamma_M(2^-53) sum |dy|, then 2^-24 |db| for its float.
    const std::size_t m = s.channel_elements();
    const double u_acc = policy.accumulation.unit_roundoff();
    const double depth = static_cast<double>(emu::block_sum_depth(m, policy.lanes));
    const double g = depth * u_acc < 1 ? compare::gamma(static_cast<std::int64_t>(depth), u_acc) : INFINITY;
    const double g64 = compare::gamma(static_cast<std::int64_t>(m), 0x1p-53);
    const double tiny = policy.output.min_subnormal() / 2;
    double num = 0, ref2 = 0, db2 = 0;
    for (int c = 0; c < s.c; ++c) {
      double sum = 0, abs_sum = 0;
      for (std::size_t i = 0; i < m; ++i) {
        sum += dy[s.index(c, i)];
        abs_sum += std::fabs(dy[s.index(c, i)]);
      }
      const double emu_err = g * abs_sum + u_out * (std::fabs(sum) + g * abs_sum) + tiny;
      const double ref_err = 0x1p-24 * std::fabs(sum) + 0x1p-150 + g64 * abs_sum;
      num += (emu_err + ref_err) * (emu_err + ref_err);
      ref2 += ref_err * ref_err;
      db2 += sum * sum;
    }
    const double denominator = std::sqrt(db2) - std::sqrt(ref2);
    const double ref_bound = denominator > 0 ? std::sqrt(num) / denominator : INFINITY;
    r.tolerance = [ref_bound](std::size_t, const std::string& a, const std::string& b_name) {
      if (a == "ref" || b_name == "ref")
        return compare::Tolerance::normwise(ref_bound, "gamma_D(u_acc) sum|dy| + u_out |db| per channel, D = "
                                                       "ceil(M/lanes) + log2(lanes), plus the reference's rounding");
      return compare::Tolerance::bit_exact(
          "the same fp16 terms added in fp32 in the same block order, rounded to fp16 once");
    };
  }
  r.title = "op " + args.op + "  n=" + std::to_string(s.n) + " c=" + std::to_string(s.c) + " h=" +
            std::to_string(s.h) + " w=" + std::to_string(s.w) + "  policy input=" + policy.input.name +
            " output=" + policy.output.name + " accumulate=" + policy.accumulation.name;
  r.shape = {{"n", s.n}, {"c", s.c}, {"h", s.h}, {"w", s.w}};
  r.policy = {{"input", policy.input.name},
              {"output", policy.output.name},
              {"accumulate", policy.accumulation.name},
              {"lanes", policy.lanes}};
  return r;
}

}  // namespace

OpFamily bias_add_op_family() {
  return {{"bias-add", "bias-add-backward"},
          run_bias_add,
          "bias-add, bias-add-backward (db; dx = dy is the identity): --shape n=,c=[,h=1,w=1]; --policy input=, "
          "output= (fp16), accumulate= (fp32: db's sums), lanes= (256: the GPU block)."};
}

}  // namespace mpverify::cli::ops
