#include "emu/rounding_key.h"

#include <stdexcept>
#include <string>

namespace mpverify::emu {

std::uint32_t tensor_hash(std::string_view tensor) {
  std::uint32_t h = 2166136261u;  // FNV-1a's 32-bit offset basis and prime
  for (const char c : tensor) {
    h ^= static_cast<unsigned char>(c);
    h *= 16777619u;
  }
  return h;
}

RoundingKey rounding_key(std::uint64_t run_seed, std::string_view tensor, std::uint64_t step) {
  if (step >= kRoundingSteps) {
    std::string message = "stochastic rounding: step ";
    message += std::to_string(step);
    message += " does not fit the 24 bits of the rounding stream (emu/rounding_key.h)";
    throw std::out_of_range(message);
  }
  return {run_seed, kRoundingStreamTag << 56 | std::uint64_t{tensor_hash(tensor)} << 24 | step};
}

QuantizeSpec stochastic_spec(const formats::Format& format, const RoundingKey& key) {
  QuantizeSpec spec{format};
  spec.rounding = formats::Rounding::stochastic;
  spec.seed = key.seed;
  spec.stream = key.stream;
  return spec;
}

}  // namespace mpverify::emu
