// NumPy's .npz: a zip archive of .npy members (np.savez stores them,
// np.savez_compressed deflates them; see zip_archive.h for what is checked).
// A member "w.npy" is the tensor "w"; members not ending in .npy are listed as
// skipped. Deflated members are inflated into memory, stored ones are read
// from the file's mapping.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "io/file_error.h"
#include "io/tensor_file.h"

namespace mpverify::io {

TensorFile read_npz(const std::filesystem::path& file);

// Writes float32 arrays (name, C-order values, shape) as np.savez (stored) or
// np.savez_compressed (deflate) would, through a temporary file renamed into place.
struct NpzArray {
  std::string name;
  std::vector<std::size_t> shape;
  std::vector<float> values;
};
void write_npz(const std::filesystem::path& file, const std::vector<NpzArray>& arrays, bool compressed);

}  // namespace mpverify::io
