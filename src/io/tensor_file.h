// The tensors of one file, whichever format it is in, with the storage their
// bytes live in (the file's mapping, or buffers that archive members were
// inflated into). Moving a TensorFile keeps its entries' spans valid.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "io/mapped_file.h"
#include "io/tensor_entry.h"

namespace mpverify::io {

struct TensorFile {
  std::filesystem::path path;
  std::vector<TensorEntry> tensors;  // in the file's order
  // Tensors of types that are not floating point (integers, booleans), which
  // are well-formed but have nothing to analyse: "name (I64)".
  std::vector<std::string> skipped;
  std::unique_ptr<MappedFile> mapping;
  std::vector<std::vector<std::byte>> buffers;
};

// Whether the name ends in .npy, .npz or .safetensors (what open_tensor_file reads).
bool is_tensor_file_name(const std::filesystem::path& file);

// Opens and checks a .npy, .npz or .safetensors file (chosen by extension).
// Throws io::FileError for a bad or unreadable file, or another extension.
TensorFile open_tensor_file(const std::filesystem::path& file);

}  // namespace mpverify::io
