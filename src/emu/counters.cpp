#include "emu/counters.h"

#include <cmath>

#include "formats/encoding.h"

namespace mpverify::emu {

Counters& Counters::operator+=(const Counters& o) {
  elements += o.elements;
  zeros_in += o.zeros_in;
  nonfinite_in += o.nonfinite_in;
  inexact += o.inexact;
  underflow += o.underflow;
  underflow_to_zero += o.underflow_to_zero;
  subnormal += o.subnormal;
  overflow += o.overflow;
  nan_created += o.nan_created;
  addends_nonzero += o.addends_nonzero;
  swamped += o.swamped;
  truncated += o.truncated;
  return *this;
}

void count_rounding(Counters& c, const formats::Format& f, double exact, std::uint32_t result_bits,
                    formats::Flags flags) {
  using formats::Flags;
  const bool finite = std::isfinite(exact);
  c.elements += 1;
  c.zeros_in += exact == 0;
  c.nonfinite_in += !finite;
  c.inexact += flags.has(Flags::inexact);
  c.underflow += flags.has(Flags::underflow);
  c.underflow_to_zero += finite && exact != 0 && formats::is_zero(f, result_bits);
  c.subnormal += formats::is_subnormal(f, result_bits);
  c.overflow += flags.has(Flags::overflow);
  c.nan_created += !std::isnan(exact) && formats::is_nan(f, result_bits);
}

Counters& CounterSet::at(std::string_view site) {
  auto it = sites_.find(site);
  if (it == sites_.end()) it = sites_.emplace(std::string(site), Counters{}).first;
  return it->second;
}

const Counters* CounterSet::find(std::string_view site) const {
  auto it = sites_.find(site);
  return it == sites_.end() ? nullptr : &it->second;
}

void CounterSet::merge(const CounterSet& other) {
  for (const auto& [name, counters] : other.sites_) at(name) += counters;
}

Counters CounterSet::total() const {
  Counters sum;
  for (const auto& [name, counters] : sites_) sum += counters;
  return sum;
}

}  // namespace mpverify::emu
