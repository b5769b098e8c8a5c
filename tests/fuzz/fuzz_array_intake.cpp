// The Python module's array intake (src/python/array_decode.h): any element type, item size, byte order,
// shape and strides numpy can describe, over the bytes that follow. Input: byte 0 the element kind (mod 4),
// byte 1 the item size (mod 4: 1, 2, 4, 8), byte 2 bit 0 swapped, byte 3 the number of dimensions (mod 5),
// then per dimension a length (mod 8) and a stride (a signed byte); the rest is the buffer. A layout whose
// elements would fall outside the buffer is skipped (numpy never describes one). Beyond the documented
// refusal (std::invalid_argument for an item size the kind lacks), a finding is a value that differs from an
// independent decode written here: the element's offset from its index by division, its bytes assembled by
// shifts, and each format's value by its definition with ldexp (NaN matching any NaN).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <vector>

#include "python/array_decode.h"

namespace {

using mpverify::python::ArrayLayout;
using mpverify::python::ElementKind;

// The element's bytes as an integer: little-endian on this machine (x86, Arm Linux), so "swapped" is big.
std::uint64_t assemble(const std::uint8_t* at, std::size_t itemsize, bool big_endian) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < itemsize; ++i) {
    const std::size_t shift = 8 * (big_endian ? itemsize - 1 - i : i);
    v |= static_cast<std::uint64_t>(at[i]) << shift;
  }
  return v;
}

// sign, exponent and fraction fields by definition: IEEE-like when `ieee_specials`, else E4M3 (no
// infinities, the all-ones code NaN).
double from_fields(std::uint64_t bits, int exponent_bits, int fraction_bits, bool ieee_specials) {
  const int bias = (1 << (exponent_bits - 1)) - 1;
  const bool negative = (bits >> (exponent_bits + fraction_bits)) & 1;
  const auto exponent = static_cast<int>((bits >> fraction_bits) & ((1u << exponent_bits) - 1));
  const std::uint64_t fraction = bits & ((std::uint64_t{1} << fraction_bits) - 1);
  const int all_ones = (1 << exponent_bits) - 1;
  double v;
  if (ieee_specials && exponent == all_ones) v = fraction == 0 ? INFINITY : NAN;
  else if (!ieee_specials && exponent == all_ones && fraction == (std::uint64_t{1} << fraction_bits) - 1) v = NAN;
  else if (exponent == 0) v = std::ldexp(static_cast<double>(fraction), 1 - bias - fraction_bits);
  else v = std::ldexp(static_cast<double>(fraction + (std::uint64_t{1} << fraction_bits)), exponent - bias - fraction_bits);
  return negative ? -v : v;
}

float expected_value(std::uint64_t bits, ElementKind kind, std::size_t itemsize) {
  switch (kind) {
    case ElementKind::bfloat16_bits: {
      const auto b = static_cast<std::uint32_t>(bits) << 16;
      float f;
      std::memcpy(&f, &b, 4);
      return f;
    }
    case ElementKind::e4m3_bits: return static_cast<float>(from_fields(bits, 4, 3, false));
    case ElementKind::e5m2_bits: return static_cast<float>(from_fields(bits, 5, 2, true));
    case ElementKind::ieee_float: break;
  }
  if (itemsize == 2) return static_cast<float>(from_fields(bits, 5, 10, true));
  if (itemsize == 4) {
    const auto b = static_cast<std::uint32_t>(bits);
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  }
  double d;
  std::memcpy(&d, &bits, 8);
  return static_cast<float>(d);
}

bool same(float got, float want) {
  if (std::isnan(want)) return std::isnan(got);
  return std::memcmp(&got, &want, sizeof got) == 0;  // bit for bit: -0 is not +0
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  const auto kind = static_cast<ElementKind>(data[0] % 4);
  const std::size_t itemsize = std::size_t{1} << (data[1] % 4);
  const bool swapped = (data[2] & 1) != 0;
  const std::size_t dims = data[3] % 5;
  if (size < 4 + 2 * dims) return 0;
  ArrayLayout a;
  a.itemsize = itemsize;
  a.swapped = swapped;
  std::ptrdiff_t lowest = 0, highest = 0;  // the byte range the elements cover, from the first element
  std::size_t count = 1;
  for (std::size_t d = 0; d < dims; ++d) {
    const std::size_t n = data[4 + 2 * d] % 8;
    const std::ptrdiff_t stride = static_cast<std::int8_t>(data[5 + 2 * d]);
    a.shape.push_back(n);
    a.strides.push_back(stride);
    count *= n;
    if (n > 0) (stride < 0 ? lowest : highest) += stride * static_cast<std::ptrdiff_t>(n - 1);
  }
  const std::uint8_t* buffer = data + 4 + 2 * dims;
  const std::size_t length = size - 4 - 2 * dims;
  // The first element sits where the most negative stride reaches the buffer's start.
  if (count > 0 && static_cast<std::size_t>(highest - lowest) + itemsize > length) return 0;
  a.data = reinterpret_cast<const std::byte*>(buffer - lowest);

  std::vector<float> got;
  try {
    got = mpverify::python::decode_array(a, kind);
  } catch (const std::invalid_argument&) {
    return 0;  // an item size the kind does not have
  }
  if (got.size() != count) {
    std::cerr << "fuzz_array_intake: " << got.size() << " values for " << count << " elements\n";
    std::abort();
  }
  for (std::size_t k = 0; k < count; ++k) {
    // Element k's offset: its C-order index by division, each index times its stride.
    std::ptrdiff_t offset = -lowest;
    std::size_t rest = k;
    for (std::size_t d = dims; d-- > 0;) {
      offset += static_cast<std::ptrdiff_t>(rest % a.shape[d]) * a.strides[d];
      rest /= a.shape[d];
    }
    const float want = expected_value(assemble(buffer + offset, itemsize, swapped), kind, itemsize);
    if (!same(got[k], want)) {
      std::cerr << "fuzz_array_intake: element " << k << " is " << got[k] << ", expected " << want << "\n";
      std::abort();
    }
  }
  return 0;
}
