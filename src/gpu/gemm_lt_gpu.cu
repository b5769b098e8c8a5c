// gemm_lt_gpu (gemm_lt_gpu.h) on cuBLASLt. The operands are encoded on the host by the formats library, so
// the device sees exactly the values given (they must be values of the input format).
#include <cublasLt.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "formats/arithmetic.h"
#include "gpu/check.h"
#include "gpu/device.h"
#include "gpu/device_buffer.h"
#include "gpu/gemm_lt_gpu.h"
#include "gpu/lt_objects.h"

namespace mpverify::gpu {

namespace {

using detail::DeviceBuffer;
using detail::LtObjects;

// The 16-bit encodings of `values`; a value the format does not hold exactly is refused.
std::vector<std::uint16_t> encode16(std::span<const float> values, const formats::Format& f) {
  std::vector<std::uint16_t> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    formats::Flags flags;
    bits[i] = static_cast<std::uint16_t>(formats::from_float(f, values[i], {}, flags));
    if (flags.has(formats::Flags::inexact))
      throw std::invalid_argument("gemm_lt_gpu: an operand is not a value of " + f.name);
  }
  return bits;
}

template <typename T>
T config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attribute) {
  T value{};
  std::size_t written = 0;
  MPVERIFY_CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, &value, sizeof value, &written));
  return value;
}

LtAlgorithm read_configuration(const cublasLtMatmulHeuristicResult_t& h) {
  LtAlgorithm a;
  a.id = config<std::int32_t>(h.algo, CUBLASLT_ALGO_CONFIG_ID);
  a.tile = config<std::uint32_t>(h.algo, CUBLASLT_ALGO_CONFIG_TILE_ID);
  a.split_k = config<std::int32_t>(h.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
  a.reduction_scheme = config<std::uint32_t>(h.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME);
  a.swizzle = config<std::uint32_t>(h.algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING);
  a.custom_option = config<std::uint32_t>(h.algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION);
  a.stages = config<std::uint32_t>(h.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID);
  a.inner_shape = config<std::uint16_t>(h.algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID);
  a.cluster_shape = config<std::uint16_t>(h.algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID);
  a.workspace_bytes = h.workspaceSize;
  return a;
}

}  // namespace

LtAlgorithm gemm_lt_gpu(const ops::GemmShape& s, std::span<const float> a, std::span<const float> b,
                        std::span<float> c, GemmCompute compute) {
  s.check(a.size(), b.size(), c.size());
  if (s.transpose_a || s.transpose_b) throw std::invalid_argument("gemm_lt_gpu: row-major A and B only");
  if (compute != GemmCompute::fp16_fp32_accumulate && compute != GemmCompute::bf16_fp32_accumulate)
    throw std::invalid_argument("gemm_lt_gpu: fp16-fp32acc or bf16-fp32acc, not " + std::string(to_string(compute)));
  if (const std::string reason = gpu_unavailable_reason(); !reason.empty()) throw std::runtime_error(reason);
  const bool fp16 = compute == GemmCompute::fp16_fp32_accumulate;
  const formats::Format input = formats::parse_format(fp16 ? "fp16" : "bf16");
  const cudaDataType type = fp16 ? CUDA_R_16F : CUDA_R_16BF;
  const std::vector<std::uint16_t> a16 = encode16(a, input), b16 = encode16(b, input);
  DeviceBuffer da(a16.size() * 2), db(b16.size() * 2), dc(c.size_bytes());
  MPVERIFY_CUDA_CHECK(cudaMemcpy(da.get(), a16.data(), a16.size() * 2, cudaMemcpyHostToDevice));
  MPVERIFY_CUDA_CHECK(cudaMemcpy(db.get(), b16.data(), b16.size() * 2, cudaMemcpyHostToDevice));

  // Column-major: row-major C (m x n) is C^T (n x m) = B^T A^T, where row-major B and A read column-major are
  // B^T (n x k, ld n) and A^T (k x m, ld k): no transposes.
  LtObjects lt;
  MPVERIFY_CUBLAS_CHECK(cublasLtCreate(&lt.handle));
  MPVERIFY_CUBLAS_CHECK(cublasLtMatmulDescCreate(&lt.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  MPVERIFY_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lt.a, type, s.n, s.k, s.n));
  MPVERIFY_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lt.b, type, s.k, s.m, s.k));
  MPVERIFY_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lt.c, CUDA_R_32F, s.n, s.m, s.n));
  return read_configuration(detail::matmul_with_first_algorithm(lt, db.get(), da.get(), dc.get(), c, "gemm_lt_gpu"));
}

}  // namespace mpverify::gpu
