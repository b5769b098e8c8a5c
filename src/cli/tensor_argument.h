// One tensor named on the command line, read as float32 values in C order:
// FILE.npy, FILE.safetensors:NAME or FILE.npz:NAME (NAME may be left out when
// the file holds exactly one floating-point tensor).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace mpverify::cli {

struct TensorArgument {
  std::string file;
  std::string name;   // the tensor's name in the file (an .npy file's stem)
  std::string dtype;  // as stored: f16, bf16, f32, f64, f8_e4m3, f8_e5m2
  std::vector<std::size_t> shape;
  std::vector<float> values;  // C order; f64 values rounded to the nearest float32 (ties to even)
};

// How messages name it: FILE.npy, or FILE:NAME.
std::string tensor_label(const TensorArgument& t);

// A shape as the messages write it: [2, 3].
std::string shape_text(const std::vector<std::size_t>& shape);

// Reads the tensor `text` names. UsageError naming the file and what is wrong
// (no such file, an unreadable file, no tensor of that name with the names
// present, a tensor that is not floating point, a 0-d tensor) and how to fix it.
// `command` names the reader in messages ("quantize", "allreduce"). A float64 value beyond float32's range
// is refused by its index: read as float32 it would become an infinity the file never held.
TensorArgument read_tensor_argument(const std::string& text, const std::string& command);

}  // namespace mpverify::cli
