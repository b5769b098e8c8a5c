// Counting kernels: analyse a tensor that lives on the GPU without copying it
// to the host. They fill exactly the emu::Counters that emu::quantize (or
// emu::add_arrays) fills with counters on, and the emu::ExponentHistogram of
// the values, so that device and emulator results compare field by field.
//
// What is rounded: v = x * S computed in fp32 on the device (as a framework's
// loss scaler multiplies), then v rounded to nearest-even to the format with
// CUDA's conversions (__float2half_rn, __float2bfloat16_rn,
// __nv_cvt_float_to_fp8 without saturation). Tininess is detected after
// rounding, as the emulator's default. The histogram is of that fp32 v, so a
// product beyond float's range shows as an infinity (its below_range and
// above_range stay 0); for a power-of-two S inside the range it equals the
// host histogram of x at scale S.
//
// Results are exact integers and do not depend on the launch order. Each call
// synchronises once (to copy the totals back).
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "emu/counters.h"
#include "emu/exponent_histogram.h"
#include "formats/format.h"

namespace mpverify::gpu {

// The formats the device rounds to, with the fields of the presets of the same
// name (fp8-e4m3: fn encoding, overflow to NaN; the others IEEE).
enum class DeviceFormat { fp16, bf16, fp8_e4m3, fp8_e5m2 };
inline constexpr std::string_view supported_device_formats = "fp16, bf16, fp8-e4m3, fp8-e5m2";

// The device format with f's fields (its name does not matter); throws
// std::invalid_argument naming f and the supported list otherwise.
DeviceFormat device_format(const formats::Format& f);

struct TensorCounts {
  emu::Counters counters;
  emu::ExponentHistogram histogram;
};

// The counters of rounding every x[i] * scale to `format`, and the histogram
// of x[i] * scale; `device_x` points to n floats in device memory.
// Throws std::invalid_argument for an unsupported format (before looking for
// a device), std::runtime_error with gpu_unavailable_reason() without a
// device, and on any CUDA error (with file and line).
TensorCounts tensor_counters_gpu(const float* device_x, std::size_t n, const formats::Format& format,
                                 float scale = 1.0f);
// Convenience: copies the host values in first.
TensorCounts tensor_counters_gpu(std::span<const float> x, const formats::Format& format, float scale = 1.0f);

// The counters emu::add_arrays fills for out = fl(w + u) in the weight format
// (the sum of the floats w[i] + u[i] rounded once), including addends_nonzero
// and swamped (u != 0 but the result equals w: a lost update). Device
// pointers to n floats each.
emu::Counters swamping_counters_gpu(const float* device_w, const float* device_u, std::size_t n,
                                    const formats::Format& weight_format);
// Convenience: copies the host arrays in first; std::invalid_argument when
// their sizes differ.
emu::Counters swamping_counters_gpu(std::span<const float> w, std::span<const float> u,
                                    const formats::Format& weight_format);

namespace detail {

// The kernels' per-element code run on the host, with the host versions of
// CUDA's conversion functions: lets a machine without a GPU (but built with
// CUDA) check the counting logic against the emulator. Throws
// std::runtime_error when built without CUDA.
TensorCounts tensor_counters_host_emulation(std::span<const float> x, const formats::Format& format,
                                            float scale = 1.0f);
emu::Counters swamping_counters_host_emulation(std::span<const float> w, std::span<const float> u,
                                               const formats::Format& weight_format);

}  // namespace detail

}  // namespace mpverify::gpu
