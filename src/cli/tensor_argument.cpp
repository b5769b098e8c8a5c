#include "cli/tensor_argument.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <span>
#include <utility>

#include "cli/commands.h"
#include "io/dtype.h"
#include "io/file_error.h"
#include "io/tensor_entry.h"
#include "io/tensor_file.h"

namespace mpverify::cli {

namespace {

namespace fs = std::filesystem;

const char* const kForms = "give FILE.npy, FILE.safetensors:NAME or FILE.npz:NAME";

bool is_archive(const fs::path& p) { return p.extension() == ".safetensors" || p.extension() == ".npz"; }

// FILE and NAME of "FILE:NAME": the first ':' whose left side names a .safetensors or
// .npz file (a path may hold ':' too). A whole argument that is a file is a file.
std::pair<std::string, std::string> split_argument(const std::string& text) {
  std::error_code ec;
  if (fs::is_regular_file(text, ec)) return {text, ""};
  for (std::size_t at = text.find(':'); at != std::string::npos; at = text.find(':', at + 1)) {
    const fs::path file = text.substr(0, at);
    if (is_archive(file) || (file.extension() == ".npy" && fs::is_regular_file(file, ec)))
      return {text.substr(0, at), text.substr(at + 1)};
  }
  return {text, ""};
}

// "a, b, c" (the first 20, then how many more).
std::string name_list(const std::vector<std::string>& names) {
  std::string s;
  for (std::size_t i = 0; i < names.size() && i < 20; ++i) {
    if (i) s += ", ";
    s += names[i];
  }
  if (names.size() > 20) s += ", and " + std::to_string(names.size() - 20) + " more";
  return s.empty() ? "none" : s;
}

std::vector<std::string> names_of(const io::TensorFile& f) {
  std::vector<std::string> names;
  for (const io::TensorEntry& e : f.tensors) names.push_back(e.name);
  return names;
}

// The skipped (non-float) entry called `name`, as the reader lists it: "name (I64)".
const std::string* skipped_entry(const io::TensorFile& f, const std::string& name) {
  for (const std::string& s : f.skipped)
    if (s.rfind(name + " (", 0) == 0) return &s;
  return nullptr;
}

const io::TensorEntry& choose(const io::TensorFile& f, const std::string& file, const std::string& name,
                              const std::string& command) {
  if (name.empty()) {
    if (f.tensors.size() == 1) return f.tensors.front();
    if (f.tensors.empty())
      throw UsageError(file + ": no floating-point tensor in this file (skipped: " + name_list(f.skipped) + ")");
    throw UsageError(file + " holds " + std::to_string(f.tensors.size()) + " tensors; name one as " + file +
                     ":NAME (tensors: " + name_list(names_of(f)) + ")");
  }
  for (const io::TensorEntry& e : f.tensors)
    if (e.name == name) return e;
  if (const std::string* s = skipped_entry(f, name))
    throw UsageError(file + ": tensor " + *s + " is not floating point; " + command + " reads F16, BF16, F32, F64, "
                     "F8_E4M3 and F8_E5M2 tensors (tensors here: " + name_list(names_of(f)) + ")");
  throw UsageError(file + ": no tensor '" + name + "' (tensors: " + name_list(names_of(f)) + ")");
}

std::vector<float> c_order_floats(const io::TensorEntry& e, const std::string& file, const std::string& command) {
  std::vector<float> v(static_cast<std::size_t>(e.count));
  if (e.dtype == io::Dtype::f64) {
    std::vector<double> d(v.size());
    io::decode_doubles(e.dtype, e.big_endian, e.data.data(), d);
    for (std::size_t i = 0; i < d.size(); ++i) {
      v[i] = static_cast<float>(d[i]);
      if (std::isinf(v[i]) && std::isfinite(d[i])) {
        char value[32];
        std::snprintf(value, sizeof value, "%.17g", d[i]);
        throw UsageError(file + ": tensor '" + e.name + "' holds " + value + " at element " +
                         std::to_string(i) + " (in storage order), beyond float32's range (about 3.4e38); " +
                         command + " reads values as float32");
      }
    }
  } else {
    io::decode_floats(e.dtype, e.big_endian, e.data.data(), v);
  }
  if (e.fortran_order && e.shape.size() > 1) v = io::fortran_to_c_order(std::span<const float>(v), e.shape);
  return v;
}

}  // namespace

std::string tensor_label(const TensorArgument& t) {
  return fs::path(t.file).extension() == ".npy" ? t.file : t.file + ":" + t.name;
}

TensorArgument read_tensor_argument(const std::string& text, const std::string& command) {
  const auto [file, name] = split_argument(text);
  std::error_code ec;
  if (!fs::exists(file, ec)) throw UsageError(file + ": no such file (" + kForms + ")");
  if (!io::is_tensor_file_name(file)) throw UsageError(file + ": not a tensor file (" + kForms + ")");
  if (!name.empty() && !is_archive(file)) throw UsageError(file + ": an .npy file holds one tensor; give it without :NAME");
  io::TensorFile f;
  try {
    f = io::open_tensor_file(file);
  } catch (const io::FileError& e) {
    throw UsageError(std::string(e.what()) + " (the input must be an .npy, .npz or .safetensors file of floating-point " +
                     "tensors: f16, bf16, f32, f64, fp8)");
  }
  const io::TensorEntry& e = choose(f, file, name, command);
  if (e.shape.empty())
    throw UsageError(file + ": tensor '" + e.name + "' is 0-d (a scalar); " + command + " needs at least one dimension " +
                     "(save it with shape [1])");
  TensorArgument t{file, e.name, std::string(io::to_string(e.dtype)), {}, c_order_floats(e, file, command)};
  for (const std::uint64_t d : e.shape) t.shape.push_back(static_cast<std::size_t>(d));
  return t;
}

std::string shape_text(const std::vector<std::size_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace mpverify::cli
