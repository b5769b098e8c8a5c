#include "emu/quantize.h"
#include "formats/fp_environment.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "emu/accumulate.h"
#include "emu/quantize_simd.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "formats/philox.h"

namespace mpverify::emu {

using formats::Flags;
using formats::Format;
using formats::RoundingContext;

namespace {

bool is_fp16(const Format& f) {
  static const Format fp16 = formats::parse_format("fp16");
  return formats::same_encoding(f, fp16);
}

bool simd_eligible(const QuantizeSpec& s) {
  return is_fp16(s.format) && s.rounding == formats::Rounding::nearest_even &&
         s.tininess == formats::Tininess::after_rounding;
}

// The portable path: the scalar emulator, one element at a time. `store`
// receives (index, result bits).
template <bool Count, typename Store>
void round_portable(std::span<const float> in, const QuantizeSpec& spec, Counters* counters, Store store) {
  RoundingContext rc{spec.rounding, spec.tininess, spec.random_bits, 0};
  const bool stochastic = spec.rounding == formats::Rounding::stochastic;
  Counters local;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (stochastic) rc.random = formats::stochastic_draw(spec.seed, spec.stream, spec.first_index + i);
    Flags flags;
    const float x = in[i];  // read before the store: in and out may be the same array
    const std::uint32_t bits = formats::from_float(spec.format, x, rc, flags);
    store(i, bits);
    if constexpr (Count) count_rounding(local, spec.format, static_cast<double>(x), bits, flags);
  }
  if constexpr (Count) *counters += local;
}

void check_sizes(std::size_t in, std::size_t out, const char* what) {
  if (in != out)
    throw std::invalid_argument(std::string(what) + ": input has " + std::to_string(in) + " elements, output " +
                                std::to_string(out));
}

// IEEE binary32 itself (the fp32 output format of policies); its overflow
// policy does not matter, since no result of a float input overflows.
bool is_binary32(const Format& f) {
  return f.exponent_bits == 8 && f.mantissa_bits == 23 && f.bias == 127 && f.subnormals &&
         f.encoding == formats::Encoding::ieee;
}

// float -> binary32 is exact: every result is its input, in every rounding
// mode, with no flag, so the counts are count_rounding's for an exact result.
// NaNs take the scalar path (a signalling NaN is quieted and raises invalid).
// The automatic path for fp32; `portable` is its twin (a test compares them).
template <bool Count>
void keep_binary32(std::span<const float> in, std::span<float> out, const QuantizeSpec& spec, Counters* counters) {
  Counters local;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const float x = in[i];
    if (std::isnan(x)) {
      QuantizeSpec one = spec;
      one.first_index += i;
      round_portable<Count>(in.subspan(i, 1), one, &local, [&](std::size_t, std::uint32_t bits) {
        Flags ignored;
        out[i] = formats::to_float(spec.format, bits, ignored);
      });
      continue;
    }
    out[i] = x;
    if constexpr (Count) {
      local.elements += 1;
      local.zeros_in += x == 0;
      local.nonfinite_in += std::isinf(x);
      local.subnormal += x != 0 && std::fabs(x) < std::numeric_limits<float>::min();
    }
  }
  if constexpr (Count) *counters += local;
}

// Runs the SIMD prefix when the path allows, then the portable tail.
template <typename Store>
void run(std::span<const float> in, const QuantizeSpec& spec, Counters* counters, SimdPath path, float* out_float,
         std::uint16_t* out_bits, Store store) {
  if (path == SimdPath::automatic) path = select_path(spec);
  if (path != SimdPath::portable && (!simd_eligible(spec) || !path_available(path)))
    throw std::invalid_argument("quantize: path " + std::string(to_string(path)) +
                                " cannot run this format/rounding on this CPU");
  std::size_t done = 0;
  if (path == SimdPath::avx512) done = detail::fp16_rne_avx512(in.data(), in.size(), out_float, out_bits, counters);
  if (path == SimdPath::avx2_f16c) done = detail::fp16_rne_avx2(in.data(), in.size(), out_float, out_bits, counters);
  const auto tail = in.subspan(done);
  auto shifted = [&](std::size_t i, std::uint32_t bits) { store(done + i, bits); };
  QuantizeSpec tail_spec = spec;
  tail_spec.first_index += done;
  if (counters) round_portable<true>(tail, tail_spec, counters, shifted);
  else round_portable<false>(tail, tail_spec, counters, shifted);
}

}  // namespace

std::string_view to_string(SimdPath p) {
  switch (p) {
    case SimdPath::automatic: return "automatic";
    case SimdPath::portable: return "portable";
    case SimdPath::avx2_f16c: return "avx2-f16c";
    case SimdPath::avx512: return "avx512";
  }
  return "?";
}

bool path_available(SimdPath p) {
  switch (p) {
    case SimdPath::automatic:
    case SimdPath::portable: return true;
    case SimdPath::avx2_f16c: return detail::cpu_has_avx2_f16c();
    case SimdPath::avx512: return detail::cpu_has_avx512();
  }
  return false;
}

SimdPath select_path(const QuantizeSpec& spec) {
  if (!simd_eligible(spec)) return SimdPath::portable;
  if (detail::cpu_has_avx512()) return SimdPath::avx512;
  if (detail::cpu_has_avx2_f16c()) return SimdPath::avx2_f16c;
  return SimdPath::portable;
}

void quantize(std::span<const float> in, std::span<float> out, const QuantizeSpec& spec, Counters* counters,
              SimdPath path) {
  check_sizes(in.size(), out.size(), "quantize");
  formats::check_fp_environment("emu::quantize");
  const Format& f = spec.format;
  if (path == SimdPath::automatic && is_binary32(f)) {
    if (counters) keep_binary32<true>(in, out, spec, counters);
    else keep_binary32<false>(in, out, spec, counters);
    return;
  }
  run(in, spec, counters, path, out.data(), nullptr, [&](std::size_t i, std::uint32_t bits) {
    Flags ignored;  // a quiet NaN result raises nothing when widened
    out[i] = formats::to_float(f, bits, ignored);
  });
}

void encode(std::span<const float> in, std::span<std::uint16_t> out, const QuantizeSpec& spec, Counters* counters,
            SimdPath path) {
  check_sizes(in.size(), out.size(), "encode");
  formats::check_fp_environment("emu::encode");
  if (spec.format.width() > 16)
    throw std::invalid_argument("encode: format " + spec.format.name + " is wider than 16 bits");
  run(in, spec, counters, path, nullptr, out.data(),
      [&](std::size_t i, std::uint32_t bits) { out[i] = static_cast<std::uint16_t>(bits); });
}

std::vector<float> quantized_copy(std::span<const float> x, const formats::Format& format, Counters* counters) {
  std::vector<float> out(x.size());
  quantize(x, out, QuantizeSpec{format}, counters);
  return out;
}

float detail::round_value_generic(const formats::Format& format, double exact, Counters* counters) {
  Flags flags;
  const std::uint32_t bits = formats::from_double(format, exact, {}, flags);
  if (counters) count_rounding(*counters, format, exact, bits, flags);
  return formats::to_float(format, bits, flags);
}

void round_values(std::span<const double> exact, std::span<float> out, const formats::Format& format,
                  Counters* counters) {
  check_sizes(exact.size(), out.size(), "round_values");
  formats::check_fp_environment("emu::round_values");
  Counters local;
  Counters* count = counters ? &local : nullptr;
  std::vector<double> values(exact.begin(), exact.end());
  const std::size_t done = detail::round_lanes_avx512(format, native_format(format), values.data(), values.size(), count);
  for (std::size_t i = 0; i < done; ++i) out[i] = static_cast<float>(values[i]);
  for (std::size_t i = done; i < exact.size(); ++i) out[i] = round_value(format, exact[i], count);
  if (counters) *counters += local;
}

}  // namespace mpverify::emu
