#include "collective/reduce_kernel.h"

#include <array>
#include <bit>
#include <cfloat>
#include <stdexcept>
#include <string>

#include "emu/native_rounding.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "formats/philox.h"

namespace mpverify::collective {

namespace {

// Elements per pass of the fast loops: their flags live on the stack.
constexpr std::size_t kPass = 1024;

// What the fast loops count, for the elements they took (the others are
// counted by the generic routine). 32-bit lanes keep the loops vectorizable.
struct PassCounts {
  std::uint32_t taken = 0, zeros = 0, inexact = 0, updates = 0, swamped = 0;
  void add_to(emu::Counters& c) const {
    c.elements += taken;
    c.zeros_in += zeros;
    c.inexact += inexact;
    c.addends_nonzero += updates;
    c.swamped += swamped;
  }
};

inline std::uint32_t bits_of(float x) { return std::bit_cast<std::uint32_t>(x); }

// The loops below are branch-free (bits and 0/1 integers, no && or ?:) so
// that the compiler vectorizes them.
inline std::uint32_t flag(bool b) { return static_cast<std::uint32_t>(b); }
inline std::uint32_t select(std::uint32_t mask, std::uint32_t yes, std::uint32_t no) { return no ^ ((yes ^ no) & mask); }

// RNE of a magnitude's float bits at the format's last bit (exact: the
// magnitude is the value itself or its round-to-odd stand-in).
inline std::uint32_t round_bits(const FastFormat& f, std::uint32_t magnitude) {
  return (magnitude + f.half_minus_one + ((magnitude >> f.shift) & 1u)) & f.keep;
}

// 1 for a rounded magnitude the fast path may keep: normal, strictly above
// the smallest normal, at most the largest finite value.
inline std::uint32_t in_normal_range(const FastFormat& f, std::uint32_t rounded) {
  return flag(rounded > f.min_normal_bits) & flag(rounded <= f.max_finite_bits);
}

// 1 for a zero the format has: +0 always, -0 where the format has negative zero.
inline std::uint32_t zero_kept(const FastFormat& f, std::uint32_t bits, std::uint32_t magnitude) {
  return flag(magnitude == 0) & (flag(f.negative_zero) | flag((bits >> 31) == 0));
}

// One pass of fast rounding; ok[i] = 0 marks the elements left to the generic routine.
template <bool Native32>
void quantize_pass(const FastFormat& f, const float* in, float* out, std::uint8_t* ok, std::size_t n, PassCounts& k) {
  std::uint32_t taken = 0, zeros = 0, inexact = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t b = bits_of(in[i]);
    const std::uint32_t magnitude = b & 0x7fffffffu;
    const std::uint32_t rounded = Native32 ? magnitude : round_bits(f, magnitude);
    const std::uint32_t zero = zero_kept(f, b, magnitude);
    const std::uint32_t take = in_normal_range(f, rounded) | zero;
    ok[i] = static_cast<std::uint8_t>(take);
    out[i] = std::bit_cast<float>(select(0u - take, rounded | (b & 0x80000000u), b));
    taken += take;
    zeros += take & zero;
    inexact += take & flag(rounded != magnitude);
  }
  k.taken += taken;
  k.zeros += zeros;
  k.inexact += inexact;
}

// One pass of fast addition acc = fl(acc + u).
template <bool Native32>
void add_pass(const FastFormat& f, float* acc, const float* u, std::uint8_t* ok, std::size_t n, PassCounts& k) {
  std::uint32_t taken = 0, zeros = 0, inexact = 0, updates = 0, swamped = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float a = acc[i], b = u[i];
    const float s = a + b;
    const float bv = s - a;  // TwoSum (Knuth): s + e == a + b exactly when s is finite
    const float e = (a - (s - bv)) + (b - bv);
    const std::uint32_t sb = bits_of(s);
    const std::uint32_t magnitude = sb & 0x7fffffffu;
    const std::uint32_t inexact_sum = flag(e != 0);
    // s rounded away from zero when e has the other sign: the odd value lies one step nearer zero.
    const std::uint32_t away = ((bits_of(e) ^ sb) >> 31) & inexact_sum;
    const std::uint32_t odd = select(0u - inexact_sum, (magnitude - away) | 1u, magnitude);
    const std::uint32_t rounded = Native32 ? magnitude : round_bits(f, odd);
    const std::uint32_t zero = zero_kept(f, sb, magnitude);  // s == 0 means the exact sum is 0
    const std::uint32_t take = in_normal_range(f, rounded) | zero;
    const std::uint32_t result = rounded | (sb & 0x80000000u);
    ok[i] = static_cast<std::uint8_t>(take);
    acc[i] = std::bit_cast<float>(select(0u - take, result, bits_of(a)));
    const std::uint32_t update = take & flag(b != 0);  // both finite here (is_update)
    taken += take;
    zeros += take & zero;
    inexact += take & (inexact_sum | flag(rounded != odd));
    updates += update;
    swamped += update & flag(a != 0) & flag(std::bit_cast<float>(result) == a);  // is_lost_update
  }
  k.taken += taken;
  k.zeros += zeros;
  k.inexact += inexact;
  k.updates += updates;
  k.swamped += swamped;
}

emu::QuantizeSpec at(const emu::QuantizeSpec& spec, std::uint64_t stream, std::uint64_t first_index) {
  emu::QuantizeSpec s = spec;
  s.stream = stream;
  s.first_index = first_index;
  return s;
}

}  // namespace

bool fast_format(const emu::QuantizeSpec& spec, FastFormat& out) {
  const formats::Format& f = spec.format;
  if (spec.rounding != formats::Rounding::nearest_even || !f.is_signed || !f.has_zero) return false;
  if (f.max_finite() > FLT_MAX || f.min_normal() < FLT_MIN) return false;
  FastFormat ff;
  ff.native32 = emu::native_format(f) == emu::NativeFormat::binary32;
  if (!ff.native32 && f.mantissa_bits > 21) return false;  // round-to-odd in float needs 24 >= p + 2
  ff.shift = 23 - f.mantissa_bits;
  ff.half_minus_one = ff.shift == 0 ? 0 : (1u << (ff.shift - 1)) - 1;
  ff.keep = ~((1u << ff.shift) - 1);
  ff.min_normal_bits = bits_of(static_cast<float>(f.min_normal()));
  ff.max_finite_bits = bits_of(static_cast<float>(f.max_finite()));
  ff.negative_zero = f.has_negative_zero();
  out = ff;
  return true;
}

Rounder::Rounder(const emu::QuantizeSpec& spec, KernelPath path) : spec_(spec) {
  spec_.format.validate();
  fast_ = path == KernelPath::automatic && fast_format(spec_, format_);
}

void Rounder::quantize(std::span<const float> in, std::span<float> out, std::uint64_t stream,
                       std::uint64_t first_index, emu::Counters& counters) const {
  if (in.size() != out.size()) throw std::invalid_argument("Rounder::quantize: sizes differ");
  if (!fast_) {
    emu::quantize(in, out, at(spec_, stream, first_index), &counters);
    return;
  }
  std::array<std::uint8_t, kPass> ok;
  for (std::size_t from = 0; from < in.size(); from += kPass) {
    const std::size_t n = std::min(kPass, in.size() - from);
    PassCounts k;
    if (format_.native32) quantize_pass<true>(format_, in.data() + from, out.data() + from, ok.data(), n, k);
    else quantize_pass<false>(format_, in.data() + from, out.data() + from, ok.data(), n, k);
    k.add_to(counters);
    if (k.taken == n) continue;
    // The rest through the generic routine in one call: the fast path is
    // round-to-nearest only, whose result does not depend on the element's index.
    std::array<float, kPass> rest;
    std::array<std::uint32_t, kPass> at_index;
    std::size_t m = 0;
    for (std::uint32_t i = 0; i < n; ++i)
      if (!ok[i]) {
        at_index[m] = i;
        rest[m++] = in[from + i];
      }
    const std::span<float> r(rest.data(), m);
    emu::quantize(r, r, at(spec_, stream, first_index), &counters);
    for (std::size_t j = 0; j < m; ++j) out[from + at_index[j]] = rest[j];
  }
}

void Rounder::add(std::span<float> acc, std::span<const float> u, std::uint64_t stream, std::uint64_t first_index,
                  emu::Counters& counters) const {
  if (acc.size() != u.size()) throw std::invalid_argument("Rounder::add: sizes differ");
  if (!fast_) {
    emu::add_arrays(acc, u, acc, at(spec_, stream, first_index), &counters);
    return;
  }
  std::array<std::uint8_t, kPass> ok;
  for (std::size_t from = 0; from < acc.size(); from += kPass) {
    const std::size_t n = std::min(kPass, acc.size() - from);
    PassCounts k;
    if (format_.native32) add_pass<true>(format_, acc.data() + from, u.data() + from, ok.data(), n, k);
    else add_pass<false>(format_, acc.data() + from, u.data() + from, ok.data(), n, k);
    k.add_to(counters);
    if (k.taken == n) continue;
    std::array<float, kPass> w, v;  // the rest, as in quantize
    std::array<std::uint32_t, kPass> at_index;
    std::size_t m = 0;
    for (std::uint32_t i = 0; i < n; ++i)
      if (!ok[i]) {
        at_index[m] = i;
        w[m] = acc[from + i];
        v[m++] = u[from + i];
      }
    const std::span<float> ws(w.data(), m);
    emu::add_arrays(ws, std::span<const float>(v.data(), m), ws, at(spec_, stream, first_index), &counters);
    for (std::size_t j = 0; j < m; ++j) acc[from + at_index[j]] = w[j];
  }
}

float Rounder::round_exact(double value, std::uint64_t stream, std::uint64_t index, emu::Counters& counters) const {
  formats::RoundingContext rc{spec_.rounding, spec_.tininess, spec_.random_bits, 0};
  if (spec_.rounding == formats::Rounding::stochastic) rc.random = formats::stochastic_draw(spec_.seed, stream, index);
  formats::Flags flags;
  const std::uint32_t bits = formats::from_double(spec_.format, value, rc, flags);
  emu::count_rounding(counters, spec_.format, value, bits, flags);
  return formats::to_float(spec_.format, bits, flags);
}

}  // namespace mpverify::collective
