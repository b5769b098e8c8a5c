// NumPy's .npy format (versions 1.0, 2.0 and 3.0), read and written.
//
// Accepted element types (the header's 'descr'): '<f2' '<f4' '<f8' and their
// big-endian ('>') and native ('=', read as little-endian: every machine this
// builds on is) forms, and bfloat16 as ml_dtypes (JAX) stores it: numpy has no
// bfloat16, so np.save writes such an array with descr '<V2' (a 2-byte void);
// '<V2', '|V2' and 'bfloat16' are read as bfloat16, the only 2-byte type
// ml_dtypes defines. FP8 arrays from ml_dtypes come out as '|V1', which cannot
// say whether they are E4M3 or E5M2: they are rejected (use safetensors,
// whose F8_E4M3 / F8_E5M2 name the format). C and Fortran order.
//
// Nothing in the file is trusted: the magic, the version, the header length,
// the header's syntax, the shape (each dimension, their product, the byte
// size) and the data length are checked against the file's size before any
// data is read; the file must end where the data ends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "io/file_error.h"
#include "io/tensor_entry.h"

namespace mpverify::io {

struct DoubleArray {
  std::vector<std::size_t> shape;
  std::vector<double> values;  // C order
};

// Any supported dtype converted exactly to double; throws io::FileError (a
// std::runtime_error whose message names the file, the tensor and the byte
// offset) on a bad file.
DoubleArray read_npy_f64(const std::filesystem::path& file);

// Writes a little-endian '<f4' / '<f8' C-order .npy (version 1.0) through a
// temporary file renamed into place. Throws std::invalid_argument when the
// shape's product is not values.size(), io::FileError when writing fails.
void write_npy(const std::filesystem::path& file, std::span<const float> values, std::vector<std::size_t> shape);
void write_npy(const std::filesystem::path& file, std::span<const double> values, std::vector<std::size_t> shape);

// The .npy image (header and data) of a float/double array, as write_npy writes it.
std::vector<std::byte> npy_image(std::span<const float> values, const std::vector<std::size_t>& shape);
std::vector<std::byte> npy_image(std::span<const double> values, const std::vector<std::size_t>& shape);
// A '|u1' (uint8) array, e.g. the bit patterns of a format of at most 8 bits. parse_npy does not read
// it back (it throws NonFloatArray): the readers take floating-point types only.
std::vector<std::byte> npy_image(std::span<const std::uint8_t> values, const std::vector<std::size_t>& shape);

// Only the header of a '<f4' C-order .npy of `shape`: for writers that stream
// the data after it (a file larger than memory).
std::vector<std::byte> npy_header_f32(const std::vector<std::size_t>& shape);

// What parse_npy throws for a well-formed array of integers or booleans ('|u1', '<i8', '|b1', ...): valid,
// but nothing to read as floating point. An archive reader skips such a member (as the safetensors reader
// skips its integer tensors) instead of refusing the whole file.
class NonFloatArray : public FileError {
 public:
  NonFloatArray(FileError error, std::string descr) : FileError(std::move(error)), descr_(std::move(descr)) {}
  const std::string& descr() const { return descr_; }

 private:
  std::string descr_;
};

// Parses and checks an .npy image held in `bytes` (a whole .npy file, or one
// member of an .npz archive): the returned entry's data is a sub-span of
// `bytes`. Errors name `file`, `tensor` and the offset `base_offset` + the
// offset inside `bytes`.
TensorEntry parse_npy(std::span<const std::byte> bytes, const std::filesystem::path& file, const std::string& tensor,
                      std::uint64_t base_offset = 0);

}  // namespace mpverify::io
