#include "tensor_input.h"

#include <bit>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "formats/encoding.h"
#include "formats/format.h"

namespace py = pybind11;

namespace mpverify::python {

namespace {

template <class T>
std::vector<float> convert(const py::array& a, const std::string& what) {
  const auto c = contiguous<T>(a, what);
  std::vector<float> out(static_cast<std::size_t>(c.size()));
  const T* p = c.data();
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(p[i]);
  return out;
}

// bfloat16 is the upper half of a float32: shifting the bits is the exact decode.
std::vector<float> decode_bfloat16(const py::array& a, const std::string& what) {
  // A view, not a cast: int16 bit patterns (torch has no uint16) keep their bits.
  const auto c = contiguous<std::uint16_t>(py::array(a.attr("view")("uint16")), what);
  std::vector<float> out(static_cast<std::size_t>(c.size()));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(c.data()[i]) << 16);
  return out;
}

// fp8 codes through the format's own decoder (torch's float8_e4m3fn is OCP E4M3, float8_e5m2 OCP E5M2).
std::vector<float> decode_fp8(const py::array& a, const formats::Format& f, const std::string& what) {
  const auto c = contiguous<std::uint8_t>(py::array(a.attr("view")("uint8")), what);
  std::vector<float> out(static_cast<std::size_t>(c.size()));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(formats::to_double(f, c.data()[i]));
  return out;
}

// numpy keeps the byte order of where an array came from: np.load of a '>f4' file gives big-endian values,
// which the reads below (in place, or through view("uint16")) would take as native bytes. Such an array is
// first copied into native order (numpy's astype, exact).
py::array in_native_order(const py::array& a) {
  if (a.dtype().byteorder() != '>' && a.dtype().byteorder() != '<') return a;  // '=' native, '|' single bytes
  if (a.dtype().attr("isnative").cast<bool>()) return a;
  return py::array(a.attr("astype")(a.dtype().attr("newbyteorder")("=")));
}

bool is_bits_type(const py::array& a, std::size_t itemsize) {
  const char kind = a.dtype().kind();
  return (kind == 'u' || kind == 'i') && static_cast<std::size_t>(a.itemsize()) == itemsize;
}

}  // namespace

FloatInput::FloatInput(const py::array& given, const std::string& bits, const std::string& what)
    : keep_alive_(in_native_order(given)) {
  const py::array& array = keep_alive_;
  for (py::ssize_t d = 0; d < array.ndim(); ++d) shape_.push_back(static_cast<std::size_t>(array.shape(d)));
  if (!bits.empty()) {
    if (bits == "bfloat16" && is_bits_type(array, 2)) owned_ = decode_bfloat16(array, what);
    else if (bits == "float8_e4m3fn" && is_bits_type(array, 1)) owned_ = decode_fp8(array, formats::parse_format("fp8-e4m3"), what);
    else if (bits == "float8_e5m2" && is_bits_type(array, 1)) owned_ = decode_fp8(array, formats::parse_format("fp8-e5m2"), what);
    else
      throw std::invalid_argument(what + ": bit patterns of '" + bits + "' in an array of dtype " +
                                  std::string(py::str(array.dtype())) +
                                  " (expected bfloat16 as 16-bit integers, float8_e4m3fn or float8_e5m2 as 8-bit)");
    dtype_ = bits;
    values_ = owned_;
    return;
  }
  const char kind = array.dtype().kind();
  const auto size = static_cast<std::size_t>(array.itemsize());
  if (kind == 'f' && size == 4 && (array.flags() & py::array::c_style)) {
    values_ = std::span<const float>(static_cast<const float*>(array.data()), static_cast<std::size_t>(array.size()));
  } else if (kind == 'f' && size == 4) {
    owned_ = convert<float>(array, what);
  } else if (kind == 'f' && size == 2) {
    // numpy's float16 is IEEE binary16: every value is a float32 value.
    const auto c = contiguous<std::uint16_t>(py::array(array.attr("view")("uint16")), what);
    owned_.resize(static_cast<std::size_t>(c.size()));
    const formats::Format fp16 = formats::parse_format("fp16");
    for (std::size_t i = 0; i < owned_.size(); ++i) owned_[i] = static_cast<float>(formats::to_double(fp16, c.data()[i]));
  } else if (kind == 'f' && size == 8) {
    owned_ = convert<double>(array, what);
  } else {
    throw std::invalid_argument(what + ": dtype " + std::string(py::str(array.dtype())) +
                                " is not a floating-point type (give float16, bfloat16, float32, float64 or fp8)");
  }
  dtype_ = kind == 'f' && size == 2 ? "float16" : kind == 'f' && size == 8 ? "float64" : "float32";
  if (!owned_.empty() || values_.empty()) values_ = owned_;
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
