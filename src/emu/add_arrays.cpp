#include <cmath>
#include <stdexcept>
#include <string>

#include "emu/quantize.h"
#include "formats/fp_environment.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "formats/philox.h"

namespace mpverify::emu {

namespace {

template <bool Count>
void add_loop(std::span<const float> w, std::span<const float> u, std::span<float> out, const QuantizeSpec& spec,
              Counters* counters) {
  using namespace formats;
  RoundingContext rc{spec.rounding, spec.tininess, spec.random_bits, 0};
  const bool stochastic = spec.rounding == Rounding::stochastic;
  Counters local;
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (stochastic) rc.random = stochastic_draw(spec.seed, spec.stream, spec.first_index + i);
    const double wi = w[i], ui = u[i];
    Flags flags;
    std::uint32_t bits;
    if (std::isnan(w[i]) || std::isnan(u[i])) {
      // Handled on the floats, not the widened doubles: widening would quiet
      // a signalling NaN and lose its invalid flag. The first NaN propagates.
      const float first_nan = std::isnan(w[i]) ? w[i] : u[i];
      const float other = std::isnan(w[i]) ? u[i] : w[i];
      bits = from_float(spec.format, first_nan, rc, flags);
      if (std::isnan(other)) from_float(spec.format, other, rc, flags);
    } else {
      bits = sum_to_format(spec.format, wi, ui, rc, flags);
    }
    const float result = to_float(spec.format, bits, flags);
    out[i] = result;
    if constexpr (Count) {
      count_rounding(local, spec.format, wi + ui, bits, flags);
      count_update(local, wi, ui, result);
    }
  }
  if constexpr (Count) *counters += local;
}

}  // namespace

void add_arrays(std::span<const float> w, std::span<const float> u, std::span<float> out, const QuantizeSpec& spec,
                Counters* counters) {
  formats::check_fp_environment("emu::add_arrays");
  if (w.size() != u.size() || w.size() != out.size())
    throw std::invalid_argument("add_arrays: sizes differ (w " + std::to_string(w.size()) + ", u " +
                                std::to_string(u.size()) + ", out " + std::to_string(out.size()) + ")");
  if (counters) add_loop<true>(w, u, out, spec, counters);
  else add_loop<false>(w, u, out, spec, counters);
}

}  // namespace mpverify::emu
