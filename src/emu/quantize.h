// Instrumented array routines: round a float array to a format, counting
// what the rounding did (see counters.h).
//
// Paths: a portable one (the scalar emulator, element by element) and, for
// fp16 with round-to-nearest-even, SIMD paths on the x86 F16C instruction
// (AVX2 + F16C, and AVX-512) chosen at run time. All paths give bit-identical
// results and identical counts; the exhaustive tests check all 2^32 inputs.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "emu/counters.h"
#include "emu/native_rounding.h"
#include "formats/format.h"
#include "formats/rounding.h"

namespace mpverify::emu {

struct QuantizeSpec {
  formats::Format format;
  formats::Rounding rounding = formats::Rounding::nearest_even;
  formats::Tininess tininess = formats::Tininess::after_rounding;
  // Stochastic rounding: element i of the array uses
  // stochastic_draw(seed, stream, first_index + i), so a tensor split into
  // chunks (or threads, or a GPU grid) draws the same bits as a single call.
  int random_bits = 32;
  std::uint64_t seed = 0;
  std::uint64_t stream = 0;
  std::uint64_t first_index = 0;
};

enum class SimdPath { automatic, portable, avx2_f16c, avx512 };
std::string_view to_string(SimdPath p);
// The path `automatic` takes for a spec on this CPU.
SimdPath select_path(const QuantizeSpec& spec);
// Whether this CPU (and build) can run a path at all.
bool path_available(SimdPath p);

// out[i] = the value of in[i] rounded to the format, as a float (in == out is
// allowed). Counts into *counters when it is not null.
void quantize(std::span<const float> in, std::span<float> out, const QuantizeSpec& spec,
              Counters* counters = nullptr, SimdPath path = SimdPath::automatic);

// out[i] = the bit pattern of in[i] rounded to the format (formats of at most
// 16 bits).
void encode(std::span<const float> in, std::span<std::uint16_t> out, const QuantizeSpec& spec,
            Counters* counters = nullptr, SimdPath path = SimdPath::automatic);

// Helpers of the emulated ops, all round-to-nearest-even and counted:
// a copy of x rounded to the format (an op's input rounding);
std::vector<float> quantized_copy(std::span<const float> x, const formats::Format& format,
                                  Counters* counters = nullptr);
// one rounding of an exact value (NaN payloads as formats::to_float gives them);
inline float round_value(const formats::Format& format, double exact, Counters* counters = nullptr);
// and out[i] = round_value(exact[i]) (an op's output rounding).
void round_values(std::span<const double> exact, std::span<float> out, const formats::Format& format,
                  Counters* counters = nullptr);

// out[i] = fl(w[i] + u[i]) in the format, as a float, rounded once. Counts the
// rounding and swamping: u[i] != 0 (finite) but the result equals w[i].
// w should hold values of the format (quantize it first) for "lost update" to
// mean what it says.
void add_arrays(std::span<const float> w, std::span<const float> u, std::span<float> out, const QuantizeSpec& spec,
                Counters* counters = nullptr);

namespace detail {
float round_value_generic(const formats::Format& format, double exact, Counters* counters);
}

// Inline: every op's output rounding and every reduction's result pass here.
// binary32 and binary16 take the hardware's path where it is exact (native_rounding.h).
inline float round_value(const formats::Format& format, double exact, Counters* counters) {
  NativeResult r;
  if (!round_natively(native_format(format), exact, r)) return detail::round_value_generic(format, exact, counters);
  if (counters) count_native_rounding(*counters, exact, r.inexact);
  return static_cast<float>(r.value);
}

}  // namespace mpverify::emu
