// What the instrumented routines count, per site (a named tensor or op).
//
// A routine takes a `Counters*`: nullptr means "off", and the routines are
// templated on it so that the off path contains no counting code at all.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "emu/lost_update.h"
#include "formats/flags.h"
#include "formats/format.h"

namespace mpverify::emu {

struct Counters {
  std::uint64_t elements = 0;           // roundings (or additions) performed
  std::uint64_t zeros_in = 0;           // exact zeros among the exact values
  std::uint64_t nonfinite_in = 0;       // NaN or infinity among the exact values
  std::uint64_t inexact = 0;            // result != exact value
  std::uint64_t underflow = 0;          // IEEE underflow flag: tiny and inexact
  std::uint64_t underflow_to_zero = 0;  // a non-zero finite exact value became +-0
  std::uint64_t subnormal = 0;          // non-zero subnormal results
  std::uint64_t overflow = 0;           // IEEE overflow flag (to inf, NaN or saturated)
  std::uint64_t nan_created = 0;        // NaN results from non-NaN exact values
  std::uint64_t addends_nonzero = 0;    // additions w + u that are updates (lost_update.h: is_update)
  std::uint64_t swamped = 0;            // ... whose result equals w: a lost update (is_lost_update)
  std::uint64_t truncated = 0;          // tensor-core terms that lost bits to the alignment (mma_model.h)

  Counters& operator+=(const Counters& other);
  friend bool operator==(const Counters&, const Counters&) = default;
};

// The one definition of how a rounding is counted, shared by every path
// (scalar, SIMD, and the GPU kernels, which mirror it).
// `exact` is the value that was rounded (its NaN-ness and finiteness count too).
void count_rounding(Counters& c, const formats::Format& f, double exact, std::uint32_t result_bits,
                    formats::Flags flags);

// The one definition of how an addition w + u is counted as an update, and
// as a lost one (lost_update.h), besides its rounding (count_rounding).
inline void count_update(Counters& c, double w, double u, double result) {
  c.addends_nonzero += is_update(w, u);
  c.swamped += is_lost_update(w, u, result);
}

// Counters for many sites, merged by name.
class CounterSet {
 public:
  Counters& at(std::string_view site);
  const Counters* find(std::string_view site) const;
  void merge(const CounterSet& other);
  Counters total() const;
  const std::map<std::string, Counters, std::less<>>& sites() const { return sites_; }

 private:
  std::map<std::string, Counters, std::less<>> sites_;
};

// The counters of `site` in `set`, or nullptr (counting off) when set is null.
inline Counters* site_counters(CounterSet* set, std::string_view site) { return set ? &set->at(site) : nullptr; }

}  // namespace mpverify::emu
