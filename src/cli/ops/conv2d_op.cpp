// `ops --op conv2d | conv2d-backward-data | conv2d-backward-filter`:
// refs::conv2d_*_ref_fp64 (on the operands rounded to their formats), emu::conv2d_*_emu and gpu::conv2d_*_gpu
// (cuDNN).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "cli/commands.h"
#include "cli/ops/gemm_policy_option.h"
#include "cli/ops/ops_registry.h"
#include "emu/conv2d_emu.h"
#include "emu/quantize.h"
#include "gpu/conv2d_gpu.h"
#include "refs/conv2d_ref.h"

namespace mpverify::cli::ops {

namespace {

enum class Direction { forward, backward_data, backward_filter };

Direction direction_of(const std::string& op) {
  if (op == "conv2d-backward-data") return Direction::backward_data;
  if (op == "conv2d-backward-filter") return Direction::backward_filter;
  return Direction::forward;
}

mpverify::ops::Conv2dShape shape_option(const KeyValues& kv) {
  check_keys(kv, {"n", "c", "h", "w", "k", "r", "s", "stride", "pad"}, "--shape");
  mpverify::ops::Conv2dShape s;
  s.n = whole_number(kv, "n", "--shape");
  s.c = whole_number(kv, "c", "--shape");
  s.h = whole_number(kv, "h", "--shape");
  s.w = whole_number(kv, "w", "--shape");
  s.k = whole_number(kv, "k", "--shape");
  s.r = whole_number(kv, "r", "--shape");
  s.s = whole_number(kv, "s", "--shape");
  s.stride = whole_number(kv, "stride", "--shape", 1);
  s.pad = whole_number(kv, "pad", "--shape", 0);
  if (s.n == 0 || s.c == 0 || s.h == 0 || s.w == 0 || s.k == 0 || s.r == 0 || s.s == 0 || s.stride == 0)
    throw UsageError("--shape: n, c, h, w, k, r, s and stride must be at least 1");
  if (s.h + 2 * s.pad < s.r || s.w + 2 * s.pad < s.s)
    throw UsageError("--shape: the filter (r x s) is larger than the padded input (h + 2 pad x w + 2 pad)");
  // The largest matrix built is im2col of the whole batch (backward filter):
  // c r s x n p q floats. Keep every tensor and it below 2^28 elements.
  const double p = s.p(), q = s.q(), limit = 0x1p28;
  const double sizes[] = {double(s.n) * s.c * s.h * s.w, double(s.k) * s.c * s.r * s.s, double(s.n) * s.k * p * q,
                          double(s.c) * s.r * s.s * s.n * p * q};
  for (double size : sizes)
    if (size > limit) throw UsageError("--shape: tensors of more than 2^28 elements are too large for this command");
  return s;
}

// cuDNN's x, w and y share one data type: fp32 throughout, or fp16 tensors with fp32 compute.
std::optional<gpu::ConvCompute> gpu_compute_for(const emu::GemmPolicy& p) {
  const std::string in = p.input.name, out = p.output.name;
  if (in == "fp32" && out == "fp32" && p.accumulation == emu::Accumulation::fp32) return gpu::ConvCompute::fp32;
  if (in == "fp16" && out == "fp16" && p.accumulation != emu::Accumulation::fp16)
    return gpu::ConvCompute::fp16_fp32_accumulate;
  return std::nullopt;
}

OpResult run_conv2d(const OpArgs& args, std::vector<Side> sides) {
  const Direction dir = direction_of(args.op);
  const mpverify::ops::Conv2dShape shape = shape_option(args.shape);
  check_keys(args.policy, {"input", "input-b", "accumulate", "promotion", "output", "block", "extra", "tc-rounding",
                              "step-inexact"},
             "--policy");
  emu::GemmPolicy policy = gemm_policy_option(args.policy);
  if (!args.policy.contains("output")) policy.output = policy.input;  // as cuDNN, whose tensors share a type

  std::mt19937_64 rng(args.seed);
  // The two operands of the op: (x, w) forward, (dy, w) backward data, (x, dy) backward filter.
  const std::size_t a_size = dir == Direction::backward_data ? shape.y_size() : shape.x_size();
  const std::size_t b_size = dir == Direction::backward_filter ? shape.y_size() : shape.weight_size();
  const std::size_t out_size = dir == Direction::forward         ? shape.y_size()
                               : dir == Direction::backward_data ? shape.x_size()
                                                                 : shape.weight_size();
  const auto a = normal_inputs(a_size, rng, 1.0), b = normal_inputs(b_size, rng, 1.0);
  // The reference convolves the operands as the emulator sees them, rounded to their formats, so that the two
  // differ only by the accumulation and the output rounding: an accumulation model that is off shows.
  const std::vector<float> aq = emu::quantized_copy(a, policy.input), bq = emu::quantized_copy(b, policy.b_format());
  const auto compute = gpu_compute_for(policy);
  OpResult r;
  const char* out_name = dir == Direction::forward ? "y" : dir == Direction::backward_data ? "dx" : "dw";
  r.tensors = {{out_name, policy.output}};
  size_outputs(sides, {out_size});
  for (Side& side : sides) {
    std::vector<float>& out = side.out[0];
    if (side.name == "ref") {
      std::vector<double> exact(out_size);  // FP64: every product exact, the sums nearly; one rounding to fp32
      if (dir == Direction::forward) refs::conv2d_forward_ref_fp64(shape, aq, bq, exact);
      else if (dir == Direction::backward_data) refs::conv2d_backward_data_ref_fp64(shape, aq, bq, exact);
      else refs::conv2d_backward_filter_ref_fp64(shape, aq, bq, exact);
      std::transform(exact.begin(), exact.end(), out.begin(), [](double x) { return static_cast<float>(x); });
      side.ran = true;
    } else if (side.name == "emu") {
      if (dir == Direction::forward) emu::conv2d_forward_emu(shape, a, b, out, policy, &r.counters);
      else if (dir == Direction::backward_data) emu::conv2d_backward_data_emu(shape, a, b, out, policy, &r.counters);
      else emu::conv2d_backward_filter_emu(shape, a, b, out, policy, &r.counters);
      side.ran = true;
    } else {
      run_gpu_side(side,
                   compute ? ""
                           : "cuDNN runs fp32 (input, accumulate and output fp32) or fp16 tensors (input and output "
                             "fp16) with fp32 or tensor-core accumulation",
                   [&] {
                     if (dir == Direction::forward) gpu::conv2d_forward_gpu(shape, a, b, out, *compute);
                     else if (dir == Direction::backward_data) gpu::conv2d_backward_data_gpu(shape, a, b, out, *compute);
                     else gpu::conv2d_backward_filter_gpu(shape, a, b, out, *compute);
                   });
    }
  }
  r.sides = std::move(sides);

  // Every output element is a sum of at most L exact products (L from
  // Conv2dShape: c r s forward, k ceil(r/stride) ceil(s/stride) backward data,
  // n p q backward filter) of the rounded operands aq, bq. Each side is within a
  // relative bound beta of op(|aq|,|bq|) element by element: a recursive sum in
  // any order of L terms adds gamma_L(u_acc) (Higham 3.1; zero products from the
  // padding add nothing), the output rounding one more factor 1 + u_out; a side
  // that rounds the unrounded inputs itself (the GPU) scales each product by at
  // most 1 + gamma_2(u_in) more: beta = (1 + gamma_2(u_in))(1 + gamma_L(u_acc))
  // (1 + u_out) - 1, with u_in = 0 for the emulator. The reference: FP64 on aq,
  // bq (gamma_L(2^-53), negligible), rounded once to fp32: 2^-24. cuDNN fp32:
  // gamma_L(2^-24); fp16 tensors: u_in = u_out = 2^-11 and the tensor cores
  // 2^-21 per step (the bound of the tensor-core model, see
  // gemm_policy_option.h). Two sides differ by at most the sum of their betas,
  // normwise relative to || op(|aq|,|bq|) ||_F, i.e. times the condition
  // factor. (With normal(0,1) inputs, underflow's absolute errors are far below
  // these bounds.)
  const std::int64_t L = dir == Direction::forward         ? shape.forward_terms()
                         : dir == Direction::backward_data ? shape.backward_data_terms()
                                                           : shape.backward_filter_terms();
  const double condition = dir == Direction::forward         ? refs::conv2d_condition(shape, aq, bq)
                           : dir == Direction::backward_data ? refs::conv2d_backward_data_condition(shape, aq, bq)
                                                             : refs::conv2d_backward_filter_condition(shape, aq, bq);
  auto gamma_or_infinity = [](std::int64_t k, double u) { return static_cast<double>(k) * u < 1 ? compare::gamma(k, u) : INFINITY; };
  auto beta = [&](double u_in, double u_acc, double u_out) {
    return (1 + compare::gamma(2, u_in)) * (1 + gamma_or_infinity(L, u_acc)) * (1 + u_out) - 1;
  };
  const double ref_beta = 0x1p-24;
  const double emu_beta = beta(0, accumulation_unit_roundoff(policy), policy.output.unit_roundoff());
  const double gpu_beta = compute == gpu::ConvCompute::fp16_fp32_accumulate ? beta(0x1p-11, 0x1p-21, 0x1p-11)
                                                                            : gamma_or_infinity(L, 0x1p-24);
  auto side_beta = [=](const std::string& name) {
    return name == "ref" ? ref_beta : name == "emu" ? emu_beta : gpu_beta;
  };
  std::string why = "sum of both sides' bounds from the exact result of the rounded operands (ref 2^-24; emu "
                    "(1+gamma_L(u_acc))(1+u_out)-1; gpu (1+gamma_2(u_in))(1+gamma_L(u_acc))(1+u_out)-1), L = " +
                    std::to_string(L) + ", times || op(|aq|,|bq|) ||_F / || op(aq,bq) ||_F";
  r.tolerance = [=](std::size_t, const std::string& x, const std::string& y) {
    return compare::Tolerance::normwise((side_beta(x) + side_beta(y)) * condition, why);
  };

  char title[320];
  std::snprintf(title, sizeof title,
                "op %s  n=%d c=%d h=%d w=%d k=%d r=%d s=%d stride=%d pad=%d (p=%d q=%d)  policy input=%s accumulate=%s "
                "output=%s",
                args.op.c_str(), shape.n, shape.c, shape.h, shape.w, shape.k, shape.r, shape.s, shape.stride, shape.pad,
                shape.p(), shape.q(), policy.input.name.c_str(), std::string(emu::to_string(policy.accumulation)).c_str(),
                policy.output.name.c_str());
  r.title = title;
  r.shape = {{"n", shape.n}, {"c", shape.c}, {"h", shape.h},           {"w", shape.w},     {"k", shape.k},
             {"r", shape.r}, {"s", shape.s}, {"stride", shape.stride}, {"pad", shape.pad}};
  r.policy = to_json(policy);
  return r;
}

}  // namespace

OpFamily conv2d_op_family() {
  return {{"conv2d", "conv2d-backward-data", "conv2d-backward-filter"},
          run_conv2d,
          std::string("conv2d, conv2d-backward-data, conv2d-backward-filter (NCHW): --shape "
                      "n=,c=,h=,w=,k=,r=,s=[,stride=1,pad=0]; --policy ") +
              kGemmPolicyHelp + "; output defaults to the input format here (cuDNN's tensors share one type)."};
}

}  // namespace mpverify::cli::ops
