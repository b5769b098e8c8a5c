// One tensor found in a file, checked: its bytes lie inside the file (or the
// buffer an archive member was inflated into) and their length is exactly
// count * element_size(dtype).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "io/dtype.h"

namespace mpverify::io {

struct TensorEntry {
  std::string name;  // npy: the file's stem; npz: the member name without ".npy"; safetensors: the key
  Dtype dtype = Dtype::f32;
  bool big_endian = false;
  bool fortran_order = false;  // the data is in column-major order (npy/npz only)
  std::vector<std::uint64_t> shape;
  std::uint64_t count = 0;          // product of shape (1 for a 0-d array)
  std::uint64_t data_offset = 0;    // where the data starts in the file (for messages)
  std::span<const std::byte> data;  // count * element_size(dtype) bytes
};

// Reorders a column-major array of `shape` into row-major (C) order.
template <class T>
std::vector<T> fortran_to_c_order(std::span<const T> values, const std::vector<std::uint64_t>& shape) {
  const std::size_t rank = shape.size();
  std::vector<T> out(values.size());
  if (values.empty()) return out;
  // Fortran strides: stride[0] = 1, stride[k] = stride[k-1] * shape[k-1].
  std::vector<std::uint64_t> stride(rank, 1), index(rank, 0);
  for (std::size_t k = 1; k < rank; ++k) stride[k] = stride[k - 1] * shape[k - 1];
  std::uint64_t src = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = values[src];
    // Advance the C-order multi-index (last axis fastest), keeping src in step.
    for (std::size_t k = rank; k-- > 0;) {
      if (++index[k] < shape[k]) { src += stride[k]; break; }
      src -= (shape[k] - 1) * stride[k];
      index[k] = 0;
    }
  }
  return out;
}

}  // namespace mpverify::io
