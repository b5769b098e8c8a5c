// .npz archives (io::read_npz, which maps a file): the zip structure (zip64 included), deflated members
// and their CRC, and each member's .npy.
#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "io/npz.h"
#include "tensor_values.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mpverify;
  const auto file = fuzz::scratch().fresh() / "fuzz.npz";
  fuzz::write_file(file, fuzz::text_of(data, size));
  try {
    const io::TensorFile f = io::read_npz(file);
    for (const io::TensorEntry& e : f.tensors) fuzz::decode_entry(e);
  } catch (const io::FileError&) {
  }
  return 0;
}
