#include "io/dtype.h"

#include <array>
#include <bit>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "formats/encoding.h"
#include "formats/format.h"

namespace mpverify::io {

namespace {

// Decoding tables built once from the formats library's exact decoder.
const std::vector<float>& table(Dtype t) {
  static const auto build = [](const char* name) {
    const formats::Format f = formats::parse_format(name);
    std::vector<float> v(std::size_t{1} << f.width());
    for (std::uint32_t b = 0; b < v.size(); ++b) v[b] = static_cast<float>(formats::to_double(f, b));
    return v;
  };
  static const std::vector<float> f16 = build("fp16");
  static const std::vector<float> e4m3 = build("fp8-e4m3");
  static const std::vector<float> e5m2 = build("fp8-e5m2");
  switch (t) {
    case Dtype::f16: return f16;
    case Dtype::f8_e4m3: return e4m3;
    case Dtype::f8_e5m2: return e5m2;
    default: throw std::logic_error("dtype: no decoding table");
  }
}

// std::byteswap is C++23; GCC 12 lacks it.
template <class U>
U swap_bytes(U u) {
  if constexpr (sizeof(U) == 2) return static_cast<U>(__builtin_bswap16(u));
  else if constexpr (sizeof(U) == 4) return __builtin_bswap32(u);
  else return __builtin_bswap64(u);
}

template <class U>
U load(const std::byte* p, bool big_endian) {
  U u;
  std::memcpy(&u, p, sizeof(U));
  if (big_endian) u = swap_bytes(u);
  return u;
}

}  // namespace

std::size_t element_size(Dtype t) {
  switch (t) {
    case Dtype::f16:
    case Dtype::bf16: return 2;
    case Dtype::f32: return 4;
    case Dtype::f64: return 8;
    case Dtype::f8_e4m3:
    case Dtype::f8_e5m2: return 1;
  }
  return 0;
}

std::string_view to_string(Dtype t) {
  switch (t) {
    case Dtype::f16: return "f16";
    case Dtype::bf16: return "bf16";
    case Dtype::f32: return "f32";
    case Dtype::f64: return "f64";
    case Dtype::f8_e4m3: return "f8_e4m3";
    case Dtype::f8_e5m2: return "f8_e5m2";
  }
  return "?";
}

void decode_floats(Dtype t, bool big_endian, const std::byte* bytes, std::span<float> out) {
  const std::size_t n = out.size();
  switch (t) {
    case Dtype::f32:
      if (!big_endian) {
        if (n > 0) std::memcpy(out.data(), bytes, n * 4);  // memcpy with a null pointer is undefined, even for 0 bytes
      } else {
        for (std::size_t i = 0; i < n; ++i) out[i] = std::bit_cast<float>(load<std::uint32_t>(bytes + 4 * i, true));
      }
      return;
    case Dtype::bf16:
      for (std::size_t i = 0; i < n; ++i)
        out[i] = std::bit_cast<float>(std::uint32_t{load<std::uint16_t>(bytes + 2 * i, big_endian)} << 16);
      return;
    case Dtype::f16: {
      const std::vector<float>& tab = table(t);
      for (std::size_t i = 0; i < n; ++i) out[i] = tab[load<std::uint16_t>(bytes + 2 * i, big_endian)];
      return;
    }
    case Dtype::f8_e4m3:
    case Dtype::f8_e5m2: {
      const std::vector<float>& tab = table(t);
      for (std::size_t i = 0; i < n; ++i) out[i] = tab[static_cast<std::uint8_t>(bytes[i])];
      return;
    }
    case Dtype::f64: throw std::invalid_argument("decode_floats: f64 values are not all floats");
  }
}

void decode_doubles(Dtype t, bool big_endian, const std::byte* bytes, std::span<double> out) {
  if (t == Dtype::f64) {
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = std::bit_cast<double>(load<std::uint64_t>(bytes + 8 * i, big_endian));
    return;
  }
  constexpr std::size_t chunk = 4096;
  std::array<float, chunk> buf;
  for (std::size_t i = 0; i < out.size(); i += chunk) {
    const std::size_t m = std::min(chunk, out.size() - i);
    decode_floats(t, big_endian, bytes + i * element_size(t), std::span<float>(buf.data(), m));
    for (std::size_t j = 0; j < m; ++j) out[i + j] = buf[j];
  }
}

}  // namespace mpverify::io
