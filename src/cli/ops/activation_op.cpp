// `ops --op relu|leaky-relu|tanh|sigmoid|gelu[-backward]`: refs::activation_ref,
// emu::activation_emu and gpu::activation_gpu (which has no gelu kernel: that
// side is skipped with the reason).
#include <cmath>

#include "cli/commands.h"
#include "cli/ops/ops_registry.h"
#include "emu/activation_emu.h"
#include "gpu/activation_gpu.h"
#include "ops/fp64_math.h"
#include "refs/activation_ref.h"

namespace mpverify::cli::ops {

namespace {

OpResult run_activation(const OpArgs& args, std::vector<Side> sides) {
  const bool backward = args.op.ends_with("-backward");
  const auto kind = mpverify::ops::parse_activation(backward ? args.op.substr(0, args.op.size() - 9) : args.op);
  mpverify::ops::ActivationParams p{*kind};
  check_keys(args.shape, {"n"}, "--shape");
  const auto n = static_cast<std::size_t>(whole_number(args.shape, "n", "--shape"));
  if (n == 0) throw UsageError("--shape: n must be at least 1");
  check_keys(args.policy, {"input", "output", "slope"}, "--policy");
  emu::ElementwisePolicy policy;
  policy.input = format_option(args.policy, "input", "--policy", policy.input);
  policy.output = format_option(args.policy, "output", "--policy", policy.output);
  p.negative_slope = real_number(args.policy, "slope", "--policy", p.negative_slope);

  std::mt19937_64 rng(args.seed);
  const auto x = normal_inputs(n, rng, 4.0);  // wide enough to reach the flat parts of tanh and sigmoid
  const auto dy = normal_inputs(n, rng, 1.0);
  OpResult r;
  r.tensors = {{backward ? "dx" : "y", policy.output}};
  size_outputs(sides, {n});
  const bool fp16_io = policy.input.name == "fp16" && policy.output.name == "fp16";
  for (Side& side : sides) {
    std::vector<float>& out = side.out[0];
    if (side.name == "ref") {
      if (backward) refs::activation_backward_ref(p, x, dy, out);
      else refs::activation_ref(p, x, out);
      side.ran = true;
    } else if (side.name == "emu") {
      if (backward) emu::activation_backward_emu(p, x, dy, out, policy, &r.counters);
      else emu::activation_emu(p, x, out, policy, &r.counters);
      side.ran = true;
    } else {
      const bool gelu = p.kind == mpverify::ops::Activation::gelu;
      const char* unsupported = !fp16_io ? "the GPU activations take fp16 input and output"
                                : gelu   ? "the GPU activations have no gelu kernel yet"
                                         : "";
      run_gpu_side(side, unsupported, [&] {
        if (backward) gpu::activation_backward_gpu(p, x, dy, out);
        else gpu::activation_gpu(p, x, out);
      });
    }
  }
  r.sides = std::move(sides);

  // Per element, rounding x (and dy) to the input format moves the exact
  // result by at most (|g| + u_in |x|) u_in |x| (+ u_in |dy f'| backward),
  // where g is f' (|f''| <= 1 bounds its change: gelu's |f''| is at most
  // 2 phi(0) = 0.80); rounding the result adds
  // u_out |y|, and the float reference u32 |y|. The norm of these per-element
  // bounds over the norm of y bounds the normwise error of ref against emu;
  // emu against gpu: one fp16 ulp (see the GPU test's derivation).
  const double u_in = policy.input.unit_roundoff(), u_out = policy.output.unit_roundoff();
  double e2 = 0, y2 = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double g = mpverify::ops::activation_derivative_fp64(p, x[i]);
    const double y = backward ? g * dy[i] : mpverify::ops::activation_fp64(p, x[i]);
    const double dx_part =
        (std::fabs(g) + u_in * std::fabs(x[i])) * u_in * std::fabs(x[i]) * (backward ? std::fabs(dy[i]) : 1.0);
    const double input_part = dx_part + (backward ? u_in * std::fabs(y) : 0.0);
    // the output rounding applies to the emulator's exact value, at most |y| + input_part in magnitude
    const double e = input_part + (u_out + 0x1p-24) * (std::fabs(y) + input_part);
    e2 += e * e;
    y2 += y * y;
  }
  const double ref_bound = y2 > 0 ? std::sqrt(e2 / y2) : INFINITY;
  r.tolerance = [ref_bound](std::size_t, const std::string& a, const std::string& b) {
    if (a == "ref" || b == "ref")
      return compare::Tolerance::normwise(ref_bound + (a == "gpu" || b == "gpu" ? 0x1p-10 : 0.0),
                                          "input rounding through f' plus output rounding, per element, in norm");
    return compare::Tolerance::ulps(1, "fp32 math within 2^-20 relative, then one fp16 rounding");
  };
  r.title = "op " + args.op + "  n=" + std::to_string(n) + "  policy input=" + policy.input.name +
            " output=" + policy.output.name;
  r.shape = {{"n", n}};
  r.policy = {{"input", policy.input.name}, {"output", policy.output.name}};
  return r;
}

}  // namespace

OpFamily activation_op_family() {
  OpFamily f;
  for (const char* name : {"relu", "leaky-relu", "tanh", "sigmoid", "gelu"}) {
    f.names.push_back(name);
    f.names.push_back(std::string(name) + "-backward");
  }
  f.run = run_activation;
  f.help =
      "relu, leaky-relu, tanh, sigmoid, gelu (and NAME-backward): --shape n=N; --policy input=, output= (fp16), "
      "slope= (leaky-relu).";
  return f;
}

}  // namespace mpverify::cli::ops
