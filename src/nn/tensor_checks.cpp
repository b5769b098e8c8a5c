#include "nn/tensor_checks.h"

#include <stdexcept>
#include <string>

namespace mpverify::nn {

namespace {
std::string dims(int n, int c, int h, int w) {
  std::string s = std::to_string(n);
  for (int d : {c, h, w}) {
    s += " x ";
    s += std::to_string(d);
  }
  return s;
}
}  // namespace

void expect_shape(std::string_view layer, std::string_view what, const Tensor& t, int n, int c, int h, int w) {
  if (t.n == n && t.c == c && t.h == h && t.w == w && t.size() == static_cast<std::size_t>(n) * c * h * w) return;
  std::string message = "layer ";
  message += layer;
  message += ": ";
  message += what;
  message += " is ";
  message += dims(t.n, t.c, t.h, t.w);
  message += ", expected ";
  message += dims(n, c, h, w);
  if (n == 0) message += " (backward called before forward?)";
  throw std::invalid_argument(message);
}

void expect_forward_ran(std::string_view layer, const Tensor& saved) {
  if (saved.n > 0) return;
  std::string message = "layer ";
  message += layer;
  message += ": backward called before forward (it needs the input the forward keeps)";
  throw std::invalid_argument(message);
}

}  // namespace mpverify::nn
