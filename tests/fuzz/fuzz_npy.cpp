// .npy images (io::parse_npy, in memory): the header, the shape, the dtype and the data's extent.
#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "io/npy.h"
#include "tensor_values.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mpverify;
  try {
    const io::TensorEntry e = io::parse_npy(fuzz::bytes_of(data, size), "fuzz.npy", "fuzz");
    fuzz::decode_entry(e);
  } catch (const io::FileError&) {  // NonFloatArray included
  }
  return 0;
}
