// The counting kernels. The per-element code is __host__ __device__, written
// once: the kernels run it on the GPU, and detail::*_host_emulation run it on
// the CPU (with the host versions of CUDA's conversions) so that the counting
// logic is checked against the emulator even where no device is.
//
// Each counter mirrors emu::count_rounding (emu/counters.cpp) for the flags
// that formats::round_pack raises; see count_rounding_element.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/check.h"
#include "gpu/device.h"
#include "gpu/device_buffer.h"
#include "gpu/tensor_counters_gpu.h"
#include "emu/lost_update.h"
#include "formats/two_sum.h"

namespace mpverify::gpu {

namespace {

using detail::DeviceBuffer;
using Histogram = emu::ExponentHistogram;

// --- the totals: counters (in emu::Counters order), then histogram bins ------
enum CounterSlot : int {
  c_elements,
  c_zeros_in,
  c_nonfinite_in,
  c_inexact,
  c_underflow,
  c_underflow_to_zero,
  c_subnormal,
  c_overflow,
  c_nan_created,
  c_addends_nonzero,
  c_swamped,
  counter_slots
};
constexpr int hist_first = counter_slots;  // + (exponent - min_exponent)
constexpr int hist_zero = hist_first + static_cast<int>(Histogram::exponent_bins);
constexpr int hist_nan = hist_zero + 1;
constexpr int hist_inf = hist_nan + 1;
constexpr int slot_count = hist_inf + 1;

constexpr int threads_per_block = 256;  // a multiple of the warp size (the warp reduction needs whole warps)
// Elements per launch: keeps every per-thread and per-block count below 2^32,
// so that shared memory holds 32-bit counts; totals are 64-bit.
constexpr std::size_t chunk_elements = std::size_t{1} << 30;

template <typename Count>
struct Tally {
  Count c[counter_slots] = {};
  __host__ __device__ void add(int slot, bool yes) { c[slot] += yes ? 1 : 0; }
};

// What decides tininess and subnormality, from the Format fields.
struct Limits {
  float min_normal;  // 2^emin
  float tiny_below;  // |v| below this is tiny after rounding
};

Limits limits_of(const formats::Format& f) {
  // Tininess after rounding: |v| rounded to p bits with an unbounded exponent
  // is below 2^emin. The p-bit number just below 2^emin is 2^emin (1 - 2^-p),
  // odd; their midpoint 2^emin (1 - 2^-(p+1)) rounds (to even) up to 2^emin,
  // so tiny <=> |v| < 2^emin (1 - 2^-(p+1)): exact in float (p + 1 <= 12 bits,
  // inside float's range for every supported format).
  const double min_normal = f.min_normal();
  return {static_cast<float>(min_normal),
          static_cast<float>(min_normal * (1.0 - std::ldexp(1.0, -(f.precision() + 1))))};
}

// --- bits --------------------------------------------------------------------
__host__ __device__ inline std::uint32_t float_bits(float v) {
  std::uint32_t b;
  memcpy(&b, &v, sizeof b);
  return b;
}
__host__ __device__ inline float float_from_bits(std::uint32_t b) {
  float v;
  memcpy(&v, &b, sizeof v);
  return v;
}
__host__ __device__ inline std::uint64_t double_bits(double v) {
  std::uint64_t b;
  memcpy(&b, &v, sizeof b);
  return b;
}
__host__ __device__ inline double double_from_bits(std::uint64_t b) {
  double v;
  memcpy(&v, &b, sizeof v);
  return v;
}

// x * S rounded once to fp32, as a framework's loss scaler computes it (never
// contracted with anything).
__host__ __device__ inline float scaled(float x, float scale) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(x, scale);
#else
  return x * scale;
#endif
}

// --- rounding with CUDA's conversions, read back as a float (exact) ---------
template <DeviceFormat F>
__host__ __device__ inline float round_to(float v) {
  if constexpr (F == DeviceFormat::fp16) {
    return __half2float(__float2half_rn(v));
  } else if constexpr (F == DeviceFormat::bf16) {
    return __bfloat162float(__float2bfloat16_rn(v));
  } else {
    // Without saturation: e4m3 (no infinities) overflows to NaN, as the
    // fp8-e4m3 preset does; e5m2 overflows to infinity. Every fp8 value
    // (and NaN) is exact in fp16, the way back to float.
    constexpr __nv_fp8_interpretation_t kind = F == DeviceFormat::fp8_e4m3 ? __NV_E4M3 : __NV_E5M2;
    const __nv_fp8_storage_t bits = __nv_cvt_float_to_fp8(v, __NV_NOSAT, kind);
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(bits, kind)));
  }
}

// Counts the rounding of the exact value to the format; the exact value is
// `v`, or, when `sticky`, a value strictly between v's float neighbours (v
// then is its round-to-odd float, see sum_round_to_odd). Returns the result.
//
// The emulator's flags, read from the result: inexact <=> result != exact;
// overflow <=> a finite exact value became infinity or NaN (no saturation
// here); underflow <=> tiny after rounding and inexact. Non-finite exact
// values raise neither (an infinity into e4m3 is invalid, not an overflow).
template <DeviceFormat F, typename Count>
__host__ __device__ inline float count_rounding_element(const Limits& lim, float v, bool sticky, Tally<Count>& t) {
  const float r = round_to<F>(v);
  const bool v_nan = v != v;
  const bool v_finite = fabsf(v) <= FLT_MAX;  // false for NaN too
  t.add(c_elements, true);
  t.add(c_zeros_in, v == 0.0f);  // a round-to-odd value is never 0
  t.add(c_nonfinite_in, !v_finite);
  if (v_finite) {
    const bool inexact = sticky || r != v;  // a NaN result compares unequal
    t.add(c_inexact, inexact);
    t.add(c_underflow, inexact && fabsf(v) < lim.tiny_below);
    t.add(c_underflow_to_zero, v != 0.0f && r == 0.0f);
    t.add(c_overflow, !(fabsf(r) <= FLT_MAX));
  }
  t.add(c_subnormal, r != 0.0f && fabsf(r) < lim.min_normal);  // false for NaN
  t.add(c_nan_created, !v_nan && r != r);
  return r;
}

// The histogram slot of v: floor(log2|v|) from float's exponent field.
__host__ __device__ inline int histogram_slot(float v) {
  const std::uint32_t magnitude = float_bits(v) & 0x7fffffffu;
  if (magnitude == 0) return hist_zero;
  if (magnitude > 0x7f800000u) return hist_nan;
  if (magnitude == 0x7f800000u) return hist_inf;
  const int biased = static_cast<int>(magnitude >> 23);
  int exponent = biased - 127;
  if (biased == 0) {  // subnormal: magnitude * 2^-149, so the top set bit's position - 149
    int top = -1;
    for (std::uint32_t m = magnitude; m != 0; m >>= 1) ++top;
    exponent = top - 149;
  }
  return hist_first + (exponent - Histogram::min_exponent);
}

// w + u (finite floats) rounded to odd at float precision: the float toward
// zero from the exact sum, with its last bit forced to 1 when the sum is not
// a float (`sticky`). Rounding that once more, to nearest-even in any format
// of precision p <= 22, gives the correctly rounded sum (Boldo & Melquiond,
// "Emulation of FMA and correctly rounded sums: proved algorithms using
// rounding to odd", IEEE TC 2008): it stays inside the same open interval
// between neighbours of the narrower format and off its midpoints. It also
// compares with every threshold of at most 23 bits (tiny_below, overflow
// boundaries) as the exact sum does. A plain double sum would not do: it
// rounds when the exponents differ by more than 29, and can land exactly on
// a midpoint of the format (double rounding).
struct RoundedToOdd {
  float value;
  bool sticky;
};

__host__ __device__ inline RoundedToOdd sum_round_to_odd(float w, float u) {
  const double a = w, b = u;
  const double s = a + b;
  const double e = formats::two_sum_error(a, b, s);  // exact sum = s + e (no overflow in double)
  // To odd at double precision: when inexact and s is even, the exact sum
  // lies strictly between s and its odd neighbour on the exact sum's side.
  std::uint64_t sb = double_bits(s);
  if (e != 0 && (sb & 1) == 0) sb = ((e > 0) == (s > 0)) ? sb + 1 : sb - 1;
  const double d = double_from_bits(sb);
  // Then to odd at float precision (to odd twice = to odd once at the
  // narrower precision): toward zero, then force the last bit if inexact.
  std::uint32_t fb = float_bits(static_cast<float>(d));  // nearest float, maybe +-inf
  if (fabs(static_cast<double>(float_from_bits(fb))) > fabs(d)) fb -= 1;  // one step toward zero
  const bool sticky = e != 0 || static_cast<double>(float_from_bits(fb)) != d;
  if (sticky) fb |= 1u;
  return {float_from_bits(fb), sticky};
}

// One addition w + u as emu::add_arrays counts it: the rounding of the exact
// sum (NaN and infinite operands added in float, which gives the same
// NaN/infinity as the exact sum), then swamping.
template <DeviceFormat F, typename Count>
__host__ __device__ inline void count_addition(const Limits& lim, float w, float u, Tally<Count>& t) {
  const bool w_finite = fabsf(w) <= FLT_MAX, u_finite = fabsf(u) <= FLT_MAX;
  float r;
  if (w_finite && u_finite) {
    const RoundedToOdd sum = sum_round_to_odd(w, u);
    r = count_rounding_element<F>(lim, sum.value, sum.sticky, t);
  } else {
    r = count_rounding_element<F>(lim, w + u, false, t);
  }
  t.add(c_addends_nonzero, emu::is_update(w, u));
  t.add(c_swamped, emu::is_lost_update(w, u, r));
}

// --- kernels -----------------------------------------------------------------
// Per-thread counts in registers, reduced over the warp, then over the block
// in shared memory, then added once per block to the 64-bit totals.
__device__ void flush(const Tally<unsigned int>& t, unsigned int* block, unsigned long long* totals) {
#pragma unroll
  for (int k = 0; k < counter_slots; ++k) {
    unsigned int v = t.c[k];
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (threadIdx.x % 32 == 0 && v != 0) atomicAdd(&block[k], v);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < slot_count; i += blockDim.x)
    if (block[i] != 0) atomicAdd(&totals[i], static_cast<unsigned long long>(block[i]));
}

__device__ void clear(unsigned int* block) {
  for (int i = threadIdx.x; i < slot_count; i += blockDim.x) block[i] = 0;
  __syncthreads();
}

template <DeviceFormat F>
__global__ void __launch_bounds__(threads_per_block)
    rounding_kernel(const float* x, std::size_t n, float scale, Limits lim, unsigned long long* totals) {
  __shared__ unsigned int block[slot_count];
  clear(block);
  Tally<unsigned int> t;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    const float v = scaled(x[i], scale);
    count_rounding_element<F>(lim, v, false, t);
    atomicAdd(&block[histogram_slot(v)], 1u);
  }
  flush(t, block, totals);  // every thread gets here: the warp reduction needs them all
}

template <DeviceFormat F>
__global__ void __launch_bounds__(threads_per_block)
    swamping_kernel(const float* w, const float* u, std::size_t n, Limits lim, unsigned long long* totals) {
  __shared__ unsigned int block[slot_count];
  clear(block);
  Tally<unsigned int> t;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
    count_addition<F>(lim, w[i], u[i], t);
  flush(t, block, totals);
}

// --- host side -----------------------------------------------------------------
void require_device() {
  if (const std::string reason = gpu_unavailable_reason(); !reason.empty()) throw std::runtime_error(reason);
}

unsigned grid_for(std::size_t n) {
  int device = 0, sms = 0;
  MPVERIFY_CUDA_CHECK(cudaGetDevice(&device));
  MPVERIFY_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::size_t wanted = (n + threads_per_block - 1) / threads_per_block;
  return static_cast<unsigned>(std::clamp<std::size_t>(wanted, 1, static_cast<std::size_t>(sms) * 8));
}

emu::Counters counters_from(const unsigned long long* s) {
  emu::Counters c;
  c.elements = s[c_elements];
  c.zeros_in = s[c_zeros_in];
  c.nonfinite_in = s[c_nonfinite_in];
  c.inexact = s[c_inexact];
  c.underflow = s[c_underflow];
  c.underflow_to_zero = s[c_underflow_to_zero];
  c.subnormal = s[c_subnormal];
  c.overflow = s[c_overflow];
  c.nan_created = s[c_nan_created];
  c.addends_nonzero = s[c_addends_nonzero];
  c.swamped = s[c_swamped];
  return c;
}

Histogram histogram_from(const unsigned long long* s) {
  Histogram h;
  for (std::size_t i = 0; i < h.bins.size(); ++i) h.bins[i] = s[hist_first + static_cast<int>(i)];
  h.zeros = s[hist_zero];
  h.nans = s[hist_nan];
  h.infinities = s[hist_inf];
  return h;
}

// Totals on the device, zeroed; read back once.
class DeviceTotals {
 public:
  DeviceTotals() : buffer_(slot_count * sizeof(unsigned long long)) {
    MPVERIFY_CUDA_CHECK(cudaMemset(buffer_.get(), 0, slot_count * sizeof(unsigned long long)));
  }
  unsigned long long* get() const { return buffer_.as<unsigned long long>(); }
  std::vector<unsigned long long> read() const {
    std::vector<unsigned long long> host(slot_count);
    // Synchronous on the default stream: waits for the kernels, reports their errors.
    MPVERIFY_CUDA_CHECK(
        cudaMemcpy(host.data(), get(), slot_count * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  DeviceBuffer buffer_;
};

void launch_rounding(DeviceFormat f, const float* x, std::size_t n, float scale, const Limits& lim,
                     unsigned long long* totals) {
  const unsigned grid = grid_for(n);
  switch (f) {
    case DeviceFormat::fp16:
      rounding_kernel<DeviceFormat::fp16><<<grid, threads_per_block>>>(x, n, scale, lim, totals);
      break;
    case DeviceFormat::bf16:
      rounding_kernel<DeviceFormat::bf16><<<grid, threads_per_block>>>(x, n, scale, lim, totals);
      break;
    case DeviceFormat::fp8_e4m3:
      rounding_kernel<DeviceFormat::fp8_e4m3><<<grid, threads_per_block>>>(x, n, scale, lim, totals);
      break;
    case DeviceFormat::fp8_e5m2:
      rounding_kernel<DeviceFormat::fp8_e5m2><<<grid, threads_per_block>>>(x, n, scale, lim, totals);
      break;
  }
  MPVERIFY_CUDA_CHECK(cudaGetLastError());
}

void launch_swamping(DeviceFormat f, const float* w, const float* u, std::size_t n, const Limits& lim,
                     unsigned long long* totals) {
  const unsigned grid = grid_for(n);
  switch (f) {
    case DeviceFormat::fp16:
      swamping_kernel<DeviceFormat::fp16><<<grid, threads_per_block>>>(w, u, n, lim, totals);
      break;
    case DeviceFormat::bf16:
      swamping_kernel<DeviceFormat::bf16><<<grid, threads_per_block>>>(w, u, n, lim, totals);
      break;
    case DeviceFormat::fp8_e4m3:
      swamping_kernel<DeviceFormat::fp8_e4m3><<<grid, threads_per_block>>>(w, u, n, lim, totals);
      break;
    case DeviceFormat::fp8_e5m2:
      swamping_kernel<DeviceFormat::fp8_e5m2><<<grid, threads_per_block>>>(w, u, n, lim, totals);
      break;
  }
  MPVERIFY_CUDA_CHECK(cudaGetLastError());
}

// The same per-element code in a plain host loop.
template <DeviceFormat F>
std::vector<unsigned long long> emulate_rounding(std::span<const float> x, float scale, const Limits& lim) {
  std::vector<unsigned long long> slots(slot_count, 0);
  Tally<unsigned long long> t;
  for (const float xi : x) {
    const float v = scaled(xi, scale);
    count_rounding_element<F>(lim, v, false, t);
    ++slots[static_cast<std::size_t>(histogram_slot(v))];
  }
  std::copy(t.c, t.c + counter_slots, slots.begin());
  return slots;
}

template <DeviceFormat F>
std::vector<unsigned long long> emulate_swamping(std::span<const float> w, std::span<const float> u,
                                                 const Limits& lim) {
  std::vector<unsigned long long> slots(slot_count, 0);
  Tally<unsigned long long> t;
  for (std::size_t i = 0; i < w.size(); ++i) count_addition<F>(lim, w[i], u[i], t);
  std::copy(t.c, t.c + counter_slots, slots.begin());
  return slots;
}

void check_sizes(std::size_t w, std::size_t u) {
  if (w != u)
    throw std::invalid_argument("swamping_counters_gpu: sizes differ (w " + std::to_string(w) + ", u " +
                                std::to_string(u) + ")");
}

}  // namespace

TensorCounts tensor_counters_gpu(const float* device_x, std::size_t n, const formats::Format& format, float scale) {
  const DeviceFormat f = device_format(format);
  require_device();
  const Limits lim = limits_of(format);
  DeviceTotals totals;
  for (std::size_t done = 0; done < n; done += chunk_elements)
    launch_rounding(f, device_x + done, std::min(chunk_elements, n - done), scale, lim, totals.get());
  const auto host = totals.read();
  return {counters_from(host.data()), histogram_from(host.data())};
}

TensorCounts tensor_counters_gpu(std::span<const float> x, const formats::Format& format, float scale) {
  device_format(format);
  require_device();
  DeviceBuffer dx(x.size_bytes());
  if (!x.empty()) MPVERIFY_CUDA_CHECK(cudaMemcpy(dx.get(), x.data(), x.size_bytes(), cudaMemcpyHostToDevice));
  return tensor_counters_gpu(dx.as<float>(), x.size(), format, scale);
}

emu::Counters swamping_counters_gpu(const float* device_w, const float* device_u, std::size_t n,
                                    const formats::Format& weight_format) {
  const DeviceFormat f = device_format(weight_format);
  require_device();
  const Limits lim = limits_of(weight_format);
  DeviceTotals totals;
  for (std::size_t done = 0; done < n; done += chunk_elements)
    launch_swamping(f, device_w + done, device_u + done, std::min(chunk_elements, n - done), lim, totals.get());
  const auto host = totals.read();
  return counters_from(host.data());
}

emu::Counters swamping_counters_gpu(std::span<const float> w, std::span<const float> u,
                                    const formats::Format& weight_format) {
  check_sizes(w.size(), u.size());
  device_format(weight_format);
  require_device();
  DeviceBuffer dw(w.size_bytes()), du(u.size_bytes());
  if (!w.empty()) {
    MPVERIFY_CUDA_CHECK(cudaMemcpy(dw.get(), w.data(), w.size_bytes(), cudaMemcpyHostToDevice));
    MPVERIFY_CUDA_CHECK(cudaMemcpy(du.get(), u.data(), u.size_bytes(), cudaMemcpyHostToDevice));
  }
  return swamping_counters_gpu(dw.as<float>(), du.as<float>(), w.size(), weight_format);
}

namespace detail {

TensorCounts tensor_counters_host_emulation(std::span<const float> x, const formats::Format& format, float scale) {
  const Limits lim = limits_of(format);
  std::vector<unsigned long long> s;
  switch (device_format(format)) {
    case DeviceFormat::fp16: s = emulate_rounding<DeviceFormat::fp16>(x, scale, lim); break;
    case DeviceFormat::bf16: s = emulate_rounding<DeviceFormat::bf16>(x, scale, lim); break;
    case DeviceFormat::fp8_e4m3: s = emulate_rounding<DeviceFormat::fp8_e4m3>(x, scale, lim); break;
    case DeviceFormat::fp8_e5m2: s = emulate_rounding<DeviceFormat::fp8_e5m2>(x, scale, lim); break;
  }
  return {counters_from(s.data()), histogram_from(s.data())};
}

emu::Counters swamping_counters_host_emulation(std::span<const float> w, std::span<const float> u,
                                               const formats::Format& weight_format) {
  check_sizes(w.size(), u.size());
  const Limits lim = limits_of(weight_format);
  std::vector<unsigned long long> s;
  switch (device_format(weight_format)) {
    case DeviceFormat::fp16: s = emulate_swamping<DeviceFormat::fp16>(w, u, lim); break;
    case DeviceFormat::bf16: s = emulate_swamping<DeviceFormat::bf16>(w, u, lim); break;
    case DeviceFormat::fp8_e4m3: s = emulate_swamping<DeviceFormat::fp8_e4m3>(w, u, lim); break;
    case DeviceFormat::fp8_e5m2: s = emulate_swamping<DeviceFormat::fp8_e5m2>(w, u, lim); break;
  }
  return counters_from(s.data());
}

}  // namespace detail

}  // namespace mpverify::gpu
