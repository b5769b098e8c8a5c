// Which formats the device counting kernels round to, with or without CUDA
// (so that an unsupported format is reported the same way everywhere).
#include <string>

#include "gpu/tensor_counters_gpu.h"

namespace mpverify::gpu {

DeviceFormat device_format(const formats::Format& f) {
  static const struct {
    const char* preset;
    DeviceFormat device;
  } supported[] = {{"fp16", DeviceFormat::fp16},
                   {"bf16", DeviceFormat::bf16},
                   {"fp8-e4m3", DeviceFormat::fp8_e4m3},
                   {"fp8-e5m2", DeviceFormat::fp8_e5m2}};
  for (const auto& s : supported)
    if (formats::same_encoding(f, formats::parse_format(s.preset))) return s.device;
  std::string message = "device counters: format '";
  message += f.name;
  message += "' is not supported; supported: ";
  message += supported_device_formats;
  message += " (round-to-nearest-even, no saturation)";
  throw std::invalid_argument(message);
}

}  // namespace mpverify::gpu
