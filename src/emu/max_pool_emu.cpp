#include "emu/max_pool_emu.h"

#include <vector>

#include "emu/accumulate.h"
#include "emu/quantize.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "ops/max_pool_argmax.h"
#include "ops/size_check.h"

namespace mpverify::emu {

namespace {

}  // namespace

void max_pool_emu(const ops::PoolShape& p, std::span<const float> x, std::span<float> y, const MaxPoolPolicy& policy,
                  CounterSet* counters) {
  p.check_dims("max_pool_emu");
  ops::check_size("max_pool_emu", "x", x.size(), p.x_size());
  ops::check_size("max_pool_emu", "y", y.size(), p.y_size());
  const std::vector<float> xr = quantized_copy(x, policy.input, site_counters(counters, "max_pool.x"));
  const std::vector<std::size_t> win = ops::max_pool_argmax(p, xr);
  std::vector<double> selected(win.size());
  for (std::size_t o = 0; o < win.size(); ++o) selected[o] = xr[win[o]];
  round_values(selected, y, policy.output, site_counters(counters, "max_pool.y"));
}

void max_pool_backward_emu(const ops::PoolShape& p, std::span<const float> x, std::span<const float> dy,
                           std::span<float> dx, const MaxPoolPolicy& policy, CounterSet* counters) {
  p.check_dims("max_pool_backward_emu");
  ops::check_size("max_pool_backward_emu", "x", x.size(), p.x_size());
  ops::check_size("max_pool_backward_emu", "dy", dy.size(), p.y_size());
  ops::check_size("max_pool_backward_emu", "dx", dx.size(), p.x_size());
  const std::vector<float> xr = quantized_copy(x, policy.input, site_counters(counters, "max_pool_backward.x"));
  const std::vector<float> dyr = quantized_copy(dy, policy.input, site_counters(counters, "max_pool_backward.dy"));
  const std::vector<std::size_t> win = ops::max_pool_argmax(p, xr);
  // Windows in increasing flat index reach each winner in row-major window
  // order: the order of the gather kernel's loop over the windows covering it.
  Counters* acc = site_counters(counters, "max_pool_backward.accumulate");
  std::vector<double> sums(x.size(), 0.0);
  for (std::size_t o = 0; o < win.size(); ++o) {
    Accumulator sum(policy.accumulation, acc, sums[win[o]]);
    sum.add(dyr[o]);
    sums[win[o]] = sum.value();
  }
  round_values(sums, dx, policy.output, site_counters(counters, "max_pool_backward.dx"));
}

}  // namespace mpverify::emu
