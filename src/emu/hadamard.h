// The random Hadamard transform (RHT) of NVIDIA's NVFP4 training recipe (arXiv 2509.25149, Transformer
// Engine's NVFP4BlockScaling), applied to a float32 tensor before it is quantized to NVFP4.
//
// What Transformer Engine does (read at NVIDIA/TransformerEngine d0067d0da6cb01811b8072a7d304f0e00344ce2b):
//  - Which tensors: the recipe sets random_hadamard_transform for the inputs (x) and the output gradients
//    (dy), not for the weights (transformer_engine/common/recipe/__init__.py:593-609), and the quantizer
//    applies it to the column-wise copy only, the operand of the weight-gradient GEMM dw = dy^T x; the
//    row-wise copy (fprop, dgrad) is quantized untransformed (pytorch/csrc/quantizer.cpp:2446-2463 and
//    2492-2504; the reference pytorch/custom_recipes/reference_nvfp4.py:867-874: row_input = tensor,
//    col_input = _apply_rht(tensor.t())). For a (tokens x features) tensor the blocks are 16 consecutive
//    tokens of one feature: 16 consecutive elements along the wgrad GEMM's K.
//  - The matrix: M = diag(s) H16 / 4, H16 the Sylvester Hadamard matrix (H[i][j] = (-1)^popcount(i & j)),
//    the signs on its rows (pytorch/tensor/nvfp4_tensor.py:94-103 get_rht_matrix: sign_matrix @ H, then
//    cast to bf16, exact since every entry is +-1/4); each block of 16, as a row vector v, becomes v M
//    (reference_nvfp4.py:443-446 x_mat @ transform; the kernels' B fragment holds the same M,
//    common/hadamard_transform/hadamard_transform_utils.cuh:146-161 with kInverse false).
//  - The signs: one fixed vector for every layer, every step and both operands (nvfp4_tensor.py:49-59
//    get_wgrad_sign_vector, "Hard-coded random signs"; the same in jax/quantize/hadamard.py:8-10), passed to
//    the kernels as a 16-bit mask, bit i set where s[i] = -1 (nvfp4_tensor.py:37-46). M M^T = I, so
//    (dy^T B)(x^T B)^T = dy^T x for B = blockdiag(M, M, ...): the GEMM is unchanged in exact arithmetic.
//  - The arithmetic: input must be bf16 (quantizer.cpp:2630-2634); M in bf16; one tensor-core instruction
//    per output element, wmma m16n16k16 with fp32 accumulation from zero (hadamard_transform_utils.cuh:89-109;
//    the fused Blackwell kernel uses tcgen05 SM100_MMA_F16BF16_SS, row_cast_col_hadamard_transform_cast_
//    fusion.cu:1083), the fp32 result rounded to nearest-even bf16 (cvt.rn.bf16x2.f32, utils.cuh:106-109;
//    the fused kernel does the same "for bit-wise compatibility with unfused kernels" unless
//    NVTE_USE_FAST_MATH is set, row_cast_col_hadamard_transform_cast_fusion.cu:774-784, quantizer.cpp:2686-2690).
//  - The amax that sets the column-wise copy's per-tensor scale is taken after the transform, over the
//    bf16-rounded transformed values (with_post_rht_amax, pytorch/quantization.py:1734-1735; quantizer.cpp:
//    2635-2650 refuses pre-RHT amax; hadamard_transform.cu:51-67 and hadamard_transform_utils.cuh:110-121
//    reduce the cvt.rn.bf16 results); the row-wise copy keeps the input's own amax (quantizer.cpp:2636-2638).
//  - Shapes: TE refuses a tensor whose row count or row length is not a multiple of 16
//    (hadamard_transform.cu:525-529); it does not pad.
//
// What this file computes. Each output element is sum_i v[i] W[i][j] over one block of 16 (W = M, or M^T
// for the inverse), every product +-v[i]/4 exact, then:
//  - RhtAccumulation::exact: the exact sum of the 16 products rounded once to fp32 (nearest-even); any
//    float input. For bf16 inputs whose non-zero elements of a block span at most 12 binades (exponents
//    within 12 of each other) this is what TE's tensor core gives: the exact sum then fits in fp32 (8
//    significant bits, 12 binades of spread, 4 bits of carry for 16 terms: 24 bits), as the project's model
//    of the instruction (mma_model.h) computes it. Beyond that the two can differ: the tensor core
//    truncates each product to 25 fraction bits of the largest one (before any cancellation, so by many
//    ulps of a result that cancels) and rounds the sum toward zero (one fp32 ulp); after the bf16 rounding
//    they differ only where the two fp32 values lie on different sides of a bf16 rounding boundary.
//  - RhtAccumulation::sm100_mma: the project's model of that instruction, mma_preset
//    "sm100.mma.m16n8k16.f32.bf16" (the same model as tcgen05 k16: F = 25, fp32 toward zero), from c = +0.
//    Its operands must be bf16 values, as TE requires; no GPU has yet checked the Blackwell model.
//  - RhtOutput::bf16 (TE's default) rounds that fp32 value to nearest-even bf16 (returned as float);
//    RhtOutput::fp32 keeps it (TE's fused kernel under NVTE_USE_FAST_MATH=1).
// Non-finite inputs: exact gives IEEE addition's result (an infinity, or NaN for +inf with -inf or a NaN);
// sm100_mma the model's (canonical NaN 0x7FFFFFFF). TE's cvt.rn.bf16 of a NaN gives 0x7FFF; here a NaN
// stays a NaN of some payload.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace mpverify::emu {

inline constexpr std::size_t kRhtSize = 16;

// The diagonal of the sign matrix: each entry +1 or -1.
using RhtSigns = std::array<std::int8_t, kRhtSize>;

// Transformer Engine's fixed signs, used for every RHT of the recipe
// (pytorch/tensor/nvfp4_tensor.py:49-59 get_wgrad_sign_vector; its mask is 0xD7E8).
inline constexpr RhtSigns kTeWgradSigns{1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1};
// No sign flips: TE's with_random_sign_mask=False (nvfp4_tensor.py:32-34, mask 0).
inline constexpr RhtSigns kRhtNoSigns{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

// TE's 16-bit mask: bit i set where signs[i] == -1 (nvfp4_tensor.py:37-46 get_sign_from_vector).
// Throws std::invalid_argument when an entry is neither +1 nor -1.
std::uint16_t rht_sign_mask(const RhtSigns& signs);
RhtSigns rht_signs_from_mask(std::uint16_t mask);

// M = diag(signs) H16 / 4, row-major: M[i * 16 + j] = signs[i] * (-1)^popcount(i & j) / 4.
// Orthogonal: M M^T = M^T M = I exactly. Throws as rht_sign_mask does.
std::array<float, kRhtSize * kRhtSize> rht_matrix(const RhtSigns& signs);

// Where the 16-element blocks run in a row-major rows x cols tensor.
enum class RhtAxis : std::uint8_t {
  within_rows,     // 16 consecutive elements of a row (along cols): a tensor already laid out as
                   // TE's column-wise copy, (features x tokens)
  within_columns,  // 16 consecutive elements of a column (along rows): a (tokens x features) tensor
                   // transformed in its own layout, as TE transforms its transpose
};

enum class RhtAccumulation : std::uint8_t { exact, sm100_mma };  // see the header comment
enum class RhtOutput : std::uint8_t { bf16, fp32 };

struct RhtOptions {
  RhtAccumulation accumulation = RhtAccumulation::exact;
  RhtOutput output = RhtOutput::bf16;  // TE's default
  bool inverse = false;  // multiply by M^T = H16 diag(signs) / 4 instead (TE's kInverseHadamard fragments,
                         // hadamard_transform_utils.cuh:156-158; the recipe never uses it)
};

// Replaces each block v (16 elements along `axis`) of x, a row-major rows x cols tensor, by v M (v M^T with
// options.inverse), computed as the header comment says. Throws std::invalid_argument when x.size() is
// not rows * cols, when the length along the axis (cols for within_rows, rows for within_columns) is not a
// multiple of 16 (no padding: TE refuses such tensors too), when a sign is neither +1 nor -1, and, for
// sm100_mma, when an element is not a bf16 value.
void random_hadamard_transform(std::span<float> x, std::size_t rows, std::size_t cols, RhtAxis axis,
                               const RhtSigns& signs = kTeWgradSigns, const RhtOptions& options = {});

}  // namespace mpverify::emu
