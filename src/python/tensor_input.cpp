#include "tensor_input.h"

#include <bit>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "array_decode.h"

namespace py = pybind11;

namespace mpverify::python {

namespace {

// numpy's description of the array's memory, for decode_array (array_decode.h): numpy guarantees that
// every element its shape and strides address lies in the buffer.
ArrayLayout layout_of(const py::array& a) {
  ArrayLayout l;
  l.data = static_cast<const std::byte*>(a.data());
  l.itemsize = static_cast<std::size_t>(a.itemsize());
  // '>' big-endian, '<' little-endian, '=' native, '|' single bytes (no order).
  const char order = a.dtype().byteorder();
  const char foreign = std::endian::native == std::endian::little ? '>' : '<';
  l.swapped = order == foreign;
  for (py::ssize_t d = 0; d < a.ndim(); ++d) {
    l.shape.push_back(static_cast<std::size_t>(a.shape(d)));
    l.strides.push_back(static_cast<std::ptrdiff_t>(a.strides(d)));
  }
  return l;
}

bool is_bits_type(const py::array& a, std::size_t itemsize) {
  const char kind = a.dtype().kind();
  return (kind == 'u' || kind == 'i') && static_cast<std::size_t>(a.itemsize()) == itemsize;
}

// The element kind FloatInput decodes `array` as, with its dtype's name; std::invalid_argument naming `what`
// for an array it cannot read.
std::pair<ElementKind, std::string> element_kind(const py::array& array, const std::string& bits, const std::string& what) {
  if (!bits.empty()) {
    if (bits == "bfloat16" && is_bits_type(array, 2)) return {ElementKind::bfloat16_bits, bits};
    if (bits == "float8_e4m3fn" && is_bits_type(array, 1)) return {ElementKind::e4m3_bits, bits};
    if (bits == "float8_e5m2" && is_bits_type(array, 1)) return {ElementKind::e5m2_bits, bits};
    throw std::invalid_argument(what + ": bit patterns of '" + bits + "' in an array of dtype " +
                                std::string(py::str(array.dtype())) +
                                " (expected bfloat16 as 16-bit integers, float8_e4m3fn or float8_e5m2 as 8-bit)");
  }
  const auto size = static_cast<std::size_t>(array.itemsize());
  if (array.dtype().kind() == 'f' && (size == 2 || size == 4 || size == 8))
    return {ElementKind::ieee_float, size == 2 ? "float16" : size == 4 ? "float32" : "float64"};
  throw std::invalid_argument(what + ": dtype " + std::string(py::str(array.dtype())) +
                              " is not a floating-point type (give float16, bfloat16, float32, float64 or fp8)");
}

}  // namespace

FloatInput::FloatInput(const py::array& given, const std::string& bits, const std::string& what) : keep_alive_(given) {
  const py::array& array = keep_alive_;
  for (py::ssize_t d = 0; d < array.ndim(); ++d) shape_.push_back(static_cast<std::size_t>(array.shape(d)));
  const auto [kind, dtype] = element_kind(array, bits, what);
  dtype_ = dtype;
  const ArrayLayout layout = layout_of(array);
  // A C-contiguous float32 array in this machine's byte order is read in place; anything else is decoded.
  if (kind == ElementKind::ieee_float && layout.itemsize == 4 && !layout.swapped && (array.flags() & py::array::c_style)) {
    values_ = std::span<const float>(static_cast<const float*>(array.data()), static_cast<std::size_t>(array.size()));
    return;
  }
  try {
    owned_ = decode_array(layout, kind);
  } catch (const std::bad_alloc&) {
    const std::string message = what + ": cannot be read as a contiguous array of float32 (" +
                                std::to_string(array.size()) + " elements)";
    PyErr_SetString(PyExc_MemoryError, message.c_str());
    throw py::error_already_set();
  }
  values_ = owned_;
}

bool is_dense_cpu_tensor(const py::handle& t) {
  // Layout first: a sparse tensor (nn.Embedding(sparse=True)'s gradient) answers is_contiguous() but has no
  // storage, and its data_ptr() raises.
  // Held for the process's life (released, never decref'd): a static py::object would be destroyed after
  // the interpreter is. Only torch tensors reach here, so torch is already imported.
  static const py::handle strided = py::object(py::module_::import("torch").attr("strided")).release();
  return t.attr("is_cpu").cast<bool>() && py::object(t.attr("layout")).is(strided) && t.attr("is_contiguous")().cast<bool>();
}

std::optional<std::span<const float>> torch_float32_values(const py::handle& t) {
  if (!is_dense_cpu_tensor(t)) return std::nullopt;
  if (py::str(t.attr("dtype")).cast<std::string>() != "torch.float32") return std::nullopt;
  const auto count = t.attr("numel")().cast<std::size_t>();
  if (count == 0) return std::span<const float>();
  return std::span<const float>(reinterpret_cast<const float*>(t.attr("data_ptr")().cast<std::uintptr_t>()), count);
}

py::array_t<float> float_array(const std::vector<float>& values, const std::vector<std::size_t>& shape) {
  std::vector<py::ssize_t> dims(shape.begin(), shape.end());
  py::array_t<float> out(dims);
  if (!values.empty()) std::memcpy(out.mutable_data(), values.data(), values.size() * sizeof(float));
  return out;
}

}  // namespace mpverify::python
