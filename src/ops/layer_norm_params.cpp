#include "ops/layer_norm_params.h"

#include <stdexcept>
#include <string>

namespace mpverify::ops {

void check_layer_norm_shape(const LayerNormShape& s, const char* op) {
  if (s.rows >= 1 && s.features >= 1 && s.features <= (1 << 24)) return;
  std::string message = op;
  message += ": layer norm needs rows >= 1 and 1 <= features <= 2^24, got rows ";
  message += std::to_string(s.rows);
  message += ", features ";
  message += std::to_string(s.features);
  throw std::invalid_argument(message);
}

}  // namespace mpverify::ops
