// Internal to record/tensor_stats.cpp (and its tests): the recorder statistics of a tensor at scale 1 in
// ONE pass over its float bits: the rounding counters, the exponent histogram, the largest finite |x| and
// the norm, instead of four passes (quantize with counters, ExponentHistogram::add, the maximum, the norm).
//
// Rounding to nearest-even is monotone and symmetric in the sign, so at scale 1 what rounding x to a
// format counts is a function of |x|'s bit pattern u, and every count but one is a threshold on u:
// u rounds to +-0 up to `zero_max`, to a subnormal below `normal_min`, raises overflow from
// `overflow_min`, gives a NaN from `nan_min`, is tiny up to `tiny_max`. The exception, inexactness, is
// "some bit of u below the format's quantum in u's binade is set": a mask per float exponent field.
// The thresholds are FOUND by asking the definition (emu::quantize with counters) about single values,
// and the classifier is then checked against the definition on every exponent field and around every
// threshold; a format where any check fails is not `usable`, and tensor_stats keeps the separate passes.
// record_test holds both kernels against the separate passes on random data (TensorStatsFused.*).
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "emu/counters.h"
#include "emu/exponent_histogram.h"
#include "formats/format.h"

namespace mpverify::record::detail {

inline constexpr std::uint32_t kInfinityBits = 0x7f800000u;

struct RoundingClassifier {
  bool usable = false;
  std::uint32_t zero_max = 0;                  // largest u that rounds to +-0 (0: none)
  std::uint32_t normal_min = 0;                // smallest u whose result is neither zero nor subnormal
  std::uint32_t overflow_min = kInfinityBits;  // smallest finite u that raises overflow (infinity: none)
  std::uint32_t nan_min = kInfinityBits;       // smallest finite u whose result is a NaN (infinity: none)
  std::uint32_t tiny_max = 0;                  // largest u that is tiny: an inexact one raises underflow
  std::uint32_t finite_max = 0;                // largest u not above the format's max_finite
  // Inexact below finite_max: u & mask(field) != 0, mask(field) = the bits of u below the quantum,
  // `low_bits` in the format's normal range, `subnormal_shift` - max(field, 1) below it; 24 or more: every
  // non-zero u of the field is inexact.
  int low_bits = 0;
  int subnormal_shift = 0;
  std::array<std::uint32_t, 256> inexact_mask{};
  emu::Counters infinity, nan;  // what one infinity and one NaN count
  // The plain fields [plain_field_lo, plain_field_hi): a non-zero u there is normal in the format, finite,
  // not tiny, rounds to no overflow or NaN, and is inexact exactly when u & plain_mask != 0; the AVX2 kernel
  // counts only that (and zeros) for a vector of plain or zero values. Checked against the definition like
  // the rest; empty (0, 0) where the check fails.
  std::uint32_t plain_field_lo = 0, plain_field_hi = 0, plain_mask = 0;
};

// The classifier of `f`, built once per format and kept (thread-safe).
const RoundingClassifier& rounding_classifier(const formats::Format& f);

// The classifier's counts for one value (for the checks and the tests).
emu::Counters classify_one(const RoundingClassifier& c, float x);

struct FusedResult {
  emu::Counters counters;
  emu::ExponentHistogram histogram;
  float max_abs = 0;  // the largest finite |x|, 0 when none
  double norm = 0;    // sqrt of the sum of the finite x^2, in eight interleaved partial sums (tensor_stats.h)
};

enum class FusedKernel { portable, avx2, avx512 };
bool fused_avx512_available();
bool fused_avx2_available();
FusedKernel fastest_fused_kernel();  // what this CPU runs: avx512, else avx2, else portable
// `c` must be usable; avx512 and avx2 require fused_avx512_available() and fused_avx2_available().
FusedResult fused_pass(std::span<const float> x, const RoundingClassifier& c, FusedKernel kernel);

}  // namespace mpverify::record::detail
