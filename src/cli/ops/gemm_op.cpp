// `ops --op gemm`: refs::gemm_ref_fp64 (or, under a tensor-core instruction, refs::gemm_mma_ref),
// emu::gemm_emu and gpu::gemm_gpu (cuBLAS).
#include "cli/ops/gemm_op.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "cli/commands.h"
#include "cli/ops/gemm_policy_option.h"
#include "cli/ops/ops_registry.h"
#include "emu/quantize.h"
#include "gpu/gemm_gpu.h"
#include "refs/gemm_ref.h"
#include "refs/mma_ref.h"

namespace mpverify::cli::ops {

namespace {

std::optional<gpu::GemmCompute> gpu_compute_for(const emu::GemmPolicy& p) {
  const std::string in = p.input.name;
  if (p.b_format().name != in) return std::nullopt;  // cuBLAS's types here take A and B in one format
  const bool fp32_acc = p.accumulation != emu::Accumulation::fp16;
  if (in == "fp16") return fp32_acc ? gpu::GemmCompute::fp16_fp32_accumulate : gpu::GemmCompute::fp16_fp16_accumulate;
  if (in == "bf16" && fp32_acc) return gpu::GemmCompute::bf16_fp32_accumulate;
  if (in == "tf32" && fp32_acc) return gpu::GemmCompute::tf32;
  if (in == "fp32" && p.accumulation == emu::Accumulation::fp32) return gpu::GemmCompute::fp32_pedantic;
  return std::nullopt;
}

// The emulator's instruction as the reference states it (refs/mma_ref.h): A's and B's formats are the
// policy's (the model may list them the other way round; a product does not care).
refs::TensorCoreInstruction reference_instruction(const emu::GemmPolicy& p) {
  const emu::MmaModel& m = *p.mma;
  using Output = refs::TensorCoreInstruction::Output;
  const Output output = m.output == emu::MmaOutput::fp16_nearest_even   ? Output::fp16_nearest_even
                        : m.output == emu::MmaOutput::e8m13_toward_zero ? Output::e8m13_toward_zero
                                                                        : Output::fp32_toward_zero;
  return {p.input, p.b_format(), m.c, m.k, m.fraction_bits, m.split_halves, m.fp8_through_fp16, output};
}

// The reference side: under a tensor-core instruction, the instruction's chain computed apart from the
// emulator (bit for bit the emulator's result when both follow the rule), else FP64 on the rounded operands.
void run_reference(const mpverify::ops::GemmShape& shape, std::span<const float> aq, std::span<const float> bq,
                   const emu::GemmPolicy& policy, std::span<float> out) {
  if (policy.accumulation == emu::Accumulation::mma) {
    refs::gemm_mma_ref(shape, aq, bq, out, reference_instruction(policy), policy.promotion_interval);
    // The output rounding of a value already in the accumulator's format: the library's quantizer, as in the
    // emulator (verified on its own, exhaustively for 16-bit formats).
    const std::vector<float> rounded = emu::quantized_copy(std::vector<float>(out.begin(), out.end()), policy.output);
    std::copy(rounded.begin(), rounded.end(), out.begin());
    return;
  }
  std::vector<double> exact(shape.c_size());  // FP64: the products and most sums exact; one rounding to fp32
  refs::gemm_ref_fp64(shape, aq, bq, exact);
  std::transform(exact.begin(), exact.end(), out.begin(), [](double x) { return static_cast<float>(x); });
}

OpResult run_gemm(const OpArgs& args, std::vector<Side> sides) {
  return run_gemm_altering_emulator(args, std::move(sides), [](emu::GemmPolicy&) {});
}

}  // namespace

OpResult run_gemm_altering_emulator(const OpArgs& args, std::vector<Side> sides,
                                    const std::function<void(emu::GemmPolicy&)>& alter_emulator) {
  check_keys(args.shape, {"m", "n", "k", "ta", "tb"}, "--shape");
  const mpverify::ops::GemmShape shape{whole_number(args.shape, "m", "--shape"), whole_number(args.shape, "n", "--shape"),
                              whole_number(args.shape, "k", "--shape"),
                              whole_number(args.shape, "ta", "--shape", 0) != 0,
                              whole_number(args.shape, "tb", "--shape", 0) != 0};
  if (shape.m == 0 || shape.n == 0 || shape.k == 0) throw UsageError("--shape: m, n and k must be at least 1");
  check_keys(args.policy, {"input", "input-b", "accumulate", "promotion", "output", "block", "extra", "tc-rounding",
                              "step-inexact"},
             "--policy");
  const emu::GemmPolicy policy = gemm_policy_option(args.policy);
  emu::GemmPolicy emulator_policy = policy;
  alter_emulator(emulator_policy);

  std::mt19937_64 rng(args.seed);
  const auto a = normal_inputs(shape.a_size(), rng, 1.0), b = normal_inputs(shape.b_size(), rng, 1.0);
  // The reference multiplies the operands as the emulator sees them, rounded to their formats, so that the
  // two differ only by the accumulation and the output rounding: an accumulation model that is off shows.
  const std::vector<float> aq = emu::quantized_copy(a, policy.input), bq = emu::quantized_copy(b, policy.b_format());
  OpResult r;
  r.tensors = {{"c", policy.output}};
  size_outputs(sides, {shape.c_size()});
  for (Side& side : sides) {
    if (side.name == "ref") {
      run_reference(shape, aq, bq, policy, side.out[0]);
      side.ran = true;
    } else if (side.name == "emu") {
      emu::gemm_emu(shape, a, b, side.out[0], emulator_policy, &r.counters);
      side.ran = true;
    } else {
      const auto compute = gpu_compute_for(policy);
      run_gpu_side(side, compute ? "" : "no cuBLAS compute type matches this policy",
                   [&] { gpu::gemm_gpu(shape, a, b, side.out[0], *compute); });
    }
  }
  r.sides = std::move(sides);

  // Each side is within its own bound of the exact product of the rounded operands, relative to
  // || |A||B| ||: the FP64 reference (whose error gamma_k(2^-53) is negligible here, rounded once to fp32)
  // 2^-24; the emulator, and the instruction model's reference, gamma_k(u_acc) + u_out; the GPU, which rounds
  // its own operands (tf32 by truncation), 2 u_in more. Two sides are within the sum of their bounds, except
  // the emulator and the instruction model's reference, which follow one rule and must agree bit for bit.
  // gamma_k exists only while k u < 1; past that (fp16 accumulation of 2048+ terms) there is no a priori
  // bound.
  const double condition = refs::gemm_condition(shape, aq, bq);
  const double u_acc = accumulation_unit_roundoff(policy);
  auto gamma_or_infinity = [k = shape.k](double u) { return k * u < 1 ? compare::gamma(k, u) : INFINITY; };
  const double u_in = std::max(policy.input.unit_roundoff(), policy.b_format().unit_roundoff());
  auto side_bound = [=, out = policy.output, mma = policy.accumulation == emu::Accumulation::mma](const std::string& name) {
    if (name == "ref" && !mma) return 0x1p-24;  // the instruction model's reference has the emulator's bound
    return (name == "gpu" ? 2 * u_in : 0.0) + gamma_or_infinity(u_acc) + out.unit_roundoff();
  };
  const bool instruction = policy.accumulation == emu::Accumulation::mma;
  r.tolerance = [=](std::size_t, const std::string& x, const std::string& y) {
    if (instruction && ((x == "ref" && y == "emu") || (x == "emu" && y == "ref")))
      return compare::Tolerance::bit_exact("the same tensor-core instruction chain, computed by the emulator and "
                                           "by the reference apart from it (refs/mma_ref.cpp)");
    return compare::Tolerance::normwise((side_bound(x) + side_bound(y)) * condition,
                                        "sum of both sides' bounds from the exact product of the rounded operands "
                                        "(ref 2^-24; emu gamma_k(u_acc) + u_out; gpu 2u_in more) times "
                                        "|| |A||B| ||_F / ||C||_F");
  };
  char title[256];
  const std::string accumulation =
      policy.accumulation == emu::Accumulation::mma ? policy.mma->name : std::string(emu::to_string(policy.accumulation));
  std::snprintf(title, sizeof title, "op gemm  m=%d n=%d k=%d%s%s  policy input=%s input-b=%s accumulate=%s output=%s",
                shape.m, shape.n, shape.k, shape.transpose_a ? " ta" : "", shape.transpose_b ? " tb" : "",
                policy.input.name.c_str(), policy.b_format().name.c_str(), accumulation.c_str(),
                policy.output.name.c_str());
  r.title = title;
  r.shape = {{"m", shape.m}, {"n", shape.n}, {"k", shape.k}, {"ta", shape.transpose_a}, {"tb", shape.transpose_b}};
  r.policy = to_json(policy);
  return r;
}

OpFamily gemm_op_family() {
  return {{"gemm"},
          run_gemm,
          std::string("gemm: --shape m=,n=,k=[,ta=0|1,tb=0|1]; --policy ") + kGemmPolicyHelp + "."};
}

}  // namespace mpverify::cli::ops
