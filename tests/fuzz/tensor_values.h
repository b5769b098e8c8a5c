// Decodes every tensor a reader accepted, so that the fuzzer also reaches
// what a user's command does next with the bytes the reader vouched for
// (ASan sees a span that points outside its buffer).
#pragma once

#include <span>
#include <vector>

#include "io/dtype.h"
#include "io/tensor_entry.h"

namespace mpverify::fuzz {

// Bounded so that a large valid tensor costs the fuzzer no more than a small one.
inline constexpr std::uint64_t kMaxDecoded = 1 << 16;

inline void decode_entry(const io::TensorEntry& e) {
  if (e.count > kMaxDecoded) return;
  std::vector<double> values(e.count);
  io::decode_doubles(e.dtype, e.big_endian, e.data.data(), values);
  if (e.fortran_order && e.shape.size() > 1)
    values = io::fortran_to_c_order(std::span<const double>(values), e.shape);
}

}  // namespace mpverify::fuzz
