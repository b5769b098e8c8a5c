// The hardware experiment's operands: seeded noise rounded to the input format, so that the hardware's own
// conversion of them is exact and both sides see the same values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "data/random.h"
#include "emu/quantize.h"
#include "formats/format.h"

namespace mpverify::experiments {

inline std::vector<float> seeded_inputs(std::size_t n, std::uint64_t seed, std::uint64_t stream,
                                        const formats::Format& input) {
  data::Draws d(seed, stream);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(d.noise());
  emu::quantize(v, v, emu::QuantizeSpec{input});
  return v;
}

}  // namespace mpverify::experiments
