// The case generator of mma_vectors.h. Operands are built from their fields (sign, exponent, fraction), so
// every kind reaches the encodings it is meant to, in every format.
#include "mma_probe/mma_vectors.h"

#include <algorithm>

#include "formats/encoding.h"

namespace mpverify::experiments {

namespace {

using Rng = std::mt19937_64;

int uniform(Rng& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, std::max(lo, hi))(rng); }

// sign, unbiased exponent (clamped to the normal range) and a random fraction; big: the fraction's top bit set.
std::uint32_t value_bits(const formats::Format& f, Rng& rng, int e_lo, int e_hi, bool big = false) {
  const int e = std::clamp(uniform(rng, e_lo, e_hi), f.emin(), f.emax());
  std::uint32_t fraction = static_cast<std::uint32_t>(rng()) & f.mantissa_mask();
  if (big && f.mantissa_bits > 0) fraction |= 1u << (f.mantissa_bits - 1);
  const std::uint32_t field = static_cast<std::uint32_t>(e + f.bias);
  if (field == f.exponent_field_max()) fraction = std::min(fraction, f.max_fraction_in_top_binade());
  const std::uint32_t sign = (rng() & 1) ? f.sign_mask() : 0u;
  return sign | (field << f.mantissa_bits) | fraction;
}

std::uint32_t finite_bits(const formats::Format& f, Rng& rng) {
  for (;;) {
    const std::uint32_t bits = static_cast<std::uint32_t>(rng()) & f.all_bits_mask();
    if (!formats::is_nan(f, bits) && !formats::is_infinity(f, bits)) return bits;
  }
}

// Subnormals, zeros and the smallest normals.
std::uint32_t tiny_bits(const formats::Format& f, Rng& rng) {
  const std::uint32_t field = static_cast<std::uint32_t>(uniform(rng, 0, 2));
  const std::uint32_t sign = (rng() & 1) ? f.sign_mask() : 0u;
  return sign | (field << f.mantissa_bits) | (static_cast<std::uint32_t>(rng()) & f.mantissa_mask());
}

std::uint32_t negated(const formats::Format& f, std::uint32_t bits) { return bits ^ f.sign_mask(); }

void make_special(const emu::MmaModel& m, MmaCase& c, Rng& rng) {
  const std::size_t i = static_cast<std::size_t>(uniform(rng, 0, static_cast<int>(c.a.size()) - 1));
  const std::uint32_t inf_a = m.a.has_infinity() ? m.a.positive_infinity_bits() : m.a.default_nan_bits();
  switch (uniform(rng, 0, 4)) {
    case 0: c.a[i] = m.a.default_nan_bits(); break;
    case 1: c.a[i] = inf_a; break;
    case 2: c.a[i] = inf_a, c.b[i] = 0; break;  // inf * 0
    case 3: c.c = m.c.positive_infinity_bits() | ((rng() & 1) ? m.c.sign_mask() : 0u); break;
    default:  // +inf and -inf
      c.a[i] = inf_a;
      c.a[(i + 1) % c.a.size()] = negated(m.a, inf_a);
      c.b[(i + 1) % c.a.size()] = c.b[i];
      break;
  }
}

MmaCase make_case(const emu::MmaModel& m, int K, int kind, Rng& rng) {
  MmaCase c;
  c.a.resize(static_cast<std::size_t>(K));
  c.b.resize(static_cast<std::size_t>(K));
  const bool big = kind == 4;
  for (int i = 0; i < K; ++i) {
    auto& a = c.a[static_cast<std::size_t>(i)];
    auto& b = c.b[static_cast<std::size_t>(i)];
    if (kind == 0) a = finite_bits(m.a, rng), b = finite_bits(m.b, rng);
    else if (kind == 5) a = tiny_bits(m.a, rng), b = tiny_bits(m.b, rng);
    else if (kind == 6) a = value_bits(m.a, rng, m.a.emax() - 2, m.a.emax()), b = value_bits(m.b, rng, m.b.emax() - 2, m.b.emax());
    else a = value_bits(m.a, rng, -3, 3, big), b = value_bits(m.b, rng, -3, 3, big);
  }
  switch (kind) {
    case 0: c.c = finite_bits(m.c, rng); break;
    case 2:  // cancelling: adjacent pairs, or the second half against the first
      for (int i = 0; i < K; ++i) {
        const int j = (rng() & 1) ? (i ^ 1) : (i + K / 2) % K;
        if (j > i) c.a[static_cast<std::size_t>(j)] = negated(m.a, c.a[static_cast<std::size_t>(i)]),
                   c.b[static_cast<std::size_t>(j)] = c.b[static_cast<std::size_t>(i)];
      }
      c.c = (rng() & 1) ? 0u : value_bits(m.c, rng, -12, -4);
      break;
    case 3: c.c = value_bits(m.c, rng, m.c.emax() > 100 ? 12 : 8, m.c.emax() > 100 ? 26 : 14); break;
    case 5: c.c = (rng() & 1) ? 0u : tiny_bits(m.c, rng); break;
    case 6: c.c = value_bits(m.c, rng, m.c.emax() - 3, m.c.emax()); break;
    default: c.c = value_bits(m.c, rng, -3, 5, big); break;
  }
  if (kind == 7) make_special(m, c, rng);
  return c;
}

}  // namespace

std::string_view mma_case_kind(int kind) {
  static constexpr std::string_view names[kMmaCaseKinds] = {"wide",        "typical",         "cancelling",
                                                            "c dominating", "large significands", "tiny",
                                                            "near overflow", "NaN and infinity"};
  return names[kind % kMmaCaseKinds];
}

std::vector<MmaCase> mma_cases(const emu::MmaModel& m, int K, std::size_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<MmaCase> cases;
  cases.reserve(n);
  for (std::size_t i = 0; i < n; ++i) cases.push_back(make_case(m, K, static_cast<int>(i % kMmaCaseKinds), rng));
  return cases;
}

}  // namespace mpverify::experiments
