#include "hardware/cublaslt_choice.h"

#include <vector>

#include "compare/compare.h"
#include "emu/gemm_emu.h"
#include "emu/mma_presets.h"
#include "gpu/gemm_gpu.h"
#include "gpu/gemm_lt_gpu.h"
#include "hardware/seeded_inputs.h"
#include "report/text_format.h"

namespace mpverify::experiments {

namespace {

double identical(std::span<const float> x, std::span<const float> y) {
  return compare::compare(x, y, formats::parse_format("fp32"), compare::Tolerance::bit_exact("cuBLASLt's choice"))
      .bit_identical_fraction;
}

// Hopper's fp32-accumulating instruction chained along K from zero; with `parts` > 1, K cut into that many
// equal parts, each a chain from zero, their results added in order in fp32 (a split-K reduced in the
// compute type, serially): the promotion interval K / parts of emu/mma_model.h.
std::vector<float> chain(const ops::GemmShape& s, std::span<const float> a, std::span<const float> b,
                         const formats::Format& input, int parts) {
  emu::GemmPolicy p;
  p.input = input;
  p.accumulation = emu::Accumulation::mma;
  p.output = formats::parse_format("fp32");
  p.mma = emu::mma_preset(std::string("sm90.wgmma.k16.f32.") + (input.name == "bf16" ? "bf16" : "f16"));
  p.promotion_interval = parts > 1 ? s.k / parts : 0;
  std::vector<float> c(s.c_size());
  emu::gemm_emu(s, a, b, c, p);
  return c;
}

std::string percent(double f) { return report::fixed(100.0 * f, 2) + "%"; }

}  // namespace

std::string cublaslt_section(bool use_gpu, std::uint64_t seed, nlohmann::ordered_json& json) {
  std::string md =
      "\n## cuBLASLt's algorithm choice\n\n"
      "For each fp16 and bf16 GEMM with fp32 output, the algorithm cuBLASLt's heuristic ranks first (32 MiB of "
      "workspace allowed), as `cublasLtMatmulAlgoConfigGetAttribute` reads it (tile, stages, inner and "
      "cluster shapes are the ids of `cublasLtMatmulTile_t`, `cublasLtMatmulStages_t`, ... in cublasLt.h), "
      "run through `cublasLtMatmul` on the same seeded operands: whether it gives `cublasGemmEx`'s bits (then "
      "it is the algorithm behind the GEMMs above), and whether Hopper's `wgmma` chained along K, whole or "
      "split into the algorithm's split-K parts added in order in fp32, reproduces it.\n\n";
  if (!use_gpu) {
    json = nullptr;
    return md + "Not measured: no GPU was available to this run; the question stays open.\n";
  }
  md += "| shape | inputs | cuBLASLt's first algorithm | identical to cublasGemmEx | chain of sm90.wgmma.k16 | "
        "the chain split as the algorithm splits K |\n|---|---|---|---:|---:|---:|\n";
  json = nlohmann::ordered_json::array();
  std::uint64_t stream = 1000;  // apart from the streams of the cases above
  for (const ops::GemmShape s : {ops::GemmShape{256, 256, 256}, ops::GemmShape{64, 64, 4096}})
    for (const char* name : {"fp16", "bf16"}) {
      const formats::Format input = formats::parse_format(name);
      const auto compute = input.name == "bf16" ? gpu::GemmCompute::bf16_fp32_accumulate
                                                : gpu::GemmCompute::fp16_fp32_accumulate;
      const std::vector<float> a = seeded_inputs(s.a_size(), seed, stream++, input);
      const std::vector<float> b = seeded_inputs(s.b_size(), seed, stream++, input);
      std::vector<float> lt(s.c_size()), ex(s.c_size());
      const gpu::LtAlgorithm algorithm = gpu::gemm_lt_gpu(s, a, b, lt, compute);
      gpu::gemm_gpu(s, a, b, ex, compute);
      const double whole = identical(chain(s, a, b, input, 1), lt);
      const int parts = algorithm.split_k;
      const bool splittable = parts > 1 && s.k % parts == 0 && (s.k / parts) % 16 == 0;
      const std::string split = parts <= 1       ? std::string("(no split)")
                                : splittable ? percent(identical(chain(s, a, b, input, parts), lt))
                                             : "(K / " + std::to_string(parts) + " is not a multiple of 16)";
      const std::string shape = "m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k);
      md += "| " + shape + " | " + name + " | " + gpu::describe(algorithm) + " | " + percent(identical(lt, ex)) +
            " | " + percent(whole) + " | " + split + " |\n";
      json.push_back({{"shape", shape}, {"inputs", name}, {"algorithm", gpu::describe(algorithm)},
                      {"split_k", parts}, {"reduction", gpu::reduction_scheme_name(algorithm.reduction_scheme)},
                      {"identical_to_gemm_ex", identical(lt, ex)}, {"chain_identical", whole}});
    }
  return md + "\nThe session also runs this experiment with `CUBLASLT_LOG_LEVEL=2`: the kernel each cuBLAS call "
              "launched is in its logs (`logs.tar.gz`, cublaslt-*.log).\n";
}

}  // namespace mpverify::experiments
