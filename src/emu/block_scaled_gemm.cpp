// The block-scaled GEMM of block_scaled_gemm.h: every output element a chain of the model's instructions
// along K (mma_block_scaled.h for Blackwell, mma_model.h's wgmma for Hopper) and, for sm90, DeepGEMM's
// promotion per block of 128. BlockScaledScalar below computes an element so and is the definition;
// block_scaled_multiply runs the fast path (block_scaled_fast.cpp), which hands it the elements it cannot hold.
#include "emu/block_scaled_gemm.h"
#include "formats/fp_environment.h"

#include <bit>
#include <stdexcept>
#include <string>

#include "emu/block_scaled_fast.h"
#include "emu/mma_block_scaled.h"
#include "emu/mma_presets.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"

namespace mpverify::emu {

namespace {

constexpr std::uint32_t kCanonicalNan = 0x7FFFFFFFu;

std::span<const std::uint32_t> codes(const ScaledOperand& x, std::size_t row, std::size_t p, std::size_t len) {
  return std::span<const std::uint32_t>(x.codes).subspan(row * x.k + p, len);
}

std::span<const float> scales(const ScaledOperand& x, std::size_t row, std::size_t p, std::size_t len) {
  const std::size_t per_row = x.k / x.block;
  return std::span<const float>(x.scales).subspan(row * per_row + p / x.block, (len + x.block - 1) / x.block);
}

BlockScaledInstruction instruction_for(const ScaledOperand& a, const ScaledOperand& b, BlockScaledAccumulation model) {
  if (model == BlockScaledAccumulation::sm100_mxf8f6f4) return mxf8f6f4_instruction(a.element, b.element);
  // mxf4nvf4: the scale format follows from the block (quantize_operands keeps E8M0 per 32, UE4M3 per 16) unless
  // an E8M0 scheme of 16 is ever named; both operands must agree.
  if (a.block != b.block) throw std::invalid_argument("sm100.mxf4nvf4: A and B need the same scale block");
  return mxf4nvf4_instruction(formats::parse_format(a.block == 16 ? "ue4m3" : "e8m0"), static_cast<int>(a.block));
}

bool is_mx(const BlockScheme& s) { return s.scale_format == ScaleFormat::e8m0 && s.block_cols == 32; }

bool is_fp4(const BlockScheme& s) { return s.element.name == "fp4-e2m1"; }

}  // namespace

std::string_view to_string(BlockScaledAccumulation a) {
  switch (a) {
    case BlockScaledAccumulation::sm100_mxf8f6f4: return "sm100.mxf8f6f4";
    case BlockScaledAccumulation::sm100_mxf4nvf4: return "sm100.mxf4nvf4";
    case BlockScaledAccumulation::sm90_fp8_blockwise: return "sm90.fp8-blockwise";
  }
  return "?";
}

std::optional<BlockScaledAccumulation> parse_block_scaled_accumulation(std::string_view name) {
  for (auto a : {BlockScaledAccumulation::sm100_mxf8f6f4, BlockScaledAccumulation::sm100_mxf4nvf4,
                 BlockScaledAccumulation::sm90_fp8_blockwise})
    if (to_string(a) == name) return a;
  return std::nullopt;
}

std::size_t block_scaled_k_granule(BlockScaledAccumulation a) {
  switch (a) {
    case BlockScaledAccumulation::sm100_mxf8f6f4: return 32;
    case BlockScaledAccumulation::sm100_mxf4nvf4: return 64;
    case BlockScaledAccumulation::sm90_fp8_blockwise: return 128;
  }
  return 128;
}

void validate(const BlockScaledGemmPolicy& p) {
  const std::string model(to_string(p.accumulation));
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument(model + " cannot take schemes " + p.scheme_a.name + " x " + p.scheme_b.name + ": " +
                                why);
  };
  const BlockScheme &a = p.scheme_a, &b = p.scheme_b;
  switch (p.accumulation) {
    case BlockScaledAccumulation::sm100_mxf8f6f4:
      if (!is_mx(a) || !is_mx(b)) fail("it takes E8M0 scales per 32 elements (mxfp8-e4m3, mxfp8-e5m2, mxfp6-e2m3, "
                                       "mxfp6-e3m2, mxfp4), in any pairing");
      return;
    case BlockScaledAccumulation::sm100_mxf4nvf4: {
      const bool nv = a.scale_format == ScaleFormat::ue4m3_fp32 && b.scale_format == ScaleFormat::ue4m3_fp32 &&
                      a.block_cols == 16 && b.block_cols == 16;
      if (!is_fp4(a) || !is_fp4(b) || !((is_mx(a) && is_mx(b)) || nv))
        fail("it takes FP4 elements, both mxfp4 (E8M0 per 32) or both nvfp4 (UE4M3 per 16)");
      return;
    }
    case BlockScaledAccumulation::sm90_fp8_blockwise:
      for (const BlockScheme* s : {&a, &b})
        if (s->scale_format != ScaleFormat::fp32 || s->element.name != "fp8-e4m3" ||
            (s->block_cols != 128 && s->block_cols != 0))
          fail("it takes E4M3 elements with fp32 scales per 128 elements of K or per tensor (fp8-tile1x128, "
               "fp8-block128x128, fp8-tensor)");
      return;
  }
}

BlockScaledGemmCounters& BlockScaledGemmCounters::operator+=(const BlockScaledGemmCounters& o) {
  a += o.a;
  b += o.b;
  stats_a += o.stats_a;
  stats_b += o.stats_b;
  accumulate += o.accumulate;
  promotions += o.promotions;
  promotions_inexact += o.promotions_inexact;
  return *this;
}

namespace detail {

// d = fl32(alpha * d) to nearest-even (the GEMM epilogue), NaN canonical.
std::uint32_t block_scaled_epilogue(float alpha, std::uint32_t d) {
  if (alpha == 1.0f) return d;
  formats::Flags flags;
  const std::uint32_t r = formats::mul(formats::fp32(), std::bit_cast<std::uint32_t>(alpha), d, {}, flags);
  return formats::is_nan(formats::fp32(), r) ? kCanonicalNan : r;
}

// DeepGEMM's promotion of one block's chain: s = fl32(scale_a * scale_b), then final = fma(s, partial, final).
std::uint32_t deepgemm_promote(std::uint32_t final_accum, std::uint32_t partial, float scale_a, float scale_b,
                               BlockScaledGemmCounters& n) {
  formats::Flags flags;
  const std::uint32_t s = formats::mul(formats::fp32(), std::bit_cast<std::uint32_t>(scale_a),
                                       std::bit_cast<std::uint32_t>(scale_b), {}, flags);
  formats::Flags fma_flags;
  const std::uint32_t r = formats::fma(formats::fp32(), s, partial, final_accum, {}, fma_flags);
  ++n.promotions;
  n.promotions_inexact += fma_flags.has(formats::Flags::inexact);
  return formats::is_nan(formats::fp32(), r) ? kCanonicalNan : r;
}

BlockScaledScalar::BlockScaledScalar(const ScaledOperand& a, const ScaledOperand& b, float alpha,
                                     BlockScaledAccumulation model)
    : a_(a), b_(b), alpha_(alpha), model_(model) {
  if (model != BlockScaledAccumulation::sm90_fp8_blockwise) {
    in_ = instruction_for(a, b, model);
    return;
  }
  wgmma_ = &mma_preset("sm90.wgmma.k32.f32.e4m3");
  for (const ScaledOperand* x : {&a, &b})
    if (!formats::same_values(x->element, wgmma_->a) || x->k % 128 != 0)
      throw std::invalid_argument("sm90.fp8-blockwise: E4M3 elements, K padded to a multiple of 128");
}

// Blackwell: the model's instructions chained along K from c = +0, then the epilogue. Hopper: per block of
// 128, four wgmma chained from zero (mma_dot), promoted into final from +0.
std::uint32_t BlockScaledScalar::element(std::size_t i, std::size_t j, BlockScaledGemmCounters& n) const {
  const ScaledOperand &a = a_, &b = b_;
  if (model_ == BlockScaledAccumulation::sm90_fp8_blockwise) {
    std::uint32_t final_accum = 0;
    for (std::size_t p = 0; p < a.k; p += 128) {
      const std::uint32_t partial = mma_dot(*wgmma_, codes(a, i, p, 128), codes(b, j, p, 128), 0, 0, &n.accumulate);
      final_accum = deepgemm_promote(final_accum, partial, scales(a, i, p, 128)[0], scales(b, j, p, 128)[0], n);
    }
    return final_accum;
  }
  const auto k = static_cast<std::size_t>(in_.model.k);
  std::uint32_t d = 0;
  for (std::size_t p = 0; p < a.k; p += k)
    d = block_scaled_dot_add(in_, codes(a, i, p, k), codes(b, j, p, k), scales(a, i, p, k), scales(b, j, p, k), d,
                             &n.accumulate);
  return block_scaled_epilogue(alpha_, d);
}

std::size_t block_scaled_multiply_path(const ScaledOperand& a, const ScaledOperand& b, float alpha,
                                       BlockScaledAccumulation model, std::span<float> c, BlockScaledGemmCounters& n,
                                       bool fast) {
  const std::size_t granule = block_scaled_k_granule(model);
  if (a.k != b.k || a.k % granule != 0 || a.k % a.block != 0 || b.k % b.block != 0 ||
      a.codes.size() != a.rows * a.k || b.codes.size() != b.rows * b.k ||
      a.scales.size() != a.rows * (a.k / a.block) || b.scales.size() != b.rows * (b.k / b.block) ||
      c.size() != a.rows * b.rows)
    throw std::invalid_argument("block_scaled_multiply: operands of equal K, a multiple of " +
                                std::to_string(granule) + " and of their blocks, with rows x K codes, rows x K / "
                                "block scales, and C of a.rows x b.rows");
  const BlockScaledScalar scalar(a, b, alpha, model);
  if (fast) return block_scaled_multiply_fast(scalar, c, n);
  for (std::size_t i = 0; i < a.rows; ++i)
    for (std::size_t j = 0; j < b.rows; ++j) c[i * b.rows + j] = std::bit_cast<float>(scalar.element(i, j, n));
  return 0;
}

}  // namespace detail

void block_scaled_multiply(const ScaledOperand& a, const ScaledOperand& b, float alpha, BlockScaledAccumulation model,
                           std::span<float> c, BlockScaledGemmCounters* counters) {
  BlockScaledGemmCounters local;
  detail::block_scaled_multiply_path(a, b, alpha, model, c, counters ? *counters : local, true);
}

void block_scaled_gemm(const ops::GemmShape& shape, std::span<const float> a, std::span<const float> b,
                       std::span<float> c, const BlockScaledGemmPolicy& policy, BlockScaledGemmCounters* counters) {
  formats::check_fp_environment("emu::block_scaled_gemm");
  validate(policy);
  shape.check(a.size(), b.size(), c.size());
  const ScaledOperands q = quantize_operands(shape, a, b, policy.scheme_a, policy.scheme_b, policy.quantize_a,
                                             policy.quantize_b, block_scaled_k_granule(policy.accumulation), 128);
  BlockScaledGemmCounters local;
  BlockScaledGemmCounters& n = counters ? *counters : local;
  n.a += q.counters_a;
  n.b += q.counters_b;
  n.stats_a += q.stats_a;
  n.stats_b += q.stats_b;
  block_scaled_multiply(q.a, q.b, q.alpha, policy.accumulation, c, &n);
}

}  // namespace mpverify::emu
