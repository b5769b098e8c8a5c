// The safetensors format (Hugging Face): an 8-byte little-endian header
// length N, N bytes of JSON {"name": {"dtype", "shape", "data_offsets":
// [begin, end]}, ..., "__metadata__": {string: string}}, then the data, with
// offsets relative to the first byte after the header.
//
// Read: F16, BF16, F32, F64, F8_E4M3, F8_E5M2 tensors; the other types the
// format defines (BOOL, U8, I8, ..., I64, U64) are listed as skipped. Nothing
// is trusted: N against the file size (and safetensors' own 100 MB limit),
// the JSON's syntax and types, every dtype name, every dimension and their
// product, and every offset pair (begin <= end <= data size, end - begin ==
// the shape's byte size, no two tensors overlapping) are checked before any
// data is read.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "io/file_error.h"
#include "io/tensor_file.h"

namespace mpverify::io {

// The tensors of a safetensors file; io::FileError on a bad file.
TensorFile read_safetensors(const std::filesystem::path& file);

// Parses the tensors of a safetensors image held in `bytes` (data spans point
// into it); `file` names it in errors.
void parse_safetensors(std::span<const std::byte> bytes, const std::filesystem::path& file, TensorFile& out);

struct FloatTensor {
  std::string name;
  std::vector<std::size_t> shape;
  std::vector<float> values;  // C order
};

// Every tensor as float32 (exact for all types but F64, which is rejected with
// io::FileError rather than rounded), in the file's order.
std::vector<FloatTensor> read_safetensors_f32(const std::filesystem::path& file);

// Writes F32 tensors (names unique, shape product == values.size(), else
// std::invalid_argument) through a temporary file renamed into place; the
// header is padded with spaces to a multiple of 8 bytes, as the safetensors
// library does, so the data is aligned.
void write_safetensors(const std::filesystem::path& file, const std::vector<FloatTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace mpverify::io
