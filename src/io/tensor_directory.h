// Which tensor files a path names: the file itself, or every .npy, .npz and
// .safetensors file below a directory (recursively, following no symlinked
// directories), sorted by relative path so that every run lists them in the
// same order.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace mpverify::io {

struct FoundFile {
  std::filesystem::path path;
  std::string relative;  // relative to the directory given; the file name for a single file
};

// Throws io::FileError when `path` does not exist; a file of another type
// given directly is returned too (open_tensor_file reports it).
std::vector<FoundFile> find_tensor_files(const std::filesystem::path& path);

}  // namespace mpverify::io
