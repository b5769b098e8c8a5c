// Block quantization: a float32 tensor stored as low-precision elements that
// share one scale per block (OCP MX, NVFP4, DeepSeek-V3's block-wise FP8).
//
// The tensor is viewed as a matrix: `cols` runs along the quantization axis
// (the reduction dimension of the GEMM that will read it) and `rows` is the
// product of every other dimension, in order. A block is `block_rows` x
// `block_cols` elements of that view (1 x 32 for MX; 16 x 16 tiles need a
// 2-D tensor). Blocks at the edges may be partial; their amax is taken over
// the elements present.
//
// Each element is stored as round(x / X) in the element format, saturating
// to +-max, where X is its block's scale (times the tensor scale for NVFP4);
// its dequantized value is code * X, rounded once to float32 (exact for E8M0
// scales unless the product overflows float32: +-max * 2^127 is +-inf). The quotient x / X is the exact one, rounded once (for E8M0 scales
// it is exact in double; otherwise the division's remainder decides, as
// formats::div does). So are the scales below: each is its defining formula
// rounded once. The upstream kernels work in fp32 and can differ where an fp32
// intermediate lands next to a rounding boundary: DeepSeek-V3 divides x / s in
// fp32 before its E4M3 cast; Transformer Engine's NVFP4 takes the block scale
// as fl32(block_amax * fl32(S_enc * fl32(1/6))), S_enc = fl32(2688 / tensor_amax),
// and each element as fl32(x * fl32(1 / fl32(s_block * fl32(1 / S_enc)))). (For
// E8M0 scales the arithmetic is exact and the two agree; rceil below is
// computed in fp32 exactly as Transformer Engine does.)
//
// Non-finite inputs: the amax ignores NaN (fmaxf, as Transformer Engine); an
// infinite element is stored as +-max (the SATFINITE cast); a NaN element is
// stored as the element format's NaN keeping its sign (fp8-e4m3 S.1111.111,
// fp8-e5m2 a quiet NaN with its payload; Transformer Engine's casts write the
// canonical 0x7F instead), and in FP4/FP6, which have no NaN, as +max
// (formats::from_float's stand-in, raising invalid). torchao's to_mx
// instead gives a block holding a NaN (its amax is NaN) or an infinity the
// NaN scale 0xff.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "emu/counters.h"
#include "formats/format.h"
#include "formats/rounding.h"

namespace mpverify::emu {

// How a power-of-two (E8M0) scale is chosen from a block's amax, named as
// torchao's ScaleCalculationMode names them. emax_elem is the exponent of
// the element format's largest normal, max_elem its largest value.
// A block whose amax is 0 gets 2^-127 and one whose amax is infinite 2^127,
// whatever the rule (Transformer Engine's float_to_e8m0).
enum class ScaleRule {
  floor,  // 2^(floor(log2 amax) - emax_elem)          OCP MX v1.0; can clip
  ceil,   // 2^(ceil(log2 amax) - emax_elem)           never clips
  even,   // amax's significand rounded to the element's precision (ties up, torchao's
          // add-and-mask), then floor; can clip
  rceil,  // 2^ceil(log2(amax / max_elem))             Transformer Engine, cuBLAS; clips for one
          // amax per element format only (computed as they do it: fp32 amax * fl32(1/max_elem), rounded up to a power of
          // two; over every float this equals the formula but for one amax per element
          // format, the float just above max_elem * 2^-127, whose product rounds to 2^-127:
          // it gets 2^-127 and clips, where the formula gives 2^-126)
};
inline constexpr ScaleRule kDefaultScaleRule = ScaleRule::rceil;
std::string_view to_string(ScaleRule rule);
std::optional<ScaleRule> parse_scale_rule(std::string_view name);

enum class ScaleFormat {
  e8m0,         // power of two, chosen by a ScaleRule (MX)
  ue4m3_fp32,   // UE4M3 block scale times one fp32 tensor scale (NVFP4; 6 = max_elem of E2M1):
                //   s_tensor = fl32(tensor_amax / (448 * 6)), 1 when tensor_amax is 0 or infinite
                //   (Transformer Engine's global encode scale is 1 then);
                //   s_block  = RNE_ue4m3((block_amax / 6) / s_tensor), saturating at 448; a block
                //   whose quotient rounds to 0 keeps scale 0 and its non-zero elements +-max
                //   (Transformer Engine multiplies by fminf(1/0, FLT_MAX): the same +-max above
                //   about 1.5e-38, smaller codes below; torchao's nvfp4_quantize clamps every block
                //   scale below E4M3's smallest normal, 2^-6, up to it before its cast)
  fp32,         // fl32(max(amax, amax_floor) / max_elem) (block-wise and per-tensor FP8); an amax
                // that is 0 (with no floor) or infinite gives scale 1, as Transformer Engine's
                // compute_scale_from_amax does
};

struct BlockScheme {
  std::string name;  // as on the command line: "mxfp8-e4m3", "nvfp4", ...
  formats::Format element;
  ScaleFormat scale_format;
  std::size_t block_rows;  // 0 = the whole tensor (fp8-tensor)
  std::size_t block_cols;  // 0 = the whole tensor (fp8-tensor)
  // fp32 scales only: the amax is raised to at least this before the scale is computed.
  // fp8-tile1x128 uses DeepSeek-V3's 1e-4f (inference/kernel.py act_quant, `tl.maximum(amax,
  // 1e-4)` since commit adecc0e, Aug 2025): every block with amax < 1e-4 gets the scale
  // 1e-4/448. fp8-block128x128 and fp8-tensor use 0 (weight_quant of DeepSeek-V3's
  // pull request #809, not merged, and Transformer Engine's amax_epsilon = 0; DeepGEMM
  // floors both tile shapes at 1e-4).
  float amax_floor = 0;
};

// mxfp8-e4m3, mxfp8-e5m2, mxfp6-e2m3, mxfp6-e3m2, mxfp4, nvfp4,
// fp8-tile1x128, fp8-block128x128, fp8-tensor.
std::span<const BlockScheme> block_schemes();
const BlockScheme* find_block_scheme(std::string_view name);

struct BlockQuantizeOptions {
  ScaleRule scale_rule = kDefaultScaleRule;  // e8m0 scales only
  // nearest_even or stochastic (any other mode is refused); stochastic draws
  // element i (row-major index into the tensor) as formats::stochastic_draw(seed, stream, i)
  // with 32 random bits, so the same seed gives the same bits however the work is split.
  formats::Rounding rounding = formats::Rounding::nearest_even;
  std::uint64_t seed = 0;
  std::uint64_t stream = 0;
};

// What quantizing a tensor did. Each event has one definition, here.
struct BlockCounters {
  std::uint64_t elements = 0;
  std::uint64_t blocks = 0;
  std::uint64_t nonfinite_in = 0;       // NaN or +-inf inputs
  std::uint64_t saturated = 0;          // finite |x| > max_elem * X: stored as +-max
                                        // (X = 0, an NVFP4 block scale that rounded to 0: every
                                        // non-zero element)
  std::uint64_t underflow_to_zero = 0;  // finite x != 0 stored as +-0
  std::uint64_t subnormal = 0;          // stored as a non-zero subnormal of the element format
  std::uint64_t scales_clamped = 0;     // the scale rule's choice lay outside the scale format's range:
                                        // e8m0: the exponent outside [-127, 127]; ue4m3: the rounding
                                        // overflowed (quotient > 464) or gave 0; fp32: gave 0. Only blocks
                                        // with a finite non-zero amax count.
  std::uint64_t inexact = 0;            // finite x that code * X does not equal exactly (clipped ones included)

  BlockCounters& operator+=(const BlockCounters& other);
  friend bool operator==(const BlockCounters&, const BlockCounters&) = default;
};

// A quantization's counts as a counter site's (counters.h): elements, inexact, nonfinite_in,
// underflow_to_zero, subnormal, and the saturated elements as overflow ("to inf, NaN or saturated").
void block_counters_into(const BlockCounters& from, Counters& to);

struct BlockQuantized {
  std::vector<float> values;         // dequantized, the input's shape
  std::vector<std::uint8_t> codes;   // element bit patterns, the input's shape
  std::vector<float> scales;         // each block's scale value (NVFP4: the UE4M3 block scale alone)
  std::vector<std::size_t> scale_shape;  // the block grid: the input's shape with the axis (and, for
                                         // tiles, the other dimension) divided by the block, rounded up
                                         // (fp8-tensor: every dimension 1)
  std::optional<float> tensor_scale;     // NVFP4 only
  BlockCounters counters;
};

// Thrown for a shape, axis or tile the scheme cannot take; what() says which.
class BlockShapeError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Quantizes `x` (row-major, `shape`) in blocks along dimension `axis`
// (negative counts from the end). Throws BlockShapeError when the shape does
// not hold x.size() elements, the axis is out of range, or a tile
// (block_rows > 1) meets a tensor that is not 2-D; std::invalid_argument for
// an element format wider than 8 bits or a rounding mode other than the two above.
BlockQuantized block_quantize(std::span<const float> x, std::span<const std::size_t> shape, int axis,
                              const BlockScheme& scheme, const BlockQuantizeOptions& options = {});

// The E8M0 scale exponent a rule picks for a block amax (finite, > 0, else
// std::invalid_argument), before clamping to [-127, 127]; element is the
// element format.
int e8m0_scale_exponent(float amax, const formats::Format& element, ScaleRule rule);

// Signal-to-quantization-noise ratio in dB of `values` against `reference`
// over the elements where both are finite: 10 log10(sum x^2 / sum (x - v)^2);
// +inf when they are equal, NaN when no element counts. Sums in double.
double sqnr_db(std::span<const float> reference, std::span<const float> values);

}  // namespace mpverify::emu
