#include "ops/batch_norm_params.h"

#include <cstddef>
#include <stdexcept>
#include <string>

namespace mpverify::ops {

void check_batch_norm_shape(const ChannelShape& s, const char* op) {
  s.check_dims(op);
  const std::size_t m = s.channel_elements();
  if (m >= 2 && m <= (std::size_t{1} << 24)) return;
  std::string message(op);
  message += ": n*h*w must be in 2..2^24, got ";
  message += std::to_string(m);
  throw std::invalid_argument(message);
}

}  // namespace mpverify::ops
