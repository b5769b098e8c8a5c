#include "nn/init.h"

#include "data/random.h"

namespace mpverify::nn {

Parameter make_parameter(std::string name, std::size_t n, ParameterKind kind) {
  Parameter p;
  p.name = std::move(name);
  p.kind = kind;
  p.master.assign(n, 0.0f);
  p.value.assign(n, 0.0f);
  p.grad.assign(n, 0.0f);
  return p;
}

void fill_uniform(std::span<float> out, double bound, std::uint64_t seed, std::uint64_t stream) {
  data::Draws draws(seed, stream);
  for (float& v : out) v = static_cast<float>(draws.uniform(-bound, bound));
}

void fill_noise(std::span<float> out, double stddev, std::uint64_t seed, std::uint64_t stream) {
  data::Draws draws(seed, stream);
  for (float& v : out) v = static_cast<float>(stddev * draws.noise());
}

}  // namespace mpverify::nn
