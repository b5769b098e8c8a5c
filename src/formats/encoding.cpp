#include "formats/encoding.h"

#include <bit>

#include "formats/flags.h"

namespace mpverify::formats {

bool is_signaling_nan(const Format& f, std::uint32_t bits) {
  return f.encoding == Encoding::ieee && is_nan(f, bits) && (bits & (1u << (f.mantissa_bits - 1))) == 0;
}

std::uint32_t quiet_nan(const Format& f, std::uint32_t bits) {
  switch (f.encoding) {
    case Encoding::ieee: return bits | (1u << (f.mantissa_bits - 1));
    case Encoding::fn: return bits;  // the only NaN of its sign
    case Encoding::fnuz: return f.sign_mask();
    case Encoding::finite: return bits;  // never a NaN
  }
  return bits;
}

double to_double(const Format& f, std::uint32_t bits, Flags& flags) {
  if (!is_nan(f, bits)) return to_double(f, bits);
  if (is_signaling_nan(f, bits)) flags.raise(Flags::invalid);
  std::uint64_t out = (std::uint64_t{sign_bit(f, bits)} << 63) | (0x7ffull << 52) | (1ull << 51);
  if (f.encoding == Encoding::ieee) out |= static_cast<std::uint64_t>(detail::fraction_field(f, bits)) << (52 - f.mantissa_bits);
  return std::bit_cast<double>(out);
}

float to_float(const Format& f, std::uint32_t bits, Flags& flags) {
  if (!is_nan(f, bits)) return static_cast<float>(to_double(f, bits));  // exact: every value is a float
  if (is_signaling_nan(f, bits)) flags.raise(Flags::invalid);
  std::uint32_t out = (std::uint32_t{sign_bit(f, bits)} << 31) | (0xffu << 23) | (1u << 22);
  if (f.encoding == Encoding::ieee) out |= detail::fraction_field(f, bits) << (23 - f.mantissa_bits);
  return std::bit_cast<float>(out);
}

}  // namespace mpverify::formats
