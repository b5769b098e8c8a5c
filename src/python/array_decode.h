// The values of an array handed to the Python module, as float32, read from its memory by dtype, byte order
// and strides: the decoding behind FloatInput (tensor_input.h), kept apart from pybind11 so that it can be
// fuzzed (tests/fuzz/fuzz_array_intake.cpp) and tested on its own. numpy gives every array this way:
// a data pointer, an item size, a byte order, a shape and strides in bytes (negative for a reversed view,
// zero for a broadcast one).
#pragma once

#include <cstddef>
#include <vector>

namespace mpverify::python {

// How an element's bytes are read: an IEEE float (float16, float32, float64 by item size), or the bit
// patterns of a type numpy lacks, stored as integers of that width.
enum class ElementKind { ieee_float, bfloat16_bits, e4m3_bits, e5m2_bits };

struct ArrayLayout {
  const std::byte* data = nullptr;
  std::size_t itemsize = 4;  // 2, 4 or 8 for ieee_float; 2 for bfloat16_bits; 1 for fp8 bits
  bool swapped = false;      // stored in the other byte order than this machine's
  std::vector<std::size_t> shape;
  std::vector<std::ptrdiff_t> strides;  // bytes, one per dimension
};

// The number of elements, or nothing when the product overflows std::size_t.
bool element_count(const std::vector<std::size_t>& shape, std::size_t& count);

// Every element in C order (the last index fastest), as float32: float16, bfloat16 and fp8 values exactly
// (each is a float32 value), float64 rounded to nearest. The caller guarantees that every element the shape
// and strides address lies in memory, as numpy does for its arrays. Throws std::invalid_argument for an
// item size the kind does not have or strides that do not match the shape, and std::bad_alloc when the
// result does not fit in memory (a broadcast view may address 2^50 elements of one byte).
std::vector<float> decode_array(const ArrayLayout& array, ElementKind kind);

}  // namespace mpverify::python
