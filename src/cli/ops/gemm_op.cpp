// `ops --op gemm`: refs::gemm_ref_fp64 (or, under a tensor-core instruction, refs::gemm_mma_ref),
// emu::gemm_emu, and on the GPU either cuBLAS (gpu::gemm_gpu) or, under a tensor-core instruction, that
// instruction chained along K in the emulator's order (gpu::gemm_mma_chain).
#include "cli/ops/gemm_op.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cctype>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/ops/gemm_policy_option.h"
#include "cli/ops/ops_registry.h"
#include "emu/quantize.h"
#include "gpu/device.h"
#include "gpu/gemm_gpu.h"
#include "gpu/gemm_mma_chain.h"
#include "gpu/mma_probe.h"
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

// Which GPU computation the gpu side runs: cuBLAS, or the policy's tensor-core instruction chained along K in
// the emulator's order (--policy gpu=chain, the default under a tensor-core instruction).
enum class GpuPath { cublas, chain };

GpuPath gpu_path(const KeyValues& keys, const emu::GemmPolicy& p) {
  const bool instruction = p.accumulation == emu::Accumulation::mma;
  const auto it = keys.find("gpu");
  if (it == keys.end()) return instruction ? GpuPath::chain : GpuPath::cublas;
  if (it->second == "cublas") return GpuPath::cublas;
  if (it->second != "chain") throw UsageError("--policy gpu=" + it->second + ": the GPU side is gpu=cublas or gpu=chain");
  if (!instruction)
    throw UsageError("--policy gpu=chain chains a tensor-core instruction: name one with accumulate=PRESET "
                     "(e.g. accumulate=sm80.mma.m16n8k16.f32.f16; `mpverify eval --op dot --list` lists them)");
  return GpuPath::chain;
}

// The compute capability a preset describes (sm90.wgmma... -> 90), 0 for a custom model.
int preset_compute_capability(const emu::MmaModel& m) {
  if (!m.name.starts_with("sm")) return 0;
  int cc = 0;
  for (std::size_t i = 2; i < m.name.size() && std::isdigit(static_cast<unsigned char>(m.name[i])); ++i)
    cc = cc * 10 + (m.name[i] - '0');
  return cc;
}

// Whether the GPU side's order is the emulator's and the model names this device's architecture: then the two
// must agree bit for bit.
bool gpu_order_is_the_emulators(const emu::GemmPolicy& p, GpuPath path) {
  if (path != GpuPath::chain || gpu::gpu_unavailable_reason() != "") return false;
  return preset_compute_capability(*p.mma) == gpu::describe_device().compute_capability;
}

void run_gpu(Side& side, const mpverify::ops::GemmShape& shape, std::span<const float> a, std::span<const float> b,
             std::span<const float> aq, std::span<const float> bq, const emu::GemmPolicy& policy, GpuPath path) {
  if (path == GpuPath::cublas) {
    const auto compute = gpu_compute_for(policy);
    run_gpu_side(side, compute ? "" : "no cuBLAS compute type matches this policy",
                 [&] { gpu::gemm_gpu(shape, a, b, side.out[0], *compute); });
    return;
  }
  std::string unsupported = gpu::mma_probe_unsupported_reason(*policy.mma);
  if (unsupported.empty() && shape.c_size() * static_cast<std::size_t>(policy.promotion_interval > 0
                                                                          ? policy.promotion_interval : shape.k) >
                                 gpu::kMaxChainGemmTerms)
    unsupported = "the chained instruction lays every dot product out apart: m n k (k per promotion) is at most 2^26";
  run_gpu_side(side, unsupported, [&] {
    gpu::gemm_mma_chain(shape, aq, bq, side.out[0], *policy.mma, policy.input, policy.b_format(),
                        policy.promotion_interval);
    const std::vector<float> rounded = emu::quantized_copy(side.out[0], policy.output);  // as the emulator does
    std::copy(rounded.begin(), rounded.end(), side.out[0].begin());
  });
}

// (|op(A)| |op(B)|)_ij in FP64: the scale of the componentwise bounds below.
std::shared_ptr<const std::vector<double>> absolute_product(const mpverify::ops::GemmShape& shape,
                                                            std::span<const float> aq, std::span<const float> bq) {
  std::vector<float> abs_a(aq.begin(), aq.end()), abs_b(bq.begin(), bq.end());
  for (float& x : abs_a) x = std::fabs(x);
  for (float& x : abs_b) x = std::fabs(x);
  auto s = std::make_shared<std::vector<double>>(shape.c_size());
  refs::gemm_ref_fp64(shape, abs_a, abs_b, *s);
  return s;
}

// Each side's result c^ is within beta s_ij of the exact product c of the rounded operands, s = |A||B|
// (Higham, eq. 3.13): the FP64 reference, rounded once to fp32, 2^-24; the emulator, the instruction model's
// reference and the GPU's chain gamma_k(u_acc) for the sum plus u_out (1 + gamma_k(u_acc)) for the output
// rounding (|c^| <= (1 + gamma_k) s); cuBLAS, which rounds its own operands (tf32 by truncation), 2 u_in more.
// Two sides differ by at most (beta_x + beta_y) s_ij <= (beta_x + beta_y) / u_out ulps of the output format
// at s_ij (an ulp at s is at least u_out s). Sides that follow one rule in one order agree bit for bit.
// gamma_k exists only while k u < 1; past that (fp16 accumulation of 2048+ terms) there is no a priori bound.
ToleranceFn gemm_tolerance(const mpverify::ops::GemmShape& shape, std::span<const float> aq, std::span<const float> bq,
                           const emu::GemmPolicy& policy, GpuPath path) {
  const double u_acc = accumulation_unit_roundoff(policy), u_out = policy.output.unit_roundoff();
  const double gamma = shape.k * u_acc < 1 ? compare::gamma(shape.k, u_acc) : INFINITY;
  const double u_in = std::max(policy.input.unit_roundoff(), policy.b_format().unit_roundoff());
  const bool instruction = policy.accumulation == emu::Accumulation::mma;
  auto beta = [=](const std::string& side) {
    if (side == "ref" && !instruction) return 0x1p-24;
    return (side == "gpu" && path == GpuPath::cublas ? 2 * u_in : 0.0) + gamma + u_out * (1 + gamma);
  };
  const bool gpu_bit_exact = instruction && gpu_order_is_the_emulators(policy, path);
  const auto scale = absolute_product(shape, aq, bq);
  return [=](std::size_t, const std::string& x, const std::string& y) {
    const bool has_gpu = x == "gpu" || y == "gpu";
    if (instruction && !has_gpu)
      return compare::Tolerance::bit_exact("the same tensor-core instruction chain, computed by the emulator and "
                                           "by the reference apart from it (refs/mma_ref.cpp)");
    if (gpu_bit_exact)
      return compare::Tolerance::bit_exact("the same instruction chained in the same order on this GPU, whose "
                                           "architecture the model describes (gpu/gemm_mma_chain.h)");
    return compare::Tolerance::ulps_at_scale(
        (beta(x) + beta(y)) / u_out, scale,
        "componentwise: both sides' bounds from the exact product of the rounded operands (ref 2^-24; emu "
        "gamma_k(u_acc) + u_out(1 + gamma_k); cuBLAS 2u_in more) times (|A||B|)_ij, in ulps at (|A||B|)_ij");
  };
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
                              "step-inexact", "gpu"},
             "--policy");
  KeyValues policy_keys = args.policy;
  policy_keys.erase("gpu");
  const emu::GemmPolicy policy = gemm_policy_option(policy_keys);
  const GpuPath gpu = gpu_path(args.policy, policy);
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
      run_gpu(side, shape, a, b, aq, bq, policy, gpu);
    }
  }
  r.sides = std::move(sides);
  r.tolerance = gemm_tolerance(shape, aq, bq, policy, gpu);
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
          std::string("gemm: --shape m=,n=,k=[,ta=0|1,tb=0|1]; --policy ") + kGemmPolicyHelp +
              ", gpu=chain|cublas (the GPU side under an instruction: chain, the default, runs that instruction "
              "along K in the emulator's order and must match it bit for bit on the architecture the preset names; "
              "cublas runs cuBLAS, held to a componentwise bound)."};
}

}  // namespace mpverify::cli::ops
