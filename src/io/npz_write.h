// Writing an .npz whose arrays have different element types (float32 values
// beside uint8 codes, as np.savez writes them), where npz.h's write_npz takes
// float32 arrays only. Members are stored (not deflated) and the archive is
// written atomically: readers see no file or the whole file.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace mpverify::io {

struct NpzMember {
  std::string name;            // the array's name; its member is NAME.npy
  std::vector<std::byte> npy;  // the array's .npy image (npy.h's npy_image)
};

// std::invalid_argument when two members share a name or the archive would
// need zip64 (4 GiB); io::FileError when writing fails.
void write_npz_members(const std::filesystem::path& file, const std::vector<NpzMember>& members);

}  // namespace mpverify::io
