#include "record/lost_updates.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "emu/counters.h"
#include "emu/quantize.h"

namespace mpverify::record {

void set_rates(LostUpdateCounts& c) {
  if (c.updates == 0) return;
  const double n = static_cast<double>(c.updates);
  c.lost_rate = static_cast<double>(c.lost) / n;
  c.ratio_needed_rate = static_cast<double>(c.ratio_needed) / n;
  c.ratio_sufficient_rate = static_cast<double>(c.ratio_sufficient) / n;
}

LostUpdateCounts lost_update_counts(std::span<const float> w, std::span<const float> u, const formats::Format& format) {
  if (w.size() != u.size())
    throw std::invalid_argument("lost_updates: w has " + std::to_string(w.size()) + " elements, u " +
                                std::to_string(u.size()));
  LostUpdateCounts r;
  r.precision = format.precision();
  emu::Counters c;
  std::vector<float> sum(w.size());
  emu::add_arrays(w, u, sum, emu::QuantizeSpec{format}, &c);
  r.elements = w.size();
  r.updates = c.addends_nonzero;
  r.lost = c.swamped;
  // |w| / |u| against 2^p and 2^(p+1) as |w| against 2^p |u|: the products are exact in double.
  const double needed = format.lost_update_ratio_needed(), sufficient = format.lost_update_ratio_sufficient();
  for (std::size_t i = 0; i < w.size(); ++i) {
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

}  // namespace mpverify::record
