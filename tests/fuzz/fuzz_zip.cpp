// Zip archives in memory (io::zip_members, io::zip_member_data): every member's extent, inflated.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz_support.h"
#include "io/file_error.h"
#include "io/zip_archive.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mpverify;
  const auto bytes = fuzz::bytes_of(data, size);
  try {
    std::vector<std::byte> storage;
    for (const io::ZipMember& m : io::zip_members(bytes, "fuzz.zip")) {
      const auto member = io::zip_member_data(bytes, m, "fuzz.zip", storage);
      if (member.size() != m.uncompressed_size) __builtin_trap();  // the reader promises the size it checked
    }
  } catch (const io::FileError&) {
  }
  return 0;
}
