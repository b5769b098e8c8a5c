// The probe kernel of mma_probe.h. Each warp computes one dot product: lane (g = lane / 4, t = lane % 4) holds
// the fragment elements the PTX ISA assigns it ("Matrix Fragments for mma.m16n8k16 / m16n8k8 / m16n8k4"),
// taken from row 0 of A and column 0 of B or zero; lane 0's first accumulator register is D[0][0].
// 16-bit operands are packed two to a register, the lower-indexed element in the low half.
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "gpu/check.h"
#include "gpu/device.h"
#include "gpu/device_buffer.h"
#include "gpu/mma_probe.h"
#include "gpu/wgmma_probe.h"

namespace mpverify::gpu {

namespace {

enum class Ptx : int {  // in the order of mma_probe_instructions()
  k16_f32_f16, k16_f16_f16, k16_f32_bf16, k8_f32_f16, k8_f16_f16, k8_f32_bf16, k8_f32_tf32, k4_f32_tf32,
  k32_f32_e4m3_e4m3, k32_f32_e4m3_e5m2, k32_f32_e5m2_e4m3, k32_f32_e5m2_e5m2  // sm_89 and later
};

__host__ __device__ bool fp8_input(Ptx p) { return p >= Ptx::k32_f32_e4m3_e4m3; }

// The dot's operands: A's row 0 and B's column 0 hold them, every other element is zero.
struct Dot {
  const std::uint32_t* a;  // K operand bits (tf32: fp32 bits)
  const std::uint32_t* b;
  __device__ std::uint32_t A(int row, int col) const { return row == 0 ? a[col] : 0u; }
  __device__ std::uint32_t B(int krow, int col) const { return col == 0 ? b[krow] : 0u; }
};

__device__ std::uint32_t pack(std::uint32_t low, std::uint32_t high) { return (low & 0xFFFFu) | (high << 16); }

// m16n8k16, 16-bit operands: a0..a7 in 4 registers (rows g, g, g+8, g+8, g, g, g+8, g+8; columns 2t, 2t+1,
// +8 for a4..a7); b0..b3 in 2 registers (rows 2t, 2t+1, +8 for b2, b3; column g).
__device__ void fragments_k16(const Dot& d, int kb, int g, int t, std::uint32_t a[4], std::uint32_t b[2]) {
  for (int r = 0; r < 4; ++r) {
    const int row = (r % 2 == 0) ? g : g + 8, col = kb + 2 * t + (r >= 2 ? 8 : 0);
    a[r] = pack(d.A(row, col), d.A(row, col + 1));
  }
  for (int r = 0; r < 2; ++r) {
    const int krow = kb + 2 * t + (r == 1 ? 8 : 0);
    b[r] = pack(d.B(krow, g), d.B(krow + 1, g));
  }
}

__device__ std::uint32_t pack4(std::uint32_t b0, std::uint32_t b1, std::uint32_t b2, std::uint32_t b3) {
  return (b0 & 0xFFu) | (b1 & 0xFFu) << 8 | (b2 & 0xFFu) << 16 | (b3 & 0xFFu) << 24;
}

// m16n8k32, 8-bit operands: a0..a15 in 4 registers of 4 (rows g, g+8, g, g+8; columns 4t..4t+3, +16 for
// a8..a15); b0..b7 in 2 registers (rows 4t..4t+3, +16 for b4..b7; column g).
__device__ void fragments_k32(const Dot& d, int kb, int g, int t, std::uint32_t a[4], std::uint32_t b[2]) {
  for (int r = 0; r < 4; ++r) {
    const int row = (r % 2 == 0) ? g : g + 8, col = kb + 4 * t + (r >= 2 ? 16 : 0);
    a[r] = pack4(d.A(row, col), d.A(row, col + 1), d.A(row, col + 2), d.A(row, col + 3));
  }
  for (int r = 0; r < 2; ++r) {
    const int krow = kb + 4 * t + (r == 1 ? 16 : 0);
    b[r] = pack4(d.B(krow, g), d.B(krow + 1, g), d.B(krow + 2, g), d.B(krow + 3, g));
  }
}

// m16n8k8, 16-bit operands: a0..a3 in 2 registers (rows g, g+8; columns 2t, 2t+1); b0, b1 in 1 (rows 2t, 2t+1).
__device__ void fragments_k8_16bit(const Dot& d, int kb, int g, int t, std::uint32_t a[2], std::uint32_t b[1]) {
  for (int r = 0; r < 2; ++r) {
    const int row = r == 0 ? g : g + 8, col = kb + 2 * t;
    a[r] = pack(d.A(row, col), d.A(row, col + 1));
  }
  b[0] = pack(d.B(kb + 2 * t, g), d.B(kb + 2 * t + 1, g));
}

// m16n8k8 tf32: a0..a3 (rows g, g+8, g, g+8; columns t, t, t+4, t+4); b0, b1 (rows t, t+4).
// m16n8k4 tf32: a0, a1 (rows g, g+8; column t); b0 (row t).
__device__ void fragments_tf32(const Dot& d, int kb, int k, int g, int t, std::uint32_t a[4], std::uint32_t b[2]) {
  for (int r = 0; r < (k == 8 ? 4 : 2); ++r) a[r] = d.A(r % 2 == 0 ? g : g + 8, kb + t + (r >= 2 ? 4 : 0));
  for (int r = 0; r < (k == 8 ? 2 : 1); ++r) b[r] = d.B(kb + t + 4 * r, g);
}

__host__ __device__ bool fp16_output(Ptx p) { return p == Ptx::k16_f16_f16 || p == Ptx::k8_f16_f16; }

// One instruction: f holds the 4 fp32 accumulators, h (fp16 outputs) 2 registers of two fp16 each.
__device__ void mma(Ptx p, const std::uint32_t a[4], const std::uint32_t b[2], float f[4], std::uint32_t h[2]) {
  switch (p) {
    case Ptx::k16_f32_f16:
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                   : "+f"(f[0]), "+f"(f[1]), "+f"(f[2]), "+f"(f[3])
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
      break;
    case Ptx::k16_f16_f16:
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};"
                   : "+r"(h[0]), "+r"(h[1])
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
      break;
    case Ptx::k16_f32_bf16:
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                   : "+f"(f[0]), "+f"(f[1]), "+f"(f[2]), "+f"(f[3])
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
      break;
    case Ptx::k8_f32_f16:
      asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                   : "+f"(f[0]), "+f"(f[1]), "+f"(f[2]), "+f"(f[3])
                   : "r"(a[0]), "r"(a[1]), "r"(b[0]));
      break;
    case Ptx::k8_f16_f16:
      asm volatile("mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3}, {%4}, {%0,%1};"
                   : "+r"(h[0]), "+r"(h[1])
                   : "r"(a[0]), "r"(a[1]), "r"(b[0]));
      break;
    case Ptx::k8_f32_bf16:
      asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                   : "+f"(f[0]), "+f"(f[1]), "+f"(f[2]), "+f"(f[3])
                   : "r"(a[0]), "r"(a[1]), "r"(b[0]));
      break;
    case Ptx::k8_f32_tf32:
      asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                   : "+f"(f[0]), "+f"(f[1]), "+f"(f[2]), "+f"(f[3])
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
      break;
#if __CUDA_ARCH__ >= 890  // FP8 mma.sync exists from sm_89; mma_probe refuses it on older devices
    case Ptx::k32_f32_e4m3_e4m3:
      asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                   : "+f"(f[0]), "+f"(f[1]), "+f"(f[2]), "+f"(f[3])
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
      break;
    case Ptx::k32_f32_e4m3_e5m2:
      asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                   : "+f"(f[0]), "+f"(f[1]), "+f"(f[2]), "+f"(f[3])
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
      break;
    case Ptx::k32_f32_e5m2_e4m3:
      asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                   : "+f"(f[0]), "+f"(f[1]), "+f"(f[2]), "+f"(f[3])
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
      break;
    case Ptx::k32_f32_e5m2_e5m2:
      asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                   : "+f"(f[0]), "+f"(f[1]), "+f"(f[2]), "+f"(f[3])
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
      break;
#endif
    case Ptx::k4_f32_tf32:
      asm volatile("mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                   : "+f"(f[0]), "+f"(f[1]), "+f"(f[2]), "+f"(f[3])
                   : "r"(a[0]), "r"(a[1]), "r"(b[0]));
      break;
  }
}

__global__ void probe_kernel(Ptx p, int k, const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c,
                             std::uint32_t* d, std::size_t n, int K) {
  const std::size_t warp = (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (warp >= n) return;  // whole warps: blockDim is a multiple of 32
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const Dot dot{a + warp * K, b + warp * K};
  // C[0][0] is lane 0's first accumulator register (fp16: its low half).
  float f[4] = {lane == 0 && !fp16_output(p) ? __uint_as_float(c[warp]) : 0.0f, 0.0f, 0.0f, 0.0f};
  std::uint32_t h[2] = {lane == 0 && fp16_output(p) ? c[warp] : 0u, 0u};
  for (int kb = 0; kb < K; kb += k) {
    std::uint32_t ra[4] = {0, 0, 0, 0}, rb[2] = {0, 0};
    if (fp8_input(p)) fragments_k32(dot, kb, g, t, ra, rb);
    else if (p == Ptx::k8_f32_tf32 || p == Ptx::k4_f32_tf32) fragments_tf32(dot, kb, k, g, t, ra, rb);
    else if (k == 16) fragments_k16(dot, kb, g, t, ra, rb);
    else fragments_k8_16bit(dot, kb, g, t, ra, rb);
    mma(p, ra, rb, f, h);
  }
  if (lane == 0) d[warp] = fp16_output(p) ? (h[0] & 0xFFFFu) : __float_as_uint(f[0]);
}

// The enum follows mma_probe_instructions()'s order (its mma.sync part; wgmma goes to wgmma_probe.cu).
Ptx ptx_of(const emu::MmaModel& m) {
  const std::string ptx = m.name.substr(m.name.find('.') + 1);
  const auto& list = mma_probe_instructions();
  return static_cast<Ptx>(std::find(list.begin(), list.end(), ptx) - list.begin());
}

}  // namespace

std::string mma_probe_device_reason(const emu::MmaModel& m) {
  if (std::string why = gpu_unavailable_reason(); !why.empty()) return why;
  if (std::string why = mma_probe_unsupported_reason(m); !why.empty()) return why;
  const int cc = describe_device().compute_capability;
  if (m.name.find(".wgmma.") != std::string::npos)
    return cc != 90 ? "wgmma runs on sm_90 (Hopper) only; this device is sm_" + std::to_string(cc)
                    : detail::wgmma_build_reason();
  if (fp8_input(ptx_of(m)) && cc < 89) return "FP8 mma.sync needs compute capability 8.9 or later";
  cudaFuncAttributes attributes;
  if (cudaFuncGetAttributes(&attributes, probe_kernel) != cudaSuccess) {
    (void)cudaGetLastError();  // clears the error, which is the answer
    return "this build holds no code of the probe kernel for sm_" + std::to_string(cc) +
           ": configure with CMAKE_CUDA_ARCHITECTURES including it";
  }
  return "";
}

std::vector<std::uint32_t> mma_probe(const emu::MmaModel& m, std::span<const std::uint32_t> a,
                                     std::span<const std::uint32_t> b, std::span<const std::uint32_t> c, int K) {
  if (const std::string why = mma_probe_device_reason(m); !why.empty()) throw std::runtime_error(why);
  const std::size_t n = c.size();
  if (K <= 0 || K % m.k != 0 || a.size() != n * K || b.size() != n * K)
    throw std::invalid_argument("mma_probe: a and b need n * K operands, K a multiple of " + std::to_string(m.k));
  if (m.name.find(".wgmma.") != std::string::npos) return detail::wgmma_probe(m, a, b, c, K);
  std::vector<std::uint32_t> ha(a.begin(), a.end()), hb(b.begin(), b.end());
  if (m.a.name == "tf32") {  // the instruction reads fp32 registers and ignores their 13 low bits
    for (auto& x : ha) x <<= 13;
    for (auto& x : hb) x <<= 13;
  }
  const std::size_t bytes = n * K * sizeof(std::uint32_t);
  detail::DeviceBuffer da(bytes), db(bytes), dc(n * sizeof(std::uint32_t)), dd(n * sizeof(std::uint32_t));
  MPVERIFY_CUDA_CHECK(cudaMemcpy(da.get(), ha.data(), bytes, cudaMemcpyHostToDevice));
  MPVERIFY_CUDA_CHECK(cudaMemcpy(db.get(), hb.data(), bytes, cudaMemcpyHostToDevice));
  MPVERIFY_CUDA_CHECK(cudaMemcpy(dc.get(), c.data(), n * sizeof(std::uint32_t), cudaMemcpyHostToDevice));
  const unsigned threads = 128, blocks = static_cast<unsigned>((n * 32 + threads - 1) / threads);
  if (n > 0)
    probe_kernel<<<blocks, threads>>>(ptx_of(m), m.k, da.as<std::uint32_t>(), db.as<std::uint32_t>(),
                                      dc.as<std::uint32_t>(), dd.as<std::uint32_t>(), n, K);
  MPVERIFY_CUDA_CHECK(cudaGetLastError());
  std::vector<std::uint32_t> d(n);
  MPVERIFY_CUDA_CHECK(cudaMemcpy(d.data(), dd.get(), n * sizeof(std::uint32_t), cudaMemcpyDeviceToHost));
  return d;
}

}  // namespace mpverify::gpu
