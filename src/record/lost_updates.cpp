#include "record/lost_updates.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "emu/counters.h"
#include "emu/lost_update.h"
#include "emu/quantize.h"
#include "record/lost_updates_avx2.h"
#include "record/tensor_stats_fused.h"

namespace mpverify::record {

void applied_update(std::span<const float> before, std::span<const float> after, std::span<float> u) {
  if (before.size() != after.size() || u.size() != before.size())
    throw std::invalid_argument("applied_update: before has " + std::to_string(before.size()) + " elements, after " +
                                std::to_string(after.size()) + ", the update " + std::to_string(u.size()));
  for (std::size_t i = 0; i < u.size(); ++i)
    u[i] = static_cast<float>(static_cast<double>(after[i]) - static_cast<double>(before[i]));
}

std::vector<float> applied_update(std::span<const float> before, std::span<const float> after) {
  std::vector<float> u(before.size());
  applied_update(before, after, u);
  return u;
}

void add_counts(LostUpdateCounts& into, const LostUpdateCounts& part) {
  into.precision = part.precision;
  into.elements += part.elements;
  into.updates += part.updates;
  into.lost += part.lost;
  into.ratio_needed += part.ratio_needed;
  into.ratio_sufficient += part.ratio_sufficient;
  set_rates(into);
}

void set_rates(LostUpdateCounts& c) {
  if (c.updates == 0) return;
  const double n = static_cast<double>(c.updates);
  c.lost_rate = static_cast<double>(c.lost) / n;
  c.ratio_needed_rate = static_cast<double>(c.ratio_needed) / n;
  c.ratio_sufficient_rate = static_cast<double>(c.ratio_sufficient) / n;
}

namespace {

// The formats whose lost updates are decided by spacing (below): IEEE encoding and overflow, gradual
// underflow, a fraction bit, and every value a float.
struct SpacingRule {
  int precision = 0, emin = 0, emax = 0;
};

std::optional<SpacingRule> spacing_rule(const formats::Format& f) {
  using formats::Encoding, formats::Overflow;
  if (f.encoding != Encoding::ieee || f.overflow != Overflow::ieee || !f.subnormals || !f.is_signed || !f.has_zero ||
      f.mantissa_bits < 1 || f.precision() > 24 || f.emin() < -126 || f.emax() > 127)
    return std::nullopt;
  return SpacingRule{f.precision(), f.emin(), f.emax()};
}

// Whether fl(w + u) == w under round-to-nearest-even, decided without adding: for w != 0 a value of the
// format and u != 0 finite, w + u rounds back to w exactly when |u| is below half the gap g from w to its
// neighbour on u's side, or equal to it with w's last significand bit even (a tie goes to the even one of
// two neighbours, and neighbours' encodings are consecutive integers). g is w's ulp 2^q,
// q = max(e, emin) - p + 1, halved when u points toward zero from a binade's first value above the
// smallest normal (the binade below is twice as dense). At the largest finite value, the neighbour on the
// far side is 2^(emax+1), which IEEE rounding overflows to: the same rule.
// All on the float bit patterns, without a data-dependent branch (a loop of these runs at a few
// nanoseconds per element). `*not_a_value` is set when w is not a value of the format (the caller then
// adds instead).
bool swamped_by_spacing(std::uint32_t w_bits, std::uint32_t u_bits, const SpacingRule& r, bool* not_a_value) {
  const std::uint32_t w_abs = w_bits & 0x7fffffffu, u_abs = u_bits & 0x7fffffffu;
  const std::int32_t field = static_cast<std::int32_t>(w_abs >> 23);
  const bool float_normal = field != 0;
  const std::int32_t e = float_normal ? field - 127 : -127;  // below every emin of a rule: the format's subnormals
  const std::uint32_t significand = float_normal ? (w_abs & 0x7fffffu) | 0x800000u : w_abs;  // w = sig 2^(e-23)
  const std::int32_t q = std::max(e, r.emin) - r.precision + 1;
  const std::int32_t shift = q - (float_normal ? e - 23 : -149);  // w / 2^q = significand >> shift when exact
  const std::uint32_t clamped = static_cast<std::uint32_t>(std::min(shift, 31));
  *not_a_value = e > r.emax || shift > 24 || (significand & ((1u << clamped) - 1u)) != 0;
  const bool even = ((significand >> clamped) & 1u) == 0;
  const bool toward_zero = (w_bits ^ u_bits) >> 31 != 0;
  const bool binade_first = significand == 0x800000u && e > r.emin;
  const std::int32_t h = (toward_zero && binade_first) ? q - 2 : q - 1;  // half the gap is 2^h
  // 2^h as a float pattern (|u| orders as its pattern); below float's smallest subnormal 2^-149 it is 0,
  // which every u != 0 exceeds, as it exceeds 2^h.
  const std::uint32_t half_gap = h >= -126 ? static_cast<std::uint32_t>(h + 127) << 23
                                 : h >= -149 ? 1u << static_cast<std::uint32_t>(h + 149)
                                             : 0u;
  return u_abs < half_gap || (u_abs == half_gap && even);
}

// The lost updates by adding: every w + u rounded once (emu::add_arrays, which counts them).
void count_by_adding(std::span<const float> w, std::span<const float> u, const formats::Format& format,
                     LostUpdateCounts& r) {
  emu::Counters c;
  std::vector<float> sum(w.size());
  emu::add_arrays(w, u, sum, emu::QuantizeSpec{format}, &c);
  r.updates = c.addends_nonzero;
  r.lost = c.swamped;
}

// The same counts by spacing; false (counts untouched) when some w is not a value of the format. `simd`:
// whole vectors of 8 through the AVX2 kernel where the CPU has it (the same counts), the rest here.
bool count_by_spacing(std::span<const float> w, std::span<const float> u, const SpacingRule& rule,
                      LostUpdateCounts& r, bool simd) {
  std::uint64_t updates = 0, lost = 0;
  bool any_not_a_value = false;
  std::size_t i = 0;
  if (simd && detail::fused_avx2_available()) {
    const detail::SpacingCounts k = detail::spacing_avx2(w.data(), u.data(), w.size(), rule.precision, rule.emin,
                                                         rule.emax);
    updates = k.updates;
    lost = k.lost;
    any_not_a_value = k.not_a_value != 0;
    i = k.done;
  }
  for (; i < w.size(); ++i) {
    const auto wb = std::bit_cast<std::uint32_t>(w[i]), ub = std::bit_cast<std::uint32_t>(u[i]);
    // emu::is_update on the patterns: u != 0, w and u finite (exponent field not all ones).
    const bool update = (ub & 0x7fffffffu) != 0 && (wb & 0x7f800000u) != 0x7f800000u &&
                        (ub & 0x7f800000u) != 0x7f800000u;
    const bool counted = update && (wb & 0x7fffffffu) != 0;  // a lost update needs w != 0
    bool not_a_value = false;
    const bool swamped = swamped_by_spacing(wb, ub, rule, &not_a_value);
    updates += update;
    lost += counted && swamped;
    any_not_a_value |= counted && not_a_value;
  }
  if (any_not_a_value) return false;
  r.updates = updates;
  r.lost = lost;
  return true;
}

}  // namespace

LostUpdateCounts lost_update_counts(std::span<const float> w, std::span<const float> u, const formats::Format& format,
                                    LostUpdatePath path) {
  if (w.size() != u.size())
    throw std::invalid_argument("lost_updates: w has " + std::to_string(w.size()) + " elements, u " +
                                std::to_string(u.size()));
  LostUpdateCounts r;
  r.precision = format.precision();
  r.elements = w.size();
  // By spacing where the format allows: an order of magnitude faster than an emulated addition per element.
  const std::optional<SpacingRule> rule = path == LostUpdatePath::adding ? std::nullopt : spacing_rule(format);
  const bool spaced = rule && count_by_spacing(w, u, *rule, r, path != LostUpdatePath::spacing_portable);
  if ((path == LostUpdatePath::spacing || path == LostUpdatePath::spacing_portable) && !spaced)
    throw std::invalid_argument("lost_updates: path spacing does not apply to " + format.name +
                                (rule ? " (some w is not a value of it)" : ""));
  if (!spaced) count_by_adding(w, u, format, r);
  // |w| / |u| against 2^p and 2^(p+1) as |w| against 2^p |u|: the products are exact in double.
  const double needed = format.lost_update_ratio_needed(), sufficient = format.lost_update_ratio_sufficient();
  std::size_t i = 0;
  if (path != LostUpdatePath::spacing_portable && r.precision <= 24 && detail::fused_avx2_available()) {
    const detail::RatioCounts k = detail::ratios_avx2(w.data(), u.data(), w.size(), r.precision);
    r.ratio_needed = k.needed;
    r.ratio_sufficient = k.sufficient;
    i = k.done;
  }
  for (; i < w.size(); ++i) {
    const double wi = w[i], ui = u[i];
    if (!emu::is_update(wi, ui)) continue;
    r.ratio_needed += std::fabs(wi) >= needed * std::fabs(ui);
    r.ratio_sufficient += std::fabs(wi) > sufficient * std::fabs(ui);
  }
  set_rates(r);
  return r;
}

LostUpdateStats lost_updates(std::span<const float> w, std::span<const float> u, const formats::Format& weight_format) {
  LostUpdateStats s;
  const std::vector<float> stored = emu::quantized_copy(w, weight_format);
  s.without_master = lost_update_counts(stored, u, weight_format);
  s.with_master = lost_update_counts(w, u, formats::parse_format("fp32"));
  return s;
}

LostUpdateStats lost_updates_of_step(std::span<const float> before, std::span<const float> after,
                                     const formats::Format& weight_format) {
  if (before.size() != after.size())
    throw std::invalid_argument("lost_updates_of_step: before has " + std::to_string(before.size()) +
                                " values and after " + std::to_string(after.size()));
  // 16384 floats: two 64 KiB buffers, inside any L2 cache, and long enough that the per-block overhead
  // (two calls, the format lookups) is negligible.
  constexpr std::size_t kBlock = 16384;
  const formats::Format fp32 = formats::parse_format("fp32");
  LostUpdateStats s;
  s.without_master.precision = weight_format.precision();
  s.with_master.precision = fp32.precision();
  std::vector<float> u(std::min(kBlock, before.size())), stored(u.size());
  for (std::size_t begin = 0; begin < before.size(); begin += kBlock) {
    const std::size_t n = std::min(kBlock, before.size() - begin);
    const std::span<const float> w = before.subspan(begin, n), a = after.subspan(begin, n);
    const std::span<float> u_block(u.data(), n), stored_block(stored.data(), n);
    applied_update(w, a, u_block);
    emu::quantize(w, stored_block, emu::QuantizeSpec{weight_format});
    add_counts(s.without_master, lost_update_counts(stored_block, u_block, weight_format));
    add_counts(s.with_master, lost_update_counts(w, u_block, fp32));
  }
  return s;
}

}  // namespace mpverify::record
