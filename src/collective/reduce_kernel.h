// The two steps every reduction order is made of, on blocks of floats: an
// input rounded to the format, and an accumulator plus an addend rounded
// once to the format (acc = fl(acc + u)), both counted (emu/counters.h).
//
// Two paths give the same bits and the same counts:
//  - generic: emu::quantize and emu::add_arrays, the emulator's own routines;
//  - fast: for round-to-nearest-even into a format whose normal range lies in
//    float's and whose precision is at most 22 bits (bf16, fp16, fp8, ...) or
//    that is binary32 itself. The exact sum a + b of two format values is
//    rounded to odd in float from float's sum and TwoSum's error term, then
//    to nearest-even at the format's last bit on the bits; rounding to odd
//    to q >= p + 2 bits then to nearest at p bits is one correct rounding
//    (Boldo and Melquiond 2008, as emu/native_rounding.h uses it). Only
//    results that are exact zeros or normal numbers strictly above the
//    smallest normal and at most the largest finite value are taken; every
//    other element (subnormal or tiny results, overflow, NaN, infinities)
//    goes through the generic routine, one element at a time, so counts and
//    bits never depend on the path (allreduce_test holds the two together).
#pragma once

#include <cstdint>
#include <span>

#include "emu/counters.h"
#include "emu/quantize.h"

namespace mpverify::collective {

enum class KernelPath { automatic, generic };

// The float-bit constants of the fast path (see above).
struct FastFormat {
  bool native32 = false;           // the format is IEEE binary32: float's sum is the result
  int shift = 0;                   // 23 - mantissa_bits: the format's last bit in a float
  std::uint32_t half_minus_one = 0;
  std::uint32_t keep = 0;          // clears the bits below the format's last bit
  std::uint32_t min_normal_bits = 0;
  std::uint32_t max_finite_bits = 0;
  bool negative_zero = true;       // -0 is a value of the format
};

class Rounder {
 public:
  explicit Rounder(const emu::QuantizeSpec& spec, KernelPath path = KernelPath::automatic);

  const emu::QuantizeSpec& spec() const { return spec_; }
  bool fast() const { return fast_; }

  // out[i] = in[i] rounded to the format (in == out allowed). Stochastic
  // rounding draws (seed, stream, first_index + i).
  void quantize(std::span<const float> in, std::span<float> out, std::uint64_t stream, std::uint64_t first_index,
                emu::Counters& counters) const;
  // acc[i] = fl(acc[i] + u[i]): w = acc[i] is the partial sum that u[i]
  // updates (lost_update.h), u holds values of the format.
  void add(std::span<float> acc, std::span<const float> u, std::uint64_t stream, std::uint64_t first_index,
           emu::Counters& counters) const;
  // One rounding of an exact double (or its round-to-odd stand-in; see
  // allreduce.cpp) to the format, counted; any rounding mode.
  float round_exact(double value, std::uint64_t stream, std::uint64_t index, emu::Counters& counters) const;

 private:
  emu::QuantizeSpec spec_;
  FastFormat format_;
  bool fast_ = false;
};

// Whether the fast path can take the spec, and its constants.
bool fast_format(const emu::QuantizeSpec& spec, FastFormat& out);

}  // namespace mpverify::collective
