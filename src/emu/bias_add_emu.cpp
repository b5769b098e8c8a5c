#include "emu/bias_add_emu.h"

#include <algorithm>
#include <vector>

#include "emu/accumulate.h"
#include "emu/quantize.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "ops/size_check.h"

namespace mpverify::emu {

void bias_add_emu(const ops::ChannelShape& s, std::span<const float> x, std::span<const float> b, std::span<float> y,
                  const BiasAddPolicy& policy, CounterSet* counters) {
  s.check_dims("bias_add_emu");
  ops::check_size("bias_add_emu", "x", x.size(), s.size());
  ops::check_size("bias_add_emu", "b", b.size(), static_cast<std::size_t>(s.c));
  ops::check_size("bias_add_emu", "y", y.size(), s.size());
  const std::vector<float> xr = quantized_copy(x, policy.input, site_counters(counters, "bias_add.x"));
  const std::vector<float> br = quantized_copy(b, policy.input, site_counters(counters, "bias_add.b"));
  Counters* out = site_counters(counters, "bias_add.y");
  // One rounding of the exact x + b per element, counted as an addition
  // (swamping here means b != 0 was lost against a large x: y == x), a plane
  // (one image's channel, constant b) at a time through add_lanes.
  const std::size_t plane = s.spatial();
  std::vector<double> sums(plane), bias(plane);
  for (int img = 0; img < s.n; ++img)
    for (int c = 0; c < s.c; ++c) {
      const std::size_t first = (static_cast<std::size_t>(img) * s.c + static_cast<std::size_t>(c)) * plane;
      std::copy_n(xr.begin() + static_cast<std::ptrdiff_t>(first), plane, sums.begin());
      std::fill(bias.begin(), bias.end(), static_cast<double>(br[static_cast<std::size_t>(c)]));
      add_lanes(policy.output, sums.data(), bias.data(), plane, out);
      std::copy(sums.begin(), sums.end(), y.begin() + static_cast<std::ptrdiff_t>(first));  // values of the format: exact
    }
}

void bias_add_backward_emu(const ops::ChannelShape& s, std::span<const float> dy, std::span<float> db,
                           const BiasAddPolicy& policy, CounterSet* counters) {
  s.check_dims("bias_add_backward_emu");
  ops::check_size("bias_add_backward_emu", "dy", dy.size(), s.size());
  ops::check_size("bias_add_backward_emu", "db", db.size(), static_cast<std::size_t>(s.c));
  check_lanes(policy.lanes);
  const std::vector<float> dyr = quantized_copy(dy, policy.input, site_counters(counters, "bias_add_backward.dy"));
  Counters* acc = site_counters(counters, "bias_add_backward.accumulate");
  Counters* out = site_counters(counters, "bias_add_backward.db");
  std::vector<double> terms(s.channel_elements());
  for (int c = 0; c < s.c; ++c) {
    // terms in index order i (image, then position): image img's plane of channel c
    const std::size_t plane = s.spatial();
    for (int img = 0; img < s.n; ++img)
      std::copy_n(dyr.begin() + static_cast<std::ptrdiff_t>((static_cast<std::size_t>(img) * s.c + c) * plane), plane,
                  terms.begin() + static_cast<std::ptrdiff_t>(img * plane));
    db[c] = round_value(policy.output, block_sum(terms, policy.accumulation, policy.lanes, acc), out);
  }
}

}  // namespace mpverify::emu
