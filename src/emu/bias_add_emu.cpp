#include "emu/bias_add_emu.h"

#include <vector>

#include "emu/accumulate.h"
#include "emu/quantize.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "refs/size_check.h"

namespace mpverify::emu {

namespace {

}  // namespace

void bias_add_emu(const ChannelShape& s, std::span<const float> x, std::span<const float> b, std::span<float> y,
                  const BiasAddPolicy& policy, CounterSet* counters) {
  s.check_dims("bias_add_emu");
  refs::check_size("bias_add_emu", "x", x.size(), s.size());
  refs::check_size("bias_add_emu", "b", b.size(), static_cast<std::size_t>(s.c));
  refs::check_size("bias_add_emu", "y", y.size(), s.size());
  const std::vector<float> xr = quantized_copy(x, policy.input, site_counters(counters, "bias_add.x"));
  const std::vector<float> br = quantized_copy(b, policy.input, site_counters(counters, "bias_add.b"));
  Counters* out = site_counters(counters, "bias_add.y");
  for (int c = 0; c < s.c; ++c)
    for (std::size_t i = 0; i < s.channel_elements(); ++i) {
      const std::size_t k = s.index(c, i);
      // One rounding of the exact x + b, counted as an addition: swamping here
      // means b != 0 was lost against a large x (y == x).
      Accumulator sum(policy.output, out, xr[k]);
      sum.add(br[c]);
      y[k] = static_cast<float>(sum.value());
    }
}

void bias_add_backward_emu(const ChannelShape& s, std::span<const float> dy, std::span<float> db,
                           const BiasAddPolicy& policy, CounterSet* counters) {
  s.check_dims("bias_add_backward_emu");
  refs::check_size("bias_add_backward_emu", "dy", dy.size(), s.size());
  refs::check_size("bias_add_backward_emu", "db", db.size(), static_cast<std::size_t>(s.c));
  check_lanes(policy.lanes);
  const std::vector<float> dyr = quantized_copy(dy, policy.input, site_counters(counters, "bias_add_backward.dy"));
  Counters* acc = site_counters(counters, "bias_add_backward.accumulate");
  Counters* out = site_counters(counters, "bias_add_backward.db");
  std::vector<double> terms(s.channel_elements());
  for (int c = 0; c < s.c; ++c) {
    for (std::size_t i = 0; i < terms.size(); ++i) terms[i] = dyr[s.index(c, i)];
    db[c] = round_value(policy.output, block_sum(terms, policy.accumulation, policy.lanes, acc), out);
  }
}

}  // namespace mpverify::emu
