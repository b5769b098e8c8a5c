#include "io/tensor_file.h"

#include "io/file_error.h"
#include "io/npy.h"
#include "io/npz.h"
#include "io/safetensors.h"

namespace mpverify::io {

bool is_tensor_file_name(const std::filesystem::path& file) {
  const std::string ext = file.extension().string();
  return ext == ".npy" || ext == ".npz" || ext == ".safetensors";
}

TensorFile open_tensor_file(const std::filesystem::path& file) {
  const std::string ext = file.extension().string();
  if (ext == ".safetensors") return read_safetensors(file);
  if (ext == ".npz") return read_npz(file);
  if (ext == ".npy") {
    TensorFile f;
    f.path = file;
    f.mapping = std::make_unique<MappedFile>(file);
    f.tensors.push_back(parse_npy(f.mapping->bytes(), file, file.stem().string()));
    return f;
  }
  throw FileError(file, "", 0, "unknown file type '" + ext + "' (expected .npy, .npz or .safetensors)");
}

}  // namespace mpverify::io
