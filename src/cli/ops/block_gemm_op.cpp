// `ops --op block-gemm`: A and B block-quantized along K and multiplied under a block-scaled tensor-core model
// (emu/block_scaled_gemm.h). ref is refs::block_scaled_gemm_ref on the same quantized operands (the rule
// computed apart from the emulator: bit for bit), emu the emulator, gpu refused (no kernel yet). Beside the
// comparison, `info` gives what quantization and accumulation together cost against the FP64 product of the
// unquantized inputs.
#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "cli/commands.h"
#include "cli/ops/ops_registry.h"
#include "emu/block_scaled_gemm.h"
#include "emu/gemm_emu.h"
#include "formats/encoding.h"
#include "refs/block_scaled_ref.h"
#include "refs/gemm_ref.h"

namespace mpverify::cli::ops {

namespace {

using emu::BlockScaledAccumulation;
using RefOperand = refs::BlockScaledOperandRef;

const emu::BlockScheme& scheme_option(const KeyValues& kv, const std::string& key, const std::string& fallback) {
  const auto it = kv.find(key);
  const std::string name = it == kv.end() ? fallback : it->second;
  if (const emu::BlockScheme* s = emu::find_block_scheme(name)) return *s;
  std::string list;
  for (const emu::BlockScheme& s : emu::block_schemes()) list += (list.empty() ? "" : ", ") + s.name;
  throw UsageError("--policy " + key + "=" + name + ": unknown scheme (" + list + ")");
}

// The model a pair of schemes is made for when accumulate= is not given.
BlockScaledAccumulation default_model(const emu::BlockScheme& a, const emu::BlockScheme& b) {
  if (a.scale_format == emu::ScaleFormat::fp32) return BlockScaledAccumulation::sm90_fp8_blockwise;
  const bool fp4 = a.element.name == "fp4-e2m1" && b.element.name == "fp4-e2m1";
  return fp4 && a.scale_format == b.scale_format ? BlockScaledAccumulation::sm100_mxf4nvf4
                                                 : BlockScaledAccumulation::sm100_mxf8f6f4;
}

emu::BlockScaledGemmPolicy policy_option(const KeyValues& kv) {
  check_keys(kv, {"scheme-a", "scheme-b", "accumulate", "scale-rule"}, "--policy");
  emu::BlockScaledGemmPolicy p;
  p.scheme_a = scheme_option(kv, "scheme-a", "mxfp8-e4m3");
  p.scheme_b = scheme_option(kv, "scheme-b", p.scheme_a.name);
  p.accumulation = default_model(p.scheme_a, p.scheme_b);
  if (const auto it = kv.find("accumulate"); it != kv.end()) {
    const auto a = emu::parse_block_scaled_accumulation(it->second);
    if (!a)
      throw UsageError("--policy accumulate=" + it->second +
                       ": sm100.mxf8f6f4, sm100.mxf4nvf4 or sm90.fp8-blockwise");
    p.accumulation = *a;
  }
  if (const auto it = kv.find("scale-rule"); it != kv.end()) {
    const auto rule = emu::parse_scale_rule(it->second);
    if (!rule) throw UsageError("--policy scale-rule=" + it->second + ": floor, ceil, even or rceil");
    p.quantize_a.scale_rule = p.quantize_b.scale_rule = *rule;
  }
  try {
    emu::validate(p);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--policy: ") + e.what());
  }
  return p;
}

RefOperand::Scale ref_scale(const emu::BlockScheme& s) {
  return s.scale_format == emu::ScaleFormat::e8m0         ? RefOperand::Scale::e8m0
         : s.scale_format == emu::ScaleFormat::ue4m3_fp32 ? RefOperand::Scale::ue4m3
                                                          : RefOperand::Scale::fp32;
}

refs::BlockScaledRule ref_rule(BlockScaledAccumulation a) {
  return a == BlockScaledAccumulation::sm100_mxf8f6f4   ? refs::BlockScaledRule::mxf8f6f4
         : a == BlockScaledAccumulation::sm100_mxf4nvf4 ? refs::BlockScaledRule::mxf4nvf4
                                                        : refs::BlockScaledRule::hopper_fp8_blockwise;
}

// The reference on the emulator's quantized operands, their codes decoded to values.
void run_reference(const emu::ScaledOperands& q, const emu::BlockScaledGemmPolicy& p, std::span<float> out) {
  auto values = [](const emu::ScaledOperand& x) {
    std::vector<float> v;
    for (std::uint32_t c : x.codes) v.push_back(static_cast<float>(formats::to_double(x.element, c)));
    return v;
  };
  const std::vector<float> va = values(q.a), vb = values(q.b);
  const RefOperand a{q.a.element, ref_scale(p.scheme_a), q.a.rows, q.a.k, q.a.block, va, q.a.scales};
  const RefOperand b{q.b.element, ref_scale(p.scheme_b), q.b.rows, q.b.k, q.b.block, vb, q.b.scales};
  refs::block_scaled_gemm_ref(a, b, ref_rule(p.accumulation), q.alpha, out);
}

nlohmann::json block_counters_json(const emu::BlockCounters& c) {
  return {{"elements", c.elements},   {"blocks", c.blocks},         {"saturated", c.saturated},
          {"underflow_to_zero", c.underflow_to_zero}, {"subnormal", c.subnormal},
          {"scales_clamped", c.scales_clamped},       {"nonfinite_in", c.nonfinite_in},
          {"inexact", c.inexact}};
}

// The emulator's result against the FP64 product of the unquantized inputs: quantization and accumulation
// together, as information (no pass or fail: it is what the format costs, not an error of the emulator).
nlohmann::json error_against_fp64(const mpverify::ops::GemmShape& shape, std::span<const float> a,
                                  std::span<const float> b, std::span<const float> c) {
  std::vector<double> exact(shape.c_size());
  refs::gemm_ref_fp64(shape, a, b, exact);
  double diff2 = 0, norm2 = 0, max_abs = 0;
  for (std::size_t i = 0; i < exact.size(); ++i) {
    const double d = static_cast<double>(c[i]) - exact[i];
    diff2 += d * d;
    norm2 += exact[i] * exact[i];
    max_abs = std::max(max_abs, std::fabs(d));
  }
  return {{"max_abs_error", max_abs}, {"normwise_relative_error", norm2 > 0 ? std::sqrt(diff2 / norm2) : 0.0}};
}

// The SQNR of one operand's dequantized values (block_quantize.h: sqnr_db), quantized as the GEMM quantizes it.
double operand_sqnr(std::span<const float> x, int rows, int k, bool k_last, const emu::BlockScheme& scheme,
                    const emu::BlockQuantizeOptions& options) {
  const auto r = static_cast<std::size_t>(rows), kk = static_cast<std::size_t>(k);
  const std::array<std::size_t, 2> shape = k_last ? std::array{r, kk} : std::array{kk, r};
  return emu::sqnr_db(x, emu::block_quantize(x, shape, k_last ? 1 : 0, scheme, options).values);
}

// The emulator's side: the GEMM, its counters as sites, and the information beside the comparison.
void run_emulator(const mpverify::ops::GemmShape& shape, std::span<const float> a, std::span<const float> b,
                  const emu::BlockScaledGemmPolicy& policy, float alpha, std::span<float> out, OpResult& r) {
  emu::BlockScaledGemmCounters counters;
  emu::block_scaled_gemm(shape, a, b, out, policy, &counters);
  emu::block_counters_into(counters.a, r.counters.at("block-gemm.a"));
  emu::block_counters_into(counters.b, r.counters.at("block-gemm.b"));
  emu::mma_counters_into(counters.accumulate, r.counters.at("block-gemm.accumulate"));
  r.info = {{"quantization_a", block_counters_json(counters.a)},
            {"quantization_b", block_counters_json(counters.b)},
            {"sqnr_db_a",
             operand_sqnr(a, shape.m, shape.k, !shape.transpose_a, policy.scheme_a, policy.quantize_a)},
            {"sqnr_db_b",
             operand_sqnr(b, shape.n, shape.k, shape.transpose_b, policy.scheme_b, policy.quantize_b)},
            {"against_fp64_of_unquantized_inputs", error_against_fp64(shape, a, b, out)},
            {"alpha", alpha}};
  if (policy.accumulation == BlockScaledAccumulation::sm90_fp8_blockwise)
    r.info["promotions"] = {{"count", counters.promotions}, {"inexact", counters.promotions_inexact}};
}

OpResult run_block_gemm(const OpArgs& args, std::vector<Side> sides) {
  check_keys(args.shape, {"m", "n", "k", "ta", "tb"}, "--shape");
  const mpverify::ops::GemmShape shape{whole_number(args.shape, "m", "--shape"),
                                       whole_number(args.shape, "n", "--shape"),
                                       whole_number(args.shape, "k", "--shape"),
                                       whole_number(args.shape, "ta", "--shape", 0) != 0,
                                       whole_number(args.shape, "tb", "--shape", 0) != 0};
  if (shape.m == 0 || shape.n == 0 || shape.k == 0) throw UsageError("--shape: m, n and k must be at least 1");
  const emu::BlockScaledGemmPolicy policy = policy_option(args.policy);
  std::mt19937_64 rng(args.seed);
  const auto a = normal_inputs(shape.a_size(), rng, 1.0), b = normal_inputs(shape.b_size(), rng, 1.0);
  OpResult r;
  r.tensors = {{"c", formats::parse_format("fp32")}};
  size_outputs(sides, {shape.c_size()});
  const emu::ScaledOperands q =
      emu::quantize_operands(shape, a, b, policy.scheme_a, policy.scheme_b, policy.quantize_a, policy.quantize_b,
                             emu::block_scaled_k_granule(policy.accumulation), 128);
  for (Side& side : sides) {
    if (side.name == "ref") {
      run_reference(q, policy, side.out[0]);
      side.ran = true;
    } else if (side.name == "emu") {
      run_emulator(shape, a, b, policy, q.alpha, side.out[0], r);
      side.ran = true;
    } else {
      run_gpu_side(side, "no GPU kernel for the block-scaled GEMM yet (tcgen05.mma block_scale needs sm_100a; "
                         "the DeepGEMM order is not run on the GPU side)", [] {});
    }
  }
  r.sides = std::move(sides);
  r.tolerance = [](std::size_t, const std::string&, const std::string&) {
    return compare::Tolerance::bit_exact("the same block-scaled instruction chain on the same quantized operands, "
                                         "computed by the emulator and by the reference apart from it "
                                         "(refs/block_scaled_ref.cpp)");
  };
  char title[256];
  std::snprintf(title, sizeof title, "op block-gemm  m=%d n=%d k=%d%s%s  policy scheme-a=%s scheme-b=%s accumulate=%s",
                shape.m, shape.n, shape.k, shape.transpose_a ? " ta" : "", shape.transpose_b ? " tb" : "",
                policy.scheme_a.name.c_str(), policy.scheme_b.name.c_str(),
                std::string(emu::to_string(policy.accumulation)).c_str());
  r.title = title;
  r.shape = {{"m", shape.m}, {"n", shape.n}, {"k", shape.k}, {"ta", shape.transpose_a}, {"tb", shape.transpose_b}};
  r.policy = {{"scheme-a", policy.scheme_a.name}, {"scheme-b", policy.scheme_b.name},
              {"accumulate", std::string(emu::to_string(policy.accumulation))},
              {"scale-rule", std::string(emu::to_string(policy.quantize_a.scale_rule))}};
  return r;
}

}  // namespace

OpFamily block_gemm_op_family() {
  return {{"block-gemm"},
          run_block_gemm,
          "block-gemm: --shape m=,n=,k=[,ta=0|1,tb=0|1]; --policy scheme-a=S (default mxfp8-e4m3), scheme-b=S "
          "(default scheme-a's), accumulate=sm100.mxf8f6f4|sm100.mxf4nvf4|sm90.fp8-blockwise (default: the one "
          "the schemes are made for), scale-rule=floor|ceil|even|rceil (E8M0 scales; default rceil). ref and emu "
          "must agree bit for bit; info gives the error against FP64 of the unquantized inputs."};
}

}  // namespace mpverify::cli::ops
