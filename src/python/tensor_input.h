// A tensor handed in from Python, as the float32 values the library reads.
//
// The Python layer (mpverify/_tensors.py) turns a numpy array or a torch CPU
// tensor into a numpy array without copying (torch's .numpy() shares the
// memory) and names the dtype of tensors numpy has no type for: bfloat16 and
// the fp8 types arrive as their bit patterns (uint16 / uint8) with `bits` set
// to "bfloat16", "float8_e4m3fn" or "float8_e5m2". A C-contiguous float32
// array is read in place; every other type is decoded into a float32 copy
// (exact: float16, bfloat16 and fp8 values are all float32 values; float64
// is rounded to nearest, and refused by the callers that need exact input).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <pybind11/numpy.h>

namespace mpverify::python {

class FloatInput {
 public:
  // Throws std::invalid_argument naming `what` for an array of another dtype
  // (integers without `bits`, complex, object) or an unknown `bits`.
  FloatInput(const pybind11::array& array, const std::string& bits, const std::string& what);
  std::span<const float> values() const { return values_; }
  const std::vector<std::size_t>& shape() const { return shape_; }
  std::string dtype() const { return dtype_; }  // "float32", "bfloat16", ...

 private:
  pybind11::array keep_alive_;  // the array values_ may point into
  std::vector<float> owned_;
  std::span<const float> values_;
  std::vector<std::size_t> shape_;
  std::string dtype_;
};

// A CPU torch tensor of the strided layout, contiguous: one whose data_ptr() and numel() give its values.
bool is_dense_cpu_tensor(const pybind11::handle& tensor);

// The values of a dense float32 CPU torch tensor, read in place by its data_ptr() and numel(), without a
// numpy view; nullopt for any other tensor (other dtypes, devices or layouts go through FloatInput). The
// Monitor hands every tensor it records this way: detach(), numpy() and an argument tuple per tensor cost
// more in Python than measuring a small tensor. The caller keeps the tensor alive while it reads.
std::optional<std::span<const float>> torch_float32_values(const pybind11::handle& tensor);

// `a` as a C-contiguous array of T in this machine's byte order: `a` itself when it already is one, else a
// converted copy. When numpy cannot make it (MemoryError for an input too large to copy, such as a broadcast
// view of 2^40 elements; ValueError for what does not convert), numpy's error is raised again with `what`
// in front: a null array is never returned, so no caller reads through one.
template <class T>
pybind11::array_t<T, pybind11::array::c_style | pybind11::array::forcecast> contiguous(const pybind11::array& a,
                                                                                      const std::string& what) {
  try {
    return pybind11::array_t<T, pybind11::array::c_style | pybind11::array::forcecast>(a);
  } catch (pybind11::error_already_set& e) {
    PyObject* type = e.matches(PyExc_MemoryError) ? PyExc_MemoryError : PyExc_ValueError;
    const std::string message = what + ": cannot be read as a contiguous array of " +
                                std::string(pybind11::str(pybind11::dtype::of<T>())) + " (" +
                                std::to_string(a.size()) + " elements)";
    pybind11::raise_from(e, type, message.c_str());
    throw pybind11::error_already_set();
  }
}

// A float32 numpy array holding a copy of `values` in `shape`.
pybind11::array_t<float> float_array(const std::vector<float>& values, const std::vector<std::size_t>& shape);

}  // namespace mpverify::python
