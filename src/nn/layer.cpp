#include "nn/layer.h"

#include "emu/quantize.h"

namespace mpverify::nn {

void cast_weights(Parameter& p, const Precision& precision) {
  const formats::Format& f = p.kind == ParameterKind::norm ? precision.norm_parameters : precision.weights;
  p.value.resize(p.master.size());
  emu::quantize(p.master, p.value, emu::QuantizeSpec{f});
}

}  // namespace mpverify::nn
