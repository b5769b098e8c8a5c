// gemm_fp8_gpu (gemm_fp8_gpu.h) on cuBLASLt. The operands are encoded on the host by the formats library
// (saturating, as Transformer Engine's casts do) so that the device sees exactly the emulator's values.
#include <cublasLt.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "formats/arithmetic.h"
#include "gpu/check.h"
#include "gpu/device.h"
#include "gpu/device_buffer.h"
#include "gpu/gemm_fp8_gpu.h"
#include "gpu/lt_objects.h"

namespace mpverify::gpu {

namespace {

using detail::DeviceBuffer;
using detail::LtObjects;

cudaDataType fp8_type(const formats::Format& f) { return f.exponent_bits == 4 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; }

// The FP8 bytes of `values` (rows x cols, row-major), laid out with `transpose` read as its transpose.
std::vector<std::uint8_t> encode(std::span<const float> values, const formats::Format& f, int rows, int cols,
                                 bool transpose) {
  std::vector<std::uint8_t> bytes(values.size());
  formats::Format saturating = f;
  saturating.overflow = formats::Overflow::saturate;
  formats::Flags flags;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const std::size_t from = static_cast<std::size_t>(r) * cols + c;
      const std::size_t to = transpose ? static_cast<std::size_t>(c) * rows + r : from;
      bytes[to] = static_cast<std::uint8_t>(formats::from_float(saturating, values[from], {}, flags));
    }
  return bytes;
}

}  // namespace

void gemm_fp8_gpu(const ops::GemmShape& s, std::span<const float> a, const formats::Format& a_format,
                  std::span<const float> b, const formats::Format& b_format, std::span<float> c,
                  bool fast_accumulation) {
  check_fp8_gemm(s, a_format, b_format);
  s.check(a.size(), b.size(), c.size());
  if (const std::string reason = gpu_unavailable_reason(); !reason.empty()) throw std::runtime_error(reason);

  // Column-major: row-major C (m x n) is C^T (n x m) = B^T A^T. cuBLASLt's FP8 wants its first operand
  // transposed and both K-major: B^T stored as B's columns (k contiguous), A's rows as they are.
  const std::vector<std::uint8_t> b_columns = encode(b, b_format, s.k, s.n, true);
  const std::vector<std::uint8_t> a_rows = encode(a, a_format, s.m, s.k, false);
  DeviceBuffer da(a_rows.size()), db(b_columns.size()), dc(c.size_bytes());
  MPVERIFY_CUDA_CHECK(cudaMemcpy(da.get(), a_rows.data(), a_rows.size(), cudaMemcpyHostToDevice));
  MPVERIFY_CUDA_CHECK(cudaMemcpy(db.get(), b_columns.data(), b_columns.size(), cudaMemcpyHostToDevice));

  LtObjects lt;
  MPVERIFY_CUBLAS_CHECK(cublasLtCreate(&lt.handle));
  MPVERIFY_CUBLAS_CHECK(cublasLtMatmulDescCreate(&lt.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transposed = CUBLAS_OP_T, plain = CUBLAS_OP_N;
  const std::int8_t fast = fast_accumulation ? 1 : 0;
  MPVERIFY_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_TRANSA, &transposed, sizeof transposed));
  MPVERIFY_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_TRANSB, &plain, sizeof plain));
  MPVERIFY_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
  MPVERIFY_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lt.a, fp8_type(b_format), s.k, s.n, s.k));
  MPVERIFY_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lt.b, fp8_type(a_format), s.k, s.m, s.k));
  MPVERIFY_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lt.c, CUDA_R_32F, s.n, s.m, s.n));
  detail::matmul_with_first_algorithm(lt, db.get(), da.get(), dc.get(), c, "gemm_fp8_gpu (FP8)");
}

}  // namespace mpverify::gpu
