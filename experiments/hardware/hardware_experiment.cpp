#include "hardware_experiment.h"

#include <algorithm>
#include <stdexcept>

#include "compare/compare.h"
#include "data/random.h"
#include "emu/conv2d_emu.h"
#include "emu/gemm_emu.h"
#include "emu/mma_presets.h"
#include "emu/quantize.h"
#include "gpu/conv2d_gpu.h"
#include "gpu/device.h"
#include "gpu/gemm_fp8_gpu.h"
#include "gpu/gemm_gpu.h"
#include "hardware/cublaslt_choice.h"
#include "hardware/seeded_inputs.h"
#include "hardware/tf32_conversion.h"
#include "refs/conv2d_ref.h"
#include "refs/gemm_ref.h"
#include "report/output_files.h"
#include "report/text_format.h"

namespace mpverify::experiments {

namespace fs = std::filesystem;
using formats::Format;
using formats::parse_format;
using report::fixed;
using report::general;

namespace {

struct Model {
  std::string name;
  emu::GemmPolicy policy;
  // The unit roundoff of one accumulation step of the model, for the a
  // priori bound gamma_L(u) * condition + u_out (refs/*_condition):
  // plain fp32 2^-24; fp16 accumulation 2^-11; the tensor-core model: each
  // block's sum is truncated to fp32 (< 2^-23 of it) and the alignment drops
  // < 2^-(23+extra) of each of the block+1 terms, so a block is within 2^-21
  // of its terms' magnitudes for blocks up to 16 with 3 extra bits
  // (17 * 2^-26 < 2^-21.9); the derivation of tests/gemm_gpu_test.cpp.
  double unit_roundoff;
};

emu::GemmPolicy policy_of(const Format& input, emu::Accumulation acc, const Format& output, int block = 4) {
  emu::GemmPolicy p;
  p.input = input;
  p.accumulation = acc;
  p.output = output;
  p.tensor_core = {block, 3, formats::Rounding::toward_zero};
  return p;
}

std::vector<Model> fp32_accumulating_models(const Format& input, const Format& output) {
  std::vector<Model> models{{"plain fp32 accumulation (one RNE rounding per step)",
                             policy_of(input, emu::Accumulation::fp32, output), 0x1p-24}};
  for (const int block : {4, 8, 16})
    models.push_back({"tensor-core model, block " + std::to_string(block) + " (truncation, 3 extra bits)",
                      policy_of(input, emu::Accumulation::tensor_core, output, block), 0x1p-21});
  return models;
}

// A chain of one tensor-core instruction along K in order (each result the next one's c), as the instruction
// models of emu/mma_presets.h compute it; with `slices` > 1, K cut into that many equal chains from zero whose
// results are added in order by fp32 additions (a split-K GEMM reducing serially: the promotion interval K /
// slices of emu/mma_model.h).
Model instruction_chain(const std::string& preset, const Format& input, const Format& output, int K, int slices = 1) {
  emu::GemmPolicy p = policy_of(input, emu::Accumulation::mma, output);
  p.mma = emu::mma_preset(preset);
  p.promotion_interval = slices > 1 ? K / slices : 0;
  std::string name = "chain of " + preset;
  if (slices > 1)
    name += input.width() == 8 ? ", promoted every " + std::to_string(K / slices) + " (fp32 sum in order)"
                               : ", split-K " + std::to_string(slices) + " (fp32 sum in order)";
  return {name, p, emu::mma_unit_roundoff(*p.mma)};
}

// The plain and block models, then chains of each architecture's fp32-accumulating instruction (Hopper's
// wgmma, Ampere's two halves), and the Hopper chain split into 2..16 slices of at least 64.
std::vector<Model> fp32_accumulating_and_chain_models(const Format& input, const Format& output, int K) {
  std::vector<Model> models = fp32_accumulating_models(input, output);
  const std::string type = input.name == "bf16" ? "bf16" : "f16";
  for (const std::string preset : {"sm90.wgmma.k16.f32.", "sm80.mma.m16n8k16.f32."})
    models.push_back(instruction_chain(preset + type, input, output, K));
  // A wider fused operation than the published k = 16, in case the library's instruction sums more at once.
  Model wide = instruction_chain("sm90.wgmma.k16.f32." + type, input, output, K);
  wide.policy.mma =
      emu::mma_custom(input, input, parse_format("fp32"), 32, 25, false, emu::MmaOutput::fp32_toward_zero);
  wide.name = "chain of a custom k = 32, F = 25 instruction";
  models.push_back(wide);
  for (const int slices : {2, 4, 8, 16})
    if (K >= 64 * slices)
      models.push_back(instruction_chain("sm90.wgmma.k16.f32." + type, input, output, K, slices));
  return models;
}


struct Op {
  std::string op, shape, formats, hardware;
  std::size_t out_size;
  Format output;
  std::int64_t terms;     // the longest sum (gamma_L)
  double condition;       // refs::*_condition
  std::vector<double> fp64;
  std::function<void(const emu::GemmPolicy&, std::span<float>)> emulate;
  std::function<void(std::span<float>)> hardware_run;  // throws without a device
  std::vector<Model> models;
};

HardwareCase run_case(const Op& op, bool use_gpu) {
  HardwareCase c{op.op, op.shape, op.formats, op.hardware, {}, {}, {}};
  std::vector<float> hw;
  if (use_gpu) {
    hw.resize(op.out_size);
    try {
      op.hardware_run(hw);
    } catch (const std::exception& e) {  // a library without this configuration on this device: say so, go on
      c.hardware_error = e.what();
      use_gpu = false;
    }
  }
  if (use_gpu)
    c.hardware_vs_fp64 = compare::compare(std::span<const double>(op.fp64), hw, op.output,
                                          compare::Tolerance::normwise(INFINITY, "measured only"))
                             .relative_error;
  std::vector<float> first;
  for (const Model& m : op.models) {
    std::vector<float> out(op.out_size);
    op.emulate(m.policy, out);
    ModelOutcome o;
    o.model = m.name;
    const double u_out = op.output.unit_roundoff();
    // gamma_L(u) exists while L u < 1; a model past that (FP8 with F = 13 at K = 4096) has no a priori bound.
    const bool bounded = static_cast<double>(op.terms) * m.unit_roundoff < 1;
    const auto bound = bounded ? compare::Tolerance::normwise(compare::gamma(op.terms, m.unit_roundoff) * op.condition + u_out,
                                                              "gamma_L(u_acc) * condition + u_out (a priori bound of the model)")
                               : compare::Tolerance::normwise(INFINITY, "none: L u >= 1");
    const compare::Comparison vs64 = compare::compare(std::span<const double>(op.fp64), out, op.output, bound);
    if (bounded && !vs64.passed)
      throw std::logic_error(op.op + " " + m.name + ": outside its a priori bound against FP64: " + vs64.failure);
    o.error_vs_fp64 = vs64.relative_error;
    if (first.empty()) first = out;
    o.identical_to_first =
        compare::compare(first, out, op.output, compare::Tolerance::bit_exact("models compared")).bit_identical_fraction;
    if (use_gpu) {
      const compare::Comparison vs_hw =
          compare::compare(out, hw, op.output, compare::Tolerance::bit_exact("emulator against hardware"));
      o.identical_to_hardware = vs_hw.bit_identical_fraction;
      o.max_ulp_to_hardware = vs_hw.max_ulp;
    }
    c.models.push_back(o);
  }
  return c;
}

std::vector<Op> operations(std::uint64_t seed) {
  const Format fp16 = parse_format("fp16"), bf16 = parse_format("bf16"), fp32 = parse_format("fp32");
  std::vector<Op> ops;
  std::uint64_t stream = 0;
  // A library's GEMM on the device, on row-major A and B.
  using GemmRunner =
      std::function<void(const ops::GemmShape&, std::span<const float>, std::span<const float>, std::span<float>)>;
  const auto gemm = [&](ops::GemmShape s, const Format& input, const Format& output, std::string hardware,
                        GemmRunner run, std::vector<Model> models) {
    auto a = std::make_shared<std::vector<float>>(seeded_inputs(s.a_size(), seed, stream++, input));
    auto b = std::make_shared<std::vector<float>>(seeded_inputs(s.b_size(), seed, stream++, input));
    Op op;
    op.op = "GEMM";
    op.shape = "m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k);
    op.formats = std::string(input.name) + " in, " + std::string(output.name) + " out";
    op.hardware = std::move(hardware);
    op.out_size = s.c_size();
    op.output = output;
    op.terms = s.k;
    op.condition = refs::gemm_condition(s, *a, *b);
    op.fp64.resize(s.c_size());
    refs::gemm_ref_fp64(s, *a, *b, op.fp64);
    op.emulate = [s, a, b](const emu::GemmPolicy& p, std::span<float> c) { emu::gemm_emu(s, *a, *b, c, p); };
    op.hardware_run = [s, a, b, run](std::span<float> c) { run(s, *a, *b, c); };
    op.models = std::move(models);
    ops.push_back(std::move(op));
  };
  const auto cublas = [&](ops::GemmShape s, const Format& input, const Format& output, gpu::GemmCompute compute,
                          std::vector<Model> models) {
    gemm(s, input, output, "cuBLAS " + std::string(gpu::to_string(compute)),
         [compute](const ops::GemmShape& shape, std::span<const float> a, std::span<const float> b, std::span<float> c) {
           gpu::gemm_gpu(shape, a, b, c, compute);
         },
         std::move(models));
  };
  for (const ops::GemmShape s : {ops::GemmShape{256, 256, 256}, ops::GemmShape{64, 64, 4096}})
    cublas(s, fp16, fp32, gpu::GemmCompute::fp16_fp32_accumulate, fp32_accumulating_and_chain_models(fp16, fp32, s.k));
  cublas({256, 256, 256}, bf16, fp32, gpu::GemmCompute::bf16_fp32_accumulate,
         fp32_accumulating_and_chain_models(bf16, fp32, 256));
  cublas({256, 256, 256}, fp16, fp16, gpu::GemmCompute::fp16_fp16_accumulate,
         {{"fp16 accumulation (one fp16 rounding per step)", policy_of(fp16, emu::Accumulation::fp16, fp16), 0x1p-11},
          {"plain fp32 accumulation, rounded to fp16 at the end", policy_of(fp16, emu::Accumulation::fp32, fp16),
           0x1p-24},
          instruction_chain("sm90.wgmma.k16.f16.f16", fp16, fp16, 256),
          instruction_chain("sm90.wgmma.k16.f32.f16", fp16, fp16, 256)});

  // FP8 (OCP E4M3) through cuBLASLt, with its fast accumulation and without (then cuBLASLt promotes the
  // tensor cores' partial sums into fp32 at an interval of its own): Hopper's FP8 wgmma model (F = 13, E8M13)
  // as one chain and promoted every 128 to 1024 elements, beside Blackwell's (F = 25) and plain fp32.
  const Format e4m3 = parse_format("fp8-e4m3");
  const int K = 4096;
  std::vector<Model> fp8_models{
      {"plain fp32 accumulation (one RNE rounding per step)", policy_of(e4m3, emu::Accumulation::fp32, fp32), 0x1p-24}};
  for (const int interval : {0, 128, 256, 512, 1024})
    fp8_models.push_back(instruction_chain("sm90.wgmma.k32.f32.e4m3", e4m3, fp32, K, interval ? K / interval : 1));
  fp8_models.push_back(instruction_chain("sm90.mma.m16n8k32.f32.e4m3", e4m3, fp32, K));
  fp8_models.push_back(instruction_chain("sm100.tcgen05.k32.f32.e4m3", e4m3, fp32, K));
  for (const bool fast : {true, false})
    gemm({64, 64, K}, e4m3, fp32, fast ? "cuBLASLt FP8, fast accumulation" : "cuBLASLt FP8",
         [e4m3, fast](const ops::GemmShape& shape, std::span<const float> a, std::span<const float> b, std::span<float> c) {
           gpu::gemm_fp8_gpu(shape, a, e4m3, b, e4m3, c, fast);
         },
         fp8_models);

  // conv2d with cuDNN's fp16 tensors (inputs and output) and fp32 compute.
  const ops::Conv2dShape cs{8, 32, 14, 14, 32, 3, 3, 1, 1};
  const std::string conv_shape = "n=8 c=32 h=w=14 k=32 r=s=3 pad=1";
  const auto conv = [&](const std::string& name, std::size_t in1, std::size_t in2, std::size_t out,
                        std::int64_t terms, auto condition, auto fp64, auto emulate, auto hardware) {
    auto x = std::make_shared<std::vector<float>>(seeded_inputs(in1, seed, stream++, fp16));
    auto y = std::make_shared<std::vector<float>>(seeded_inputs(in2, seed, stream++, fp16));
    Op op;
    op.op = name;
    op.shape = conv_shape;
    op.formats = "fp16 in, fp16 out";
    op.hardware = "cuDNN fp16-fp32acc";
    op.out_size = out;
    op.output = fp16;
    op.terms = terms;
    op.condition = condition(cs, *x, *y);
    op.fp64.resize(out);
    fp64(cs, *x, *y, std::span<double>(op.fp64));
    op.emulate = [x, y, emulate, cs](const emu::GemmPolicy& p, std::span<float> o) { emulate(cs, *x, *y, o, p, nullptr); };
    op.hardware_run = [x, y, hardware, cs](std::span<float> o) {
      hardware(cs, *x, *y, o, gpu::ConvCompute::fp16_fp32_accumulate);
    };
    op.models = fp32_accumulating_models(fp16, fp16);
    op.models.push_back(instruction_chain("sm90.wgmma.k16.f32.f16", fp16, fp16, static_cast<int>(terms)));
    ops.push_back(std::move(op));
  };
  conv("conv2d forward", cs.x_size(), cs.weight_size(), cs.y_size(), cs.forward_terms(), refs::conv2d_condition,
       refs::conv2d_forward_ref_fp64, emu::conv2d_forward_emu, gpu::conv2d_forward_gpu);
  conv("conv2d backward data", cs.y_size(), cs.weight_size(), cs.x_size(), cs.backward_data_terms(),
       refs::conv2d_backward_data_condition, refs::conv2d_backward_data_ref_fp64, emu::conv2d_backward_data_emu,
       gpu::conv2d_backward_data_gpu);
  conv("conv2d backward filter", cs.x_size(), cs.y_size(), cs.weight_size(), cs.backward_filter_terms(),
       refs::conv2d_backward_filter_condition, refs::conv2d_backward_filter_ref_fp64,
       emu::conv2d_backward_filter_emu, gpu::conv2d_backward_filter_gpu);
  return ops;
}

std::string fraction_text(double f) { return fixed(100.0 * f, 2) + "%"; }

}  // namespace

void validate_hardware(const HardwareConfig& c) {
  if (c.report.extension() != ".md" || c.report.stem().empty())
    throw std::invalid_argument("--report '" + c.report.string() + "': the report is a Markdown file (NAME.md)");
}

HardwareResult run_hardware(const HardwareConfig& c, const std::function<void(const std::string&)>& progress) {
  validate_hardware(c);
  HardwareResult result;
  result.gpu_reason = c.gpu ? gpu::gpu_unavailable_reason() : std::string("the GPU side was turned off (--no-gpu)");
  const bool use_gpu = result.gpu_reason.empty();
  if (use_gpu) result.device = gpu::describe_device().name;
  const std::vector<Op> ops = operations(c.seed);
  std::size_t k = 0;
  for (const Op& op : ops) {
    if (progress) progress("[" + std::to_string(++k) + "/" + std::to_string(ops.size()) + "] " + op.op + " " + op.shape);
    result.cases.push_back(run_case(op, use_gpu));
  }

  std::string md = "# The emulator against the hardware: bit-identical fractions\n\n";
  md += "Written by `build/experiments/hardware` (seed " + std::to_string(c.seed) + "). ";
  if (use_gpu) {
    md += "The hardware side ran on **" + result.device + "** (cuBLAS " + gpu::linked_cublas_version() +
          ", cuDNN " + gpu::linked_cudnn_version() + ").\n\n";
  } else {
    // The reason (no driver, no device, a build without CUDA) goes to the
    // command's output and --json, not here: the report stays the same
    // bytes on every machine without a GPU, so CI can regenerate it.
    md += "**No GPU was available** to this run (the command prints why): the hardware columns below are empty "
          "and nothing in this report was measured on a GPU. On a machine with one, `experiments/gpu_session` "
          "(or `build/experiments/hardware`) fills them.\n\n";
  }
  md += "## What is compared\n\n";
  md += "The same seeded inputs (noise rounded to the input format, so that the hardware's conversion is exact) "
        "go through the emulated GEMM or convolution under each accumulation model, and through cuBLAS or cuDNN. "
        "A model that describes the hardware gives 100% bit-identical outputs; the models' fractions against "
        "each other (the column *identical to the first model*) show how far apart they are on these inputs, "
        "so a hardware fraction near 100% for one model and not for the others identifies the hardware's "
        "accumulation. The tensor-core model is Fasi, Higham, Mikaitis and Pranesh's (PeerJ CS 2021): fp16 "
        "products exact, each block of products summed after alignment to the largest term with no guard bits "
        "and truncation; they measured blocks of 4 on V100 and 8 on A100; Khattak and Mikaitis (arXiv "
        "2512.07004) extend the models to Hopper and Blackwell, which is why block 16 is tried too. The chains are the "
        "per-instruction models of `mpverify eval --op dot --list` (MMA-Sim's, arXiv 2511.10909, matched bit for "
        "bit against single `mma.sync` instructions in `mma_probe.md`) issued along K in order, each result the "
        "next one's c; a split-K row cuts K into equal slices, each a chain from zero, and adds their results in "
        "order in fp32. A chain that matches says in which order and with which instruction the library sums; "
        "one that does not leaves the order open.\n\n";
  md += "Every model's output is also checked against FP64 within its a priori bound (γ_L(u) times the "
        "condition number plus the output rounding); a model outside it would stop the experiment.\n\n";
  md += "## Results\n\n";
  md += "| op | shape | formats | hardware | emulator model | error vs FP64 | identical to the first model | "
        "identical to the hardware | max ulp vs the hardware |\n|---|---|---|---|---|---:|---:|---:|---:|\n";
  for (const HardwareCase& hc : result.cases)
    for (const ModelOutcome& m : hc.models) {
      md += "| " + hc.op + " | " + hc.shape + " | " + hc.formats + " | " + hc.hardware + " | " + m.model + " | " +
            general(m.error_vs_fp64) + " | " + fraction_text(m.identical_to_first) + " | ";
      md += m.identical_to_hardware ? fraction_text(*m.identical_to_hardware)
            : hc.hardware_error.empty() ? std::string("not run (no GPU)")
                                        : "refused: " + hc.hardware_error;
      md += " | ";
      md += m.max_ulp_to_hardware ? general(*m.max_ulp_to_hardware) : std::string("-");
      md += " |\n";
    }
  md += "\nError vs FP64 is normwise (‖emulated − FP64‖₂ / ‖FP64‖₂). ";
  md += "Max ulp is in the output format.\n";
  if (use_gpu) {
    md += "\n## The hardware against FP64\n\nThe library's own normwise relative error against the FP64 product of "
          "the same operands, beside the models' (above): where no model matches bit for bit, this says how much "
          "the hardware's accumulation loses.\n\n| op | shape | formats | hardware | error vs FP64 |\n|---|---|---|---|---:|\n";
    for (const HardwareCase& hc : result.cases)
      md += "| " + hc.op + " | " + hc.shape + " | " + hc.formats + " | " + hc.hardware + " | " +
            (hc.hardware_vs_fp64 ? general(*hc.hardware_vs_fp64) : "refused: " + hc.hardware_error) + " |\n";
  }
  md += "\n## How well the comparison can tell the models apart\n\n";
  md += "An output on which every model gives the same bits says nothing about which model the hardware follows. "
        "Per case, the share of outputs on which at least one model differs from the first:\n\n";
  for (const HardwareCase& hc : result.cases) {
    double least = 1;
    for (const ModelOutcome& m : hc.models) least = std::min(least, m.identical_to_first);
    md += "- " + hc.op + " " + hc.shape + " (" + hc.formats + "): at least " + fraction_text(1 - least) + "\n";
  }
  md += "\nWith fp32 outputs the models disagree on most outputs of a long sum, so the hardware comparison "
        "identifies the accumulation; with fp16 outputs the final rounding hides most of the difference and "
        "only the few outputs listed above can separate the models.\n";
  if (!use_gpu)
    md += "\nWithout a GPU this run can say how far apart the models are, not which one the hardware follows.\n";
  nlohmann::ordered_json tf32, lt;
  if (progress) progress("cuBLASLt's algorithm choice");
  md += cublaslt_section(use_gpu, c.seed, lt);
  if (progress) progress("tf32: how cuBLAS converts fp32 operands");
  md += tf32_section(use_gpu, c.seed, tf32);
  report::write_output(c.report, md, result.files);

  nlohmann::ordered_json j;
  j["gpu"] = use_gpu ? nlohmann::ordered_json(result.device) : nlohmann::ordered_json(result.gpu_reason);
  nlohmann::ordered_json cases = nlohmann::ordered_json::array();
  for (const HardwareCase& hc : result.cases)
    for (const ModelOutcome& m : hc.models) {
      nlohmann::ordered_json row{{"op", hc.op}, {"shape", hc.shape}, {"formats", hc.formats},
                                 {"hardware", hc.hardware}, {"model", m.model},
                                 {"error_vs_fp64", m.error_vs_fp64}, {"identical_to_first", m.identical_to_first}};
      row["identical_to_hardware"] = m.identical_to_hardware ? nlohmann::ordered_json(*m.identical_to_hardware) : nullptr;
      row["max_ulp_to_hardware"] = m.max_ulp_to_hardware ? nlohmann::ordered_json(*m.max_ulp_to_hardware) : nullptr;
      if (!hc.hardware_error.empty()) row["hardware_error"] = hc.hardware_error;
      cases.push_back(row);
    }
  j["cases"] = cases;
  j["cublaslt"] = lt;
  j["tf32"] = tf32;
  j["files"] = result.files;
  result.json = j;
  return result;
}

}  // namespace mpverify::experiments
