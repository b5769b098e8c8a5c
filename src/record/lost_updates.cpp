#include "record/lost_updates.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "emu/counters.h"
#include "emu/quantize.h"

namespace mpverify::record {

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
  // |w| / |u| > 2^p as |w| > 2^p |u|: the right side is exact in double.
  const double ratio = format.lost_update_ratio();
  for (std::size_t i = 0; i < w.size(); ++i) {
    const double wi = w[i], ui = u[i];
    if (ui != 0 && std::isfinite(ui) && std::isfinite(wi)) r.ratio_above += std::fabs(wi) > ratio * std::fabs(ui);
  }
  if (r.updates != 0) {
    r.lost_rate = static_cast<double>(r.lost) / static_cast<double>(r.updates);
    r.ratio_above_rate = static_cast<double>(r.ratio_above) / static_cast<double>(r.updates);
  }
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
