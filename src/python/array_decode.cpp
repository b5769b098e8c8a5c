#include "array_decode.h"

#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>

#include "formats/encoding.h"
#include "formats/format.h"

namespace mpverify::python {

namespace {

// An element's bytes as an unsigned integer in this machine's order.
std::uint64_t load(const std::byte* at, std::size_t itemsize, bool swapped) {
  std::uint64_t v = 0;
  switch (itemsize) {
    case 1: return std::to_integer<std::uint8_t>(*at);
    case 2: { std::uint16_t x; std::memcpy(&x, at, 2); v = swapped ? __builtin_bswap16(x) : x; break; }
    case 4: { std::uint32_t x; std::memcpy(&x, at, 4); v = swapped ? __builtin_bswap32(x) : x; break; }
    default: { std::uint64_t x; std::memcpy(&x, at, 8); v = swapped ? __builtin_bswap64(x) : x; break; }
  }
  return v;
}

// One element's value: the decoders are chosen once per array, not per element.
struct Decoder {
  ElementKind kind;
  std::size_t itemsize;
  const formats::Format* format = nullptr;  // fp16, e4m3 or e5m2 codes
  float operator()(std::uint64_t bits) const {
    if (kind == ElementKind::bfloat16_bits) return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
    if (format) return static_cast<float>(formats::to_double(*format, static_cast<std::uint32_t>(bits)));
    if (itemsize == 4) return std::bit_cast<float>(static_cast<std::uint32_t>(bits));
    return static_cast<float>(std::bit_cast<double>(bits));  // float64: rounded to nearest
  }
};

Decoder decoder_for(ElementKind kind, std::size_t itemsize) {
  static const formats::Format fp16 = formats::parse_format("fp16"), e4m3 = formats::parse_format("fp8-e4m3"),
                               e5m2 = formats::parse_format("fp8-e5m2");
  const bool fits = kind == ElementKind::ieee_float ? itemsize == 2 || itemsize == 4 || itemsize == 8
                    : kind == ElementKind::bfloat16_bits ? itemsize == 2
                                                         : itemsize == 1;
  if (!fits) throw std::invalid_argument("an item size of " + std::to_string(itemsize) + " bytes for this element type");
  Decoder d{kind, itemsize};
  if (kind == ElementKind::ieee_float && itemsize == 2) d.format = &fp16;
  if (kind == ElementKind::e4m3_bits) d.format = &e4m3;
  if (kind == ElementKind::e5m2_bits) d.format = &e5m2;
  return d;
}

// Strides of a C-ordered array without gaps: the last index steps one item, each earlier one a whole row.
bool c_contiguous(const ArrayLayout& a) {
  std::ptrdiff_t expected = static_cast<std::ptrdiff_t>(a.itemsize);
  for (std::size_t d = a.shape.size(); d-- > 0;) {
    if (a.shape[d] > 1 && a.strides[d] != expected) return false;
    expected *= static_cast<std::ptrdiff_t>(a.shape[d]);
  }
  return true;
}

}  // namespace

bool element_count(const std::vector<std::size_t>& shape, std::size_t& count) {
  count = 1;
  for (const std::size_t n : shape) {
    if (n == 0) {
      count = 0;
      return true;
    }
    if (count > std::numeric_limits<std::size_t>::max() / n) return false;
    count *= n;
  }
  return true;
}

std::vector<float> decode_array(const ArrayLayout& a, ElementKind kind) {
  const Decoder decode = decoder_for(kind, a.itemsize);
  if (a.strides.size() != a.shape.size()) throw std::invalid_argument("strides and shape of different lengths");
  std::size_t count = 0;
  if (!element_count(a.shape, count) || count > std::numeric_limits<std::ptrdiff_t>::max() / sizeof(float))
    throw std::bad_alloc();
  std::vector<float> out(count);  // std::bad_alloc when it does not fit
  if (count == 0) return out;
  if (c_contiguous(a)) {  // the common case (a float16 or bfloat16 tensor), read in one pass
    for (std::size_t k = 0; k < count; ++k) out[k] = decode(load(a.data + k * a.itemsize, a.itemsize, a.swapped));
    return out;
  }
  // An odometer over the indices, last fastest: the offset moves by one stride, and back by a whole row
  // when an index wraps.
  const std::size_t dims = a.shape.size();
  std::vector<std::size_t> index(dims, 0);
  std::ptrdiff_t offset = 0;
  for (std::size_t k = 0; k < count; ++k) {
    out[k] = decode(load(a.data + offset, a.itemsize, a.swapped));
    for (std::size_t d = dims; d-- > 0;) {
      if (++index[d] < a.shape[d]) {
        offset += a.strides[d];
        break;
      }
      index[d] = 0;
      offset -= a.strides[d] * static_cast<std::ptrdiff_t>(a.shape[d] - 1);
    }
  }
  return out;
}

}  // namespace mpverify::python
