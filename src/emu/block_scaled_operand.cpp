// Quantizing and laying out the operands of a block-scaled GEMM (block_scaled_operand.h).
#include "emu/block_scaled_operand.h"

#include <array>
#include <cmath>
#include <limits>

namespace mpverify::emu {

namespace {

// The scale the scheme gives a block of zeros: the scale of a wholly padded block.
float zero_block_scale(const BlockScheme& scheme, const BlockQuantizeOptions& options) {
  BlockScheme single = scheme;
  single.block_rows = single.block_cols = 1;
  const std::array<float, 1> zero{0.0f};
  const std::array<std::size_t, 1> shape{1};
  BlockQuantizeOptions nearest = options;
  nearest.rounding = formats::Rounding::nearest_even;
  return block_quantize(zero, shape, 0, single, nearest).scales[0];
}

// Where one operand lies as stored: `rows` vectors along K, either K contiguous (k_last) or rows contiguous.
struct Stored {
  std::size_t rows, k;
  bool k_last;
  std::size_t index(std::size_t r, std::size_t p) const { return k_last ? r * k + p : p * rows + r; }
};

// The scale of stored element (r, p) in the block grid of `q` (block_quantize.h: scale_shape), with the block
// along K `bc` and across it `br` (1 for runs); a whole-tensor scheme has one scale.
float scale_at(const BlockQuantized& q, const BlockScheme& s, const Stored& st, std::size_t r, std::size_t p) {
  if (s.block_rows == 0 && s.block_cols == 0) return q.scales[0];
  const std::size_t kb = p / s.block_cols, rb = r / s.block_rows;
  return st.k_last ? q.scales[rb * q.scale_shape[1] + kb] : q.scales[kb * q.scale_shape[1] + rb];
}

ScaledOperand lay_out(const BlockQuantized& q, const BlockScheme& scheme, const BlockQuantizeOptions& options,
                      const Stored& st, std::size_t k_padded, std::size_t whole_block) {
  ScaledOperand out;
  out.element = scheme.element;
  out.rows = st.rows;
  out.k = k_padded;
  out.block = scheme.block_cols == 0 ? whole_block : scheme.block_cols;
  const std::size_t blocks = k_padded / out.block;
  out.codes.assign(st.rows * k_padded, 0u);  // zero elements in the padding (code 0 is +0 in every format)
  // A block wholly in the padding: a block of zeros, or for a whole-tensor scale that one scale (quantizing the
  // zero-padded tensor gives it to the padding too).
  const bool whole = scheme.block_rows == 0 && scheme.block_cols == 0;
  out.scales.assign(st.rows * blocks, whole ? q.scales[0] : zero_block_scale(scheme, options));
  for (std::size_t r = 0; r < st.rows; ++r) {
    for (std::size_t p = 0; p < st.k; ++p) out.codes[r * k_padded + p] = q.codes[st.index(r, p)];
    for (std::size_t kb = 0; kb * out.block < st.k; ++kb)
      out.scales[r * blocks + kb] = scale_at(q, scheme, st, r, kb * out.block);
  }
  return out;
}

ScaledOperand quantize_one(std::span<const float> x, const Stored& st, const BlockScheme& scheme,
                           const BlockQuantizeOptions& options, std::size_t k_padded, std::size_t whole_block,
                           BlockCounters& counters, BlockStats& stats) {
  const std::array<std::size_t, 2> shape =
      st.k_last ? std::array<std::size_t, 2>{st.rows, st.k} : std::array<std::size_t, 2>{st.k, st.rows};
  const BlockQuantized q = block_quantize(x, shape, st.k_last ? 1 : 0, scheme, options);
  counters = q.counters;
  stats = block_stats(x, q);
  return lay_out(q, scheme, options, st, k_padded, whole_block);
}

float amax(std::span<const float> x) {  // NaN ignored, as block_quantize's tensor amax (fmaxf)
  float m = 0;
  for (float v : x) {
    const float a = std::fabs(v);
    m = a > m ? a : m;
  }
  return m;
}

}  // namespace

ScaledOperands quantize_operands(const ops::GemmShape& shape, std::span<const float> a, std::span<const float> b,
                                 const BlockScheme& scheme_a, const BlockScheme& scheme_b,
                                 const BlockQuantizeOptions& options_a, const BlockQuantizeOptions& options_b,
                                 std::size_t k_granule, std::size_t whole_block) {
  shape.check(a.size(), b.size(), shape.c_size());
  const auto m = static_cast<std::size_t>(shape.m), n = static_cast<std::size_t>(shape.n),
             k = static_cast<std::size_t>(shape.k);
  const std::size_t k_padded = (k + k_granule - 1) / k_granule * k_granule;
  ScaledOperands out;
  out.a = quantize_one(a, {m, k, !shape.transpose_a}, scheme_a, options_a, k_padded, whole_block, out.counters_a,
                       out.stats_a);
  out.b = quantize_one(b, {n, k, shape.transpose_b}, scheme_b, options_b, k_padded, whole_block, out.counters_b,
                       out.stats_b);
  if (scheme_a.scale_format == ScaleFormat::ue4m3_fp32 && scheme_b.scale_format == ScaleFormat::ue4m3_fp32)
    out.alpha = nvfp4_gemm_alpha(a, b);
  return out;
}

float nvfp4_gemm_alpha(std::span<const float> a, std::span<const float> b) {
  const float factor_inv = static_cast<float>(1.0 / (6.0 * 6.0 * 448.0 * 448.0));  // TE's constexpr float
  float alpha = 1.0f;
  alpha = alpha * amax(a);  // -ffp-contract=off: each product rounded to float, left to right as in the kernel
  alpha = alpha * amax(b);
  return alpha * factor_inv;
}

}  // namespace mpverify::emu
