// safetensors images (io::parse_safetensors, in memory): the header length, the JSON header, dtypes,
// shapes, offsets and overlaps.
#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "io/safetensors.h"
#include "tensor_values.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mpverify;
  try {
    io::TensorFile f;
    io::parse_safetensors(fuzz::bytes_of(data, size), "fuzz.safetensors", f);
    for (const io::TensorEntry& e : f.tensors) fuzz::decode_entry(e);
  } catch (const io::FileError&) {
  }
  return 0;
}
