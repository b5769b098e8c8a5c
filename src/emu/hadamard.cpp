// The random Hadamard transform of NVIDIA's NVFP4 recipe; what it computes and why is in hadamard.h.
#include "emu/hadamard.h"

#include <bit>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "emu/mma_presets.h"
#include "formats/arithmetic.h"
#include "formats/round_pack.h"
#include "formats/two_sum.h"

namespace mpverify::emu {

namespace {

constexpr std::size_t kN = kRhtSize;
constexpr std::size_t kLimbs = 5;

const formats::Format& fp32_format() {
  static const formats::Format f = formats::parse_format("fp32");
  return f;
}

const formats::Format& bf16_format() {
  static const formats::Format f = formats::parse_format("bf16");
  return f;
}

std::string describe(float v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", static_cast<double>(v));
  return text;
}

void check_signs(const RhtSigns& signs) {
  for (std::size_t i = 0; i < kN; ++i) {
    if (signs[i] == 1 || signs[i] == -1) continue;
    std::string message = "random Hadamard transform: every sign must be +1 or -1, but signs[";
    message += std::to_string(i);
    message += "] is ";
    message += std::to_string(signs[i]);
    throw std::invalid_argument(message);
  }
}

// The exact sum of finite floats: a 320-bit two's-complement integer in units of 2^-149, fp32's smallest
// subnormal. A float is m * 2^k units with m < 2^24 and k <= 253, so 16 of them stay below 2^281.
class ExactSum {
 public:
  void add(float x) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
    const std::uint32_t biased = (bits >> 23) & 0xffu;
    std::uint64_t m = bits & 0x7fffffu;
    if (biased != 0) m |= std::uint64_t{1} << 23;  // a normal: m * 2^(biased - 1) units
    if (m == 0) return;
    const std::uint32_t shift = biased == 0 ? 0 : biased - 1;
    std::array<std::uint64_t, kLimbs> term{};
    term[shift / 64] = m << (shift % 64);
    if (shift % 64 > 40) term[shift / 64 + 1] = m >> (64 - shift % 64);  // m has 24 bits
    if (bits >> 31) {
      subtract_limbs(term);
    } else {
      add_limbs(term);
    }
  }

  // The sum times 2^scale_exponent, rounded once to fp32 (nearest-even); an exact zero is +0.
  float rounded(int scale_exponent) const {
    const bool negative = (limbs_[kLimbs - 1] >> 63) != 0;
    std::array<std::uint64_t, kLimbs> mag = limbs_;
    if (negative) negate(mag);
    int top = static_cast<int>(kLimbs) - 1;
    while (top >= 0 && mag[static_cast<std::size_t>(top)] == 0) --top;
    if (top < 0) return 0.0f;
    const int length = top * 64 + 64 - std::countl_zero(mag[static_cast<std::size_t>(top)]);
    // magnitude: the top 53 bits (exact in double); residual: +1 when bits below them are set. round_pack
    // needs no more, since no fp32 rounding boundary lies strictly inside one double ulp (round_pack.h).
    const int low = length > 53 ? length - 53 : 0;
    const std::uint64_t top_bits = bits_from(mag, low) & ((std::uint64_t{1} << 53) - 1);
    const double magnitude = std::ldexp(static_cast<double>(top_bits), low - 149 + scale_exponent);
    const int residual = any_below(mag, low) ? 1 : 0;
    formats::Flags flags;
    const formats::RoundingContext nearest_even;
    return std::bit_cast<float>(formats::round_pack(fp32_format(), negative, magnitude, residual, nearest_even, flags));
  }

 private:
  using Limbs = std::array<std::uint64_t, kLimbs>;

  void add_limbs(const Limbs& t) {
    std::uint64_t carry = 0;
    for (std::size_t i = 0; i < kLimbs; ++i) {
      const std::uint64_t s = limbs_[i] + t[i];
      const std::uint64_t c1 = s < t[i] ? 1 : 0;
      limbs_[i] = s + carry;
      carry = c1 | (limbs_[i] < carry ? 1 : 0);
    }
  }

  void subtract_limbs(const Limbs& t) {
    std::uint64_t borrow = 0;
    for (std::size_t i = 0; i < kLimbs; ++i) {
      const std::uint64_t d = limbs_[i] - t[i];
      const std::uint64_t b1 = limbs_[i] < t[i] ? 1 : 0;
      limbs_[i] = d - borrow;
      borrow = b1 | (d < borrow ? 1 : 0);
    }
  }

  static void negate(Limbs& v) {
    std::uint64_t carry = 1;
    for (std::uint64_t& limb : v) {
      limb = ~limb + carry;
      carry = (carry != 0 && limb == 0) ? 1 : 0;
    }
  }

  // The 64 bits of v from bit `pos` up (zeros beyond the top).
  static std::uint64_t bits_from(const Limbs& v, int pos) {
    const std::size_t limb = static_cast<std::size_t>(pos) / 64;
    const int bit = pos % 64;
    std::uint64_t out = v[limb] >> bit;
    if (bit != 0 && limb + 1 < kLimbs) out |= v[limb + 1] << (64 - bit);
    return out;
  }

  static bool any_below(const Limbs& v, int pos) {
    const std::size_t limb = static_cast<std::size_t>(pos) / 64;
    for (std::size_t i = 0; i < limb; ++i)
      if (v[i] != 0) return true;
    const int bit = pos % 64;
    return bit != 0 && (v[limb] & ((std::uint64_t{1} << bit) - 1)) != 0;
  }

  Limbs limbs_{};
};

// What one call needs for every block: W (M or M^T) row-major, and for sm100_mma its columns as bf16 bits.
struct Transform {
  std::array<float, kN * kN> w{};
  std::array<std::uint32_t, kN * kN> w_columns_bf16{};  // [j * 16 + i] = bf16 bits of W[i][j]
  RhtOptions options;
  std::size_t cols = 0;
};

// sum_i v[i] W[i][j], exact, rounded once to fp32. The products +-v[i]/4 are exact in double; when no
// addition in double lost anything (TwoSum's error is 0), the double sum is the exact sum and its cast
// rounds it once; otherwise the exact integer sum decides.
float exact_dot(const std::array<float, kN>& v, const Transform& t, std::size_t j) {
  double sum = 0.0;
  bool exact = true;
  for (std::size_t i = 0; i < kN; ++i) {
    const double term = static_cast<double>(v[i]) * static_cast<double>(t.w[i * kN + j]);
    const double s = sum + term;
    if (formats::two_sum_error(sum, term, s) != 0.0) exact = false;
    sum = s;
  }
  if (!std::isfinite(sum) || exact) return static_cast<float>(sum);  // non-finite: an input was
  ExactSum acc;
  for (std::size_t i = 0; i < kN; ++i) acc.add(t.w[i * kN + j] < 0.0f ? -v[i] : v[i]);
  return acc.rounded(-2);  // every |W| is 1/4
}

std::uint32_t bf16_operand(float v, std::size_t index, std::size_t cols) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(v);
  if (std::isnan(v)) return (bits >> 16) | 0x7fc0u;
  if ((bits & 0xffffu) == 0) return bits >> 16;
  std::string message = "random_hadamard_transform: sm100_mma reads bf16 operands, as Transformer Engine's kernels ";
  message += "do, but element (";
  message += std::to_string(index / cols);
  message += ", ";
  message += std::to_string(index % cols);
  message += ") = ";
  message += describe(v);
  message += " is not a bf16 value; round the tensor to bf16 first or use RhtAccumulation::exact";
  throw std::invalid_argument(message);
}

float to_output(float value, RhtOutput output) {
  if (output == RhtOutput::fp32) return value;
  formats::Flags flags;
  const formats::RoundingContext nearest_even;
  return std::bit_cast<float>(formats::from_float(bf16_format(), value, nearest_even, flags) << 16);
}

// One block: the 16 elements at base, base + stride, ... replaced by their transform.
void transform_block(std::span<float> x, std::size_t base, std::size_t stride, const Transform& t) {
  std::array<float, kN> v{};
  for (std::size_t i = 0; i < kN; ++i) v[i] = x[base + i * stride];
  std::array<float, kN> out{};
  if (t.options.accumulation == RhtAccumulation::exact) {
    for (std::size_t j = 0; j < kN; ++j) out[j] = exact_dot(v, t, j);
  } else {
    static const MmaModel& model = mma_preset("sm100.mma.m16n8k16.f32.bf16");
    std::array<std::uint32_t, kN> a{};
    for (std::size_t i = 0; i < kN; ++i) a[i] = bf16_operand(v[i], base + i * stride, t.cols);
    for (std::size_t j = 0; j < kN; ++j) {
      const std::span<const std::uint32_t> b(t.w_columns_bf16.data() + j * kN, kN);
      out[j] = std::bit_cast<float>(mma_dot_add(model, a, b, 0u));
    }
  }
  for (std::size_t j = 0; j < kN; ++j) x[base + j * stride] = to_output(out[j], t.options.output);
}

void check_shape(std::size_t size, std::size_t rows, std::size_t cols, RhtAxis axis) {
  if (size != rows * cols) {
    std::string message = "random_hadamard_transform: the span holds ";
    message += std::to_string(size);
    message += " elements, not rows x cols = ";
    message += std::to_string(rows);
    message += " x ";
    message += std::to_string(cols);
    throw std::invalid_argument(message);
  }
  const bool within_rows = axis == RhtAxis::within_rows;
  const std::size_t length = within_rows ? cols : rows;
  if (length % kN == 0) return;
  std::string message = "random_hadamard_transform: the blocks of 16 run ";
  message += within_rows ? "within rows, along cols, but cols = " : "within columns, along rows, but rows = ";
  message += std::to_string(length);
  message += " is not a multiple of 16 (nothing is padded; Transformer Engine refuses such tensors too)";
  throw std::invalid_argument(message);
}

Transform make_transform(const RhtSigns& signs, const RhtOptions& options, std::size_t cols) {
  Transform t;
  t.options = options;
  t.cols = cols;
  const std::array<float, kN * kN> m = rht_matrix(signs);
  for (std::size_t i = 0; i < kN; ++i)
    for (std::size_t j = 0; j < kN; ++j) {
      t.w[i * kN + j] = options.inverse ? m[j * kN + i] : m[i * kN + j];
      t.w_columns_bf16[j * kN + i] = std::bit_cast<std::uint32_t>(t.w[i * kN + j]) >> 16;  // +-1/4: exact
    }
  return t;
}

}  // namespace

std::uint16_t rht_sign_mask(const RhtSigns& signs) {
  check_signs(signs);
  std::uint16_t mask = 0;
  for (std::size_t i = 0; i < kN; ++i)
    if (signs[i] == -1) mask = static_cast<std::uint16_t>(mask | (1u << i));
  return mask;
}

RhtSigns rht_signs_from_mask(std::uint16_t mask) {
  RhtSigns signs{};
  for (std::size_t i = 0; i < kN; ++i) signs[i] = ((mask >> i) & 1u) != 0 ? std::int8_t{-1} : std::int8_t{1};
  return signs;
}

std::array<float, kRhtSize * kRhtSize> rht_matrix(const RhtSigns& signs) {
  check_signs(signs);
  // Sylvester's construction, H_2n = [[H_n, H_n], [H_n, -H_n]] from H_1 = [1], as Transformer Engine's
  // reference builds it (pytorch/custom_recipes/reference_nvfp4.py:405-413); then row i times signs[i] / 4.
  std::array<int, kN * kN> h{};
  h[0] = 1;
  for (std::size_t n = 1; n < kN; n *= 2)
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        const int e = h[i * kN + j];
        h[i * kN + j + n] = e;
        h[(i + n) * kN + j] = e;
        h[(i + n) * kN + j + n] = -e;
      }
  std::array<float, kN * kN> m{};
  for (std::size_t i = 0; i < kN; ++i)
    for (std::size_t j = 0; j < kN; ++j) m[i * kN + j] = 0.25f * static_cast<float>(signs[i] * h[i * kN + j]);
  return m;
}

void random_hadamard_transform(std::span<float> x, std::size_t rows, std::size_t cols, RhtAxis axis,
                               const RhtSigns& signs, const RhtOptions& options) {
  check_shape(x.size(), rows, cols, axis);
  const Transform t = make_transform(signs, options, cols);
  if (axis == RhtAxis::within_rows) {
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c0 = 0; c0 < cols; c0 += kN) transform_block(x, r * cols + c0, 1, t);
  } else {
    for (std::size_t r0 = 0; r0 < rows; r0 += kN)
      for (std::size_t c = 0; c < cols; ++c) transform_block(x, r0 * cols + c, cols, t);
  }
}

}  // namespace mpverify::emu
