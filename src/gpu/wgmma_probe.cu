// The wgmma probe of wgmma_probe.h. Each block is one warpgroup (128 threads) computing one dot product
// d = c + a . b as a chain of wgmma.mma_async m64n8kK (K = 16 for f16/bf16, 32 for FP8), one per k elements:
//  - A (64 x k) from registers, laid out per warp as mma.sync's m16n8k16 / m16n8k32 A fragments (PTX ISA,
//    "Register fragments for wgmma .m64nNk16 / .m64nNk32"); only row 0 (warp 0, lanes 0-3) is non-zero;
//  - B (k x 8) in shared memory without swizzling, K-major: two 8 x 16-byte core matrices along K, the first
//    at byte 0 and the second at 128 and, again, at 256, so that the descriptor's leading (128) and stride
//    (256) byte offsets reach it whichever of the two the hardware takes for K; only row n = 0 is non-zero;
//  - D in registers, starting at c in D[0][0] (warp 0, lane 0, the first register; fp16: its low half).
// A layout check runs first (wgmma_probe): a wrong guess about any of this shows there, not as a model
// mismatch.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "gpu/check.h"
#include "gpu/device_buffer.h"
#include "gpu/wgmma_probe.h"

namespace mpverify::gpu::detail {

namespace {

enum class Wg : int { k16_f32_f16, k16_f16_f16, k16_f32_bf16, k32_e4m3_e4m3, k32_e4m3_e5m2, k32_e5m2_e4m3, k32_e5m2_e5m2 };

Wg wg_of(const emu::MmaModel& m) {
  const std::string ptx = m.name.substr(m.name.find('.') + 1);
  if (ptx == "wgmma.k16.f32.f16") return Wg::k16_f32_f16;
  if (ptx == "wgmma.k16.f16.f16") return Wg::k16_f16_f16;
  if (ptx == "wgmma.k16.f32.bf16") return Wg::k16_f32_bf16;
  if (ptx == "wgmma.k32.f32.e4m3") return Wg::k32_e4m3_e4m3;
  if (ptx == "wgmma.k32.f32.e4m3.e5m2") return Wg::k32_e4m3_e5m2;
  if (ptx == "wgmma.k32.f32.e5m2.e4m3") return Wg::k32_e5m2_e4m3;
  if (ptx == "wgmma.k32.f32.e5m2") return Wg::k32_e5m2_e5m2;
  throw std::invalid_argument("wgmma_probe: no wgmma for " + m.name);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ bool fp8(Wg w) { return w >= Wg::k32_e4m3_e4m3; }
__device__ bool fp16_accumulator(Wg w) { return w == Wg::k16_f16_f16; }

// Shared-memory matrix descriptor: start address, leading byte offset 128, stride byte offset 256 (each >> 4),
// base offset 0, no swizzle.
__device__ std::uint64_t descriptor(const void* smem) {
  const std::uint32_t address = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  return static_cast<std::uint64_t>((address & 0x3FFFF) >> 4) | (std::uint64_t{128 >> 4} << 16) |
         (std::uint64_t{256 >> 4} << 32);
}

__device__ void wgmma(Wg w, const std::uint32_t a[4], std::uint64_t desc, float f[4], std::uint32_t h[2]) {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#define MPVERIFY_WGMMA_F32(TYPES, TAIL)                                                                     \
  asm volatile("wgmma.mma_async.sync.aligned." TYPES " {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, 1, 1, 1" TAIL ";" \
               : "+f"(f[0]), "+f"(f[1]), "+f"(f[2]), "+f"(f[3])                                            \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc)                                     \
               : "memory")
  switch (w) {
    case Wg::k16_f32_f16: MPVERIFY_WGMMA_F32("m64n8k16.f32.f16.f16", ", 0"); break;
    case Wg::k16_f32_bf16: MPVERIFY_WGMMA_F32("m64n8k16.f32.bf16.bf16", ", 0"); break;
    case Wg::k32_e4m3_e4m3: MPVERIFY_WGMMA_F32("m64n8k32.f32.e4m3.e4m3", ""); break;
    case Wg::k32_e4m3_e5m2: MPVERIFY_WGMMA_F32("m64n8k32.f32.e4m3.e5m2", ""); break;
    case Wg::k32_e5m2_e4m3: MPVERIFY_WGMMA_F32("m64n8k32.f32.e5m2.e4m3", ""); break;
    case Wg::k32_e5m2_e5m2: MPVERIFY_WGMMA_F32("m64n8k32.f32.e5m2.e5m2", ""); break;
    case Wg::k16_f16_f16:
      asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, %6, 1, 1, 1, 0;"
                   : "+r"(h[0]), "+r"(h[1])
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc)
                   : "memory");
      break;
  }
#undef MPVERIFY_WGMMA_F32
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}

// Row 0 of A's k elements from kb, as warp 0's lanes 0-3 hold them (two 16-bit or four 8-bit per register).
__device__ void a_fragment(Wg w, const std::uint32_t* a, int kb, int t, std::uint32_t r[4]) {
  const int per = fp8(w) ? 4 : 2, shift = fp8(w) ? 8 : 16, half = fp8(w) ? 16 : 8;
  for (int q = 0; q < 2; ++q) {  // r[0]: columns per*t..; r[2]: the same + half (r[1], r[3]: row 8, zero)
    std::uint32_t v = 0;
    for (int e = 0; e < per; ++e) v |= a[kb + per * t + q * half + e] << (shift * e);
    r[2 * q] = v;
  }
}
#endif

__global__ void wgmma_kernel(Wg w, int k, const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c,
                             std::uint32_t* d, int K, int* built) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __shared__ __align__(256) unsigned char tile[384];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const std::uint32_t *da = a + static_cast<std::size_t>(blockIdx.x) * K, *db = b + static_cast<std::size_t>(blockIdx.x) * K;
  const bool origin = warp == 0 && lane == 0;
  float f[4] = {origin && !fp16_accumulator(w) ? __uint_as_float(c[blockIdx.x]) : 0.0f, 0.0f, 0.0f, 0.0f};
  std::uint32_t h[2] = {origin && fp16_accumulator(w) ? c[blockIdx.x] : 0u, 0u};
  const int bytes = fp8(w) ? 1 : 2, per_row = 16 / bytes;
  for (int kb = 0; kb < K; kb += k) {
    for (int i = tid; i < 384; i += blockDim.x) tile[i] = 0;
    __syncthreads();
    if (tid < k) {  // B's column 0: element tid of this block of K, little-endian
      const int core = tid / per_row, at = (tid % per_row) * bytes;
      for (int byte = 0; byte < bytes; ++byte) {
        const unsigned char v = static_cast<unsigned char>(db[kb + tid] >> (8 * byte));
        tile[core * 128 + at + byte] = v;
        if (core == 1) tile[256 + at + byte] = v;
      }
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the generic stores, seen by wgmma
    __syncthreads();
    std::uint32_t ra[4] = {0, 0, 0, 0};
    if (warp == 0 && lane < 4) a_fragment(w, da, kb, lane, ra);
    wgmma(w, ra, descriptor(tile), f, h);
    __syncthreads();
  }
  if (origin) d[blockIdx.x] = fp16_accumulator(w) ? (h[0] & 0xFFFFu) : __float_as_uint(f[0]);
#else
  (void)w, (void)k, (void)a, (void)b, (void)c, (void)d, (void)K;
  if (blockIdx.x == 0 && threadIdx.x == 0) *built = 0;
#endif
}

// Compiled for the same architectures as wgmma_kernel, so the runtime picks the same code for both: it
// writes 1 exactly when that code is sm_90a's.
__global__ void wgmma_built_kernel(int* built) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  *built = 1;
#else
  *built = 0;
#endif
}

std::vector<std::uint32_t> run(Wg w, int k, std::span<const std::uint32_t> a, std::span<const std::uint32_t> b,
                               std::span<const std::uint32_t> c, int K) {
  const std::size_t n = c.size(), bytes = n * K * sizeof(std::uint32_t);
  DeviceBuffer da(bytes), db(bytes), dc(n * sizeof(std::uint32_t)), dd(n * sizeof(std::uint32_t)), built(sizeof(int));
  const int one = 1;
  MPVERIFY_CUDA_CHECK(cudaMemcpy(da.get(), a.data(), bytes, cudaMemcpyHostToDevice));
  MPVERIFY_CUDA_CHECK(cudaMemcpy(db.get(), b.data(), bytes, cudaMemcpyHostToDevice));
  MPVERIFY_CUDA_CHECK(cudaMemcpy(dc.get(), c.data(), n * sizeof(std::uint32_t), cudaMemcpyHostToDevice));
  MPVERIFY_CUDA_CHECK(cudaMemcpy(built.get(), &one, sizeof one, cudaMemcpyHostToDevice));
  if (n > 0)
    wgmma_kernel<<<static_cast<unsigned>(n), 128>>>(w, k, da.as<std::uint32_t>(), db.as<std::uint32_t>(),
                                                    dc.as<std::uint32_t>(), dd.as<std::uint32_t>(), K, built.as<int>());
  MPVERIFY_CUDA_CHECK(cudaGetLastError());
  int was_built = 0;
  MPVERIFY_CUDA_CHECK(cudaMemcpy(&was_built, built.get(), sizeof was_built, cudaMemcpyDeviceToHost));
  if (!was_built)
    throw std::runtime_error("wgmma needs code for sm_90a: configure with -DCMAKE_CUDA_ARCHITECTURES=90a");
  std::vector<std::uint32_t> d(n);
  MPVERIFY_CUDA_CHECK(cudaMemcpy(d.data(), dd.get(), n * sizeof(std::uint32_t), cudaMemcpyDeviceToHost));
  return d;
}

// k dots, dot i with a = 1 at position i (0 elsewhere) and b_j = the j-th encoding above 1.0 (distinct,
// exact): dot i must give b_i exactly; any other value names the pairing the hardware made.
void check_layout(const emu::MmaModel& m, Wg w) {
  formats::Flags exact;
  const std::uint32_t one_a = formats::from_double(m.a, 1.0, {}, exact), one_b = formats::from_double(m.b, 1.0, {}, exact);
  const std::size_t k = static_cast<std::size_t>(m.k);
  std::vector<std::uint32_t> a(k * k, 0), b(k * k, 0), c(k, 0);
  for (std::size_t i = 0; i < k; ++i)
    for (std::size_t j = 0; j < k; ++j) {
      a[i * k + j] = i == j ? one_a : 0;
      b[i * k + j] = one_b + static_cast<std::uint32_t>(j);
    }
  const std::vector<std::uint32_t> d = run(w, m.k, a, b, c, m.k);
  for (std::size_t i = 0; i < k; ++i) {
    const double got = formats::to_double(m.c, d[i]);
    if (got == formats::to_double(m.b, one_b + static_cast<std::uint32_t>(i))) continue;
    std::string met = "no b element (" + std::to_string(got) + ")";
    for (std::size_t j = 0; j < k; ++j)
      if (got == formats::to_double(m.b, one_b + static_cast<std::uint32_t>(j))) met = "b's element " + std::to_string(j);
    throw std::runtime_error("wgmma probe: layout check failed for " + m.name + ": A's element " + std::to_string(i) +
                             " met " + met);
  }
}

}  // namespace

std::string wgmma_build_reason() {
  DeviceBuffer built(sizeof(int));
  const int unknown = -1;
  MPVERIFY_CUDA_CHECK(cudaMemcpy(built.get(), &unknown, sizeof unknown, cudaMemcpyHostToDevice));
  wgmma_built_kernel<<<1, 1>>>(built.as<int>());
  if (cudaGetLastError() != cudaSuccess)  // no code of this file's kernels for the device at all
    return "this build holds no code for this device's architecture: configure with CMAKE_CUDA_ARCHITECTURES "
           "including 90a (the default does)";
  int was_built = -1;
  MPVERIFY_CUDA_CHECK(cudaMemcpy(&was_built, built.get(), sizeof was_built, cudaMemcpyDeviceToHost));
  if (was_built != 1)
    return "this build holds no sm_90a code (wgmma needs it): configure with CMAKE_CUDA_ARCHITECTURES including "
           "90a (the default does)";
  return "";
}

std::vector<std::uint32_t> wgmma_probe(const emu::MmaModel& m, std::span<const std::uint32_t> a,
                                       std::span<const std::uint32_t> b, std::span<const std::uint32_t> c, int K) {
  const Wg w = wg_of(m);
  check_layout(m, w);
  return run(w, m.k, a, b, c, K);
}

}  // namespace mpverify::gpu::detail
