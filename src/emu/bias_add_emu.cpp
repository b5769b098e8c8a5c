#include "emu/bias_add_emu.h"

#include <vector>

#include "emu/accumulate.h"
#include "emu/quantize.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "refs/size_check.h"

namespace mpverify::emu {

namespace {

std::vector<float> rounded(std::span<const float> v, const formats::Format& f, Counters* counters) {
  std::vector<float> out(v.begin(), v.end());
  quantize(out, out, QuantizeSpec{f}, counters);
  return out;
}

// One rounding of the exact value to f, counted.
float round_counted(const formats::Format& f, double exact, Counters* counters) {
  formats::Flags flags;
  const std::uint32_t bits = formats::from_double(f, exact, {}, flags);
  if (counters) count_rounding(*counters, f, exact, bits, flags);
  return formats::to_float(f, bits, flags);
}

}  // namespace

void bias_add_emu(const ChannelShape& s, std::span<const float> x, std::span<const float> b, std::span<float> y,
                  const BiasAddPolicy& policy, CounterSet* counters) {
  s.check_dims("bias_add_emu");
  refs::check_size("bias_add_emu", "x", x.size(), s.size());
  refs::check_size("bias_add_emu", "b", b.size(), static_cast<std::size_t>(s.c));
  refs::check_size("bias_add_emu", "y", y.size(), s.size());
  const std::vector<float> xr = rounded(x, policy.input, site_counters(counters, "bias_add.x"));
  const std::vector<float> br = rounded(b, policy.input, site_counters(counters, "bias_add.b"));
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
  const std::vector<float> dyr = rounded(dy, policy.input, site_counters(counters, "bias_add_backward.dy"));
  Counters* acc = site_counters(counters, "bias_add_backward.accumulate");
  Counters* out = site_counters(counters, "bias_add_backward.db");
  std::vector<double> terms(s.channel_elements());
  for (int c = 0; c < s.c; ++c) {
    for (std::size_t i = 0; i < terms.size(); ++i) terms[i] = dyr[s.index(c, i)];
    db[c] = round_counted(policy.output, block_sum(terms, policy.accumulation, policy.lanes, acc), out);
  }
}

}  // namespace mpverify::emu
