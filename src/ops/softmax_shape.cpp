#include "ops/softmax_shape.h"

#include <stdexcept>
#include <string>

namespace mpverify::ops {

void check_softmax_shape(const SoftmaxShape& s, const char* op) {
  if (s.rows >= 1 && s.cols >= 1 && (!s.causal || s.rows % s.cols == 0)) return;
  std::string message = op;
  message += ": softmax needs rows, cols >= 1";
  if (s.causal) message += " and, causal, rows a multiple of cols (blocks of cols x cols scores)";
  message += "; got rows ";
  message += std::to_string(s.rows);
  message += ", cols ";
  message += std::to_string(s.cols);
  throw std::invalid_argument(message);
}

}  // namespace mpverify::ops
