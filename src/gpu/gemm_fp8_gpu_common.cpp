// The argument checks of gemm_fp8_gpu, in every build.
#include <stdexcept>
#include <string>

#include "gpu/gemm_fp8_gpu.h"

namespace mpverify::gpu {

void check_fp8_gemm(const ops::GemmShape& s, const formats::Format& a_format, const formats::Format& b_format) {
  if (s.transpose_a || s.transpose_b) throw std::invalid_argument("gemm_fp8_gpu: row-major op(A) and op(B) only");
  if (s.m % 16 != 0 || s.n % 16 != 0 || s.k % 16 != 0 || s.m == 0 || s.n == 0 || s.k == 0)
    throw std::invalid_argument("gemm_fp8_gpu: cuBLASLt's FP8 GEMM needs m, n and k positive multiples of 16, got " +
                                std::to_string(s.m) + ", " + std::to_string(s.n) + ", " + std::to_string(s.k));
  for (const formats::Format* f : {&a_format, &b_format})
    if (!formats::same_values(*f, formats::parse_format("fp8-e4m3")) &&
        !formats::same_values(*f, formats::parse_format("fp8-e5m2")))
      throw std::invalid_argument("gemm_fp8_gpu: " + f->name + " is not an FP8 format (fp8-e4m3, fp8-e5m2)");
  // cuBLASLt's FP8 matmul takes E4M3 x E4M3, E4M3 x E5M2 and E5M2 x E4M3, not E5M2 x E5M2 (cuBLAS
  // documentation, cublasLtMatmul, "FP8 ... data types"): it would fail at the call with NOT_SUPPORTED.
  const formats::Format e5m2 = formats::parse_format("fp8-e5m2");
  if (formats::same_values(a_format, e5m2) && formats::same_values(b_format, e5m2))
    throw std::invalid_argument("gemm_fp8_gpu: cuBLASLt has no fp8-e5m2 x fp8-e5m2 GEMM; make one operand fp8-e4m3");
}

}  // namespace mpverify::gpu
