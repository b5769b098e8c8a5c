#include "ops/gemm_shape.h"

#include <stdexcept>
#include <string>

namespace mpverify::ops {

void GemmShape::check(std::size_t a, std::size_t b, std::size_t c) const {
  if (m <= 0 || n <= 0 || k <= 0)
    throw std::invalid_argument("gemm: m, n, k must be positive, got m=" + std::to_string(m) + " n=" +
                                std::to_string(n) + " k=" + std::to_string(k));
  if (a != a_size()) throw std::invalid_argument("gemm: A has " + std::to_string(a) + " elements, m*k = " + std::to_string(a_size()));
  if (b != b_size()) throw std::invalid_argument("gemm: B has " + std::to_string(b) + " elements, k*n = " + std::to_string(b_size()));
  if (c != c_size()) throw std::invalid_argument("gemm: C has " + std::to_string(c) + " elements, m*n = " + std::to_string(c_size()));
}

}  // namespace mpverify::ops
