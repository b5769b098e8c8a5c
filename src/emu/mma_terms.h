// The fused sum of mma_model.h opened up, for instructions whose terms are not plain products: Blackwell's
// block-scaled tcgen05.mma (mma_block_scaled.h) adds the block scales' exponents to every product's exponent
// (kind::mxf8f6f4) or makes each group of 16 exact products, times its scales, one term (kind::mxf4nvf4).
// Internal to the emulator: the instruction models are the interface (mma_model.h, mma_block_scaled.h).
#pragma once

#include <cstdint>
#include <span>

#include "emu/mma_model.h"
#include "formats/format.h"

namespace mpverify::emu::detail {

// A term: (-1)^negative * magnitude * 2^(exponent - scale), where magnitude / 2^scale is the significand;
// an operand that is NaN or infinite says so instead.
struct MmaTerm {
  bool negative = false;
  std::uint64_t magnitude = 0;
  int scale = 0;
  int exponent = 0;
  bool nan = false, infinite = false;

  bool zero() const { return !nan && !infinite && magnitude == 0; }
};

// An operand of format f (at most 24 significant bits) as a term, as MMA-Sim's extract_significand_exponent
// splits it: significand times 2^23, a subnormal keeps f's minimum normal exponent, a zero gets exponent -126.
MmaTerm mma_term(const formats::Format& f, std::uint32_t bits);

// The fused sum of finite terms (no NaN, no infinity): E = the largest exponent among all of them, zeros
// included; each term truncated toward zero to m.fraction_bits fraction bits below 2^E and counted
// (MmaCounts::terms, terms_truncated, terms_shifted_out); their exact sum rounded once to m's output.
// Exactness needs every aligned term below 2^62 / terms.size(): a term's magnitude times 2^(F - scale) when
// it is the largest (mma_model.cpp and mma_block_scaled.cpp bound theirs).
std::uint32_t mma_fused_sum(const MmaModel& m, std::span<const MmaTerm> terms, MmaCounts& counts);

// The canonical NaN of m's output (fp32 0x7FFFFFFF, fp16 0x7FFF), or its infinity of that sign.
std::uint32_t mma_nan_bits(const MmaModel& m);
std::uint32_t mma_infinity_bits(const MmaModel& m, bool negative);

// One fused dot-add of mma_model.h (d = c + sum a_i b_i, at most 256 products) with product_exponent_offset
// added to every product term's exponent (0: mma_dot_add's operation, bit for bit).
std::uint32_t mma_fused_dot_add(const MmaModel& m, std::span<const std::uint32_t> a, std::span<const std::uint32_t> b,
                                std::uint32_t c, int product_exponent_offset, MmaCounts& counts);

}  // namespace mpverify::emu::detail
