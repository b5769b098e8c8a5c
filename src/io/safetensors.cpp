#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <string_view>

#include <nlohmann/json.hpp>

#include "io/atomic_write.h"
#include "io/json_text.h"

namespace mpverify::io {

namespace {

using nlohmann::json;

constexpr std::uint64_t max_header = 100'000'000;  // the safetensors library's own limit

std::optional<Dtype> float_dtype(std::string_view s) {
  if (s == "F16") return Dtype::f16;
  if (s == "BF16") return Dtype::bf16;
  if (s == "F32") return Dtype::f32;
  if (s == "F64") return Dtype::f64;
  if (s == "F8_E4M3") return Dtype::f8_e4m3;
  if (s == "F8_E5M2") return Dtype::f8_e5m2;
  return std::nullopt;
}

// Element sizes of the non-float types the format defines (skipped, but their
// offsets are still checked).
std::optional<std::uint64_t> other_dtype_size(std::string_view s) {
  if (s == "BOOL" || s == "U8" || s == "I8" || s == "F8_E8M0") return 1;
  if (s == "U16" || s == "I16") return 2;
  if (s == "U32" || s == "I32") return 4;
  if (s == "U64" || s == "I64") return 8;
  return std::nullopt;
}

const char* dtype_name(Dtype t) {
  switch (t) {
    case Dtype::f16: return "F16";
    case Dtype::bf16: return "BF16";
    case Dtype::f32: return "F32";
    case Dtype::f64: return "F64";
    case Dtype::f8_e4m3: return "F8_E4M3";
    case Dtype::f8_e5m2: return "F8_E5M2";
  }
  return "?";
}

std::uint64_t read_u64_le(const std::byte* p) {
  std::uint64_t v = 0;
  for (int k = 7; k >= 0; --k) v = (v << 8) | static_cast<std::uint8_t>(p[k]);
  return v;
}

}  // namespace

void parse_safetensors(std::span<const std::byte> bytes, const std::filesystem::path& file, TensorFile& out) {
  const std::uint64_t size = bytes.size();
  if (size < 8) throw FileError(file, "", 0, "too short for a safetensors header (" + std::to_string(size) + " bytes)");
  const std::uint64_t n = read_u64_le(bytes.data());
  if (n > size - 8)
    throw FileError(file, "", 0, "header length " + std::to_string(n) + " runs past the end of the file (" +
                                     std::to_string(size) + " bytes)");
  if (n > max_header) throw FileError(file, "", 0, "header length " + std::to_string(n) + " exceeds 100 MB");
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), n);
  json header;
  try {
    header = parse_json_text(text);
  } catch (const JsonTextError& e) {
    throw FileError(file, "", 8 + std::min<std::uint64_t>(e.byte(), n), std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) throw FileError(file, "", 8, "header is not a JSON object");

  const std::uint64_t data_start = 8 + n;
  const std::uint64_t data_size = size - data_start;
  // Where a tensor's key appears in the header, for messages about it: searched only when there is a
  // message to give (a search per tensor would make reading a header of many tensors quadratic).
  const auto key_offset = [&](const std::string& name) -> std::uint64_t {
    const std::size_t at = text.find(json(name).dump());
    return 8 + (at == std::string_view::npos ? 0 : at);
  };
  struct Span {
    std::uint64_t begin, end;
    std::string name;
  };
  std::vector<Span> spans;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) throw FileError(file, "", key_offset(name), "__metadata__ is not an object");
      for (const auto& [k, v] : info.items())
        if (!v.is_string()) throw FileError(file, "", key_offset(k), "__metadata__ value of '" + k + "' is not a string");
      continue;
    }
    // A lambda may not capture a structured binding before C++20's P1091 (clang 16 implements it, clang 14
    // does not): `fail` takes the name through a reference of its own.
    const std::string& tensor = name;
    const auto fail = [&](const std::string& why) { return FileError(file, tensor, key_offset(tensor), why); };
    if (!info.is_object()) throw fail("entry is not an object");
    if (!info.contains("dtype") || !info["dtype"].is_string()) throw fail("no 'dtype' string");
    if (!info.contains("shape") || !info["shape"].is_array()) throw fail("no 'shape' array");
    if (!info.contains("data_offsets") || !info["data_offsets"].is_array() || info["data_offsets"].size() != 2)
      throw fail("no 'data_offsets' pair");
    const std::string dtype = info["dtype"];
    const std::optional<Dtype> ft = float_dtype(dtype);
    const std::optional<std::uint64_t> other = other_dtype_size(dtype);
    if (!ft && !other)
      throw fail("unknown dtype '" + dtype + "' (expected F16, BF16, F32, F64, F8_E4M3, F8_E5M2, or an integer/bool type)");
    const std::uint64_t esize = ft ? element_size(*ft) : *other;
    TensorEntry e;
    e.name = name;
    std::uint64_t count = 1;
    for (const json& d : info["shape"]) {
      if (!d.is_number_unsigned()) throw fail("shape has an entry that is not a non-negative integer: " + d.dump());
      const std::uint64_t v = d.get<std::uint64_t>();
      if (v != 0 && count > std::numeric_limits<std::uint64_t>::max() / esize / v)
        throw fail("shape's element count overflows 64 bits");
      count *= v;
      e.shape.push_back(v);
    }
    const json& offs = info["data_offsets"];
    if (!offs[0].is_number_unsigned() || !offs[1].is_number_unsigned())
      throw fail("data_offsets are not non-negative integers: " + offs.dump());
    const std::uint64_t begin = offs[0], end = offs[1];
    if (begin > end) throw fail("data_offsets begin " + std::to_string(begin) + " > end " + std::to_string(end));
    if (end > data_size)
      throw FileError(file, name, key_offset(name),
                      "data_offsets end " + std::to_string(end) + " past the data's " + std::to_string(data_size) +
                          " bytes (truncated file?)");
    if (end - begin != count * esize)
      throw FileError(file, name, data_start + begin,
                      "data_offsets span " + std::to_string(end - begin) + " bytes but the shape needs " +
                          std::to_string(count * esize));
    spans.push_back({begin, end, name});
    if (!ft) {
      out.skipped.push_back(name + " (" + dtype + ")");
      continue;
    }
    e.dtype = *ft;
    e.count = count;
    e.data_offset = data_start + begin;
    e.data = bytes.subspan(data_start + begin, end - begin);
    out.tensors.push_back(std::move(e));
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  for (std::size_t i = 1; i < spans.size(); ++i)
    if (spans[i].begin < spans[i - 1].end)
      throw FileError(file, spans[i].name, data_start + spans[i].begin,
                      "data overlaps tensor '" + spans[i - 1].name + "'");
  // The file order: by data offset, as the safetensors library lays them out.
  std::sort(out.tensors.begin(), out.tensors.end(),
            [](const TensorEntry& a, const TensorEntry& b) { return a.data_offset < b.data_offset; });
}

TensorFile read_safetensors(const std::filesystem::path& file) {
  TensorFile f;
  f.path = file;
  f.mapping = std::make_unique<MappedFile>(file);
  parse_safetensors(f.mapping->bytes(), file, f);
  return f;
}

std::vector<FloatTensor> read_safetensors_f32(const std::filesystem::path& file) {
  const TensorFile f = read_safetensors(file);
  std::vector<FloatTensor> out;
  for (const TensorEntry& e : f.tensors) {
    if (e.dtype == Dtype::f64)
      throw FileError(file, e.name, e.data_offset, "F64 tensor: not every double is a float32 (read it as F64)");
    FloatTensor t;
    t.name = e.name;
    for (const std::uint64_t d : e.shape) t.shape.push_back(static_cast<std::size_t>(d));
    t.values.resize(e.count);
    decode_floats(e.dtype, false, e.data.data(), t.values);
    out.push_back(std::move(t));
  }
  return out;
}

void write_safetensors(const std::filesystem::path& file, const std::vector<FloatTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  std::set<std::string> names;
  std::uint64_t offset = 0;
  for (const FloatTensor& t : tensors) {
    if (t.name == "__metadata__" || !names.insert(t.name).second)
      throw std::invalid_argument("write_safetensors: duplicate or reserved tensor name '" + t.name + "'");
    std::size_t count = 1;
    for (const std::size_t d : t.shape) count *= d;
    if (count != t.values.size())
      throw std::invalid_argument("write_safetensors: tensor '" + t.name + "' has shape of " + std::to_string(count) +
                                  " elements but " + std::to_string(t.values.size()) + " values");
    const std::uint64_t bytes = count * 4;
    header[t.name] = {{"dtype", dtype_name(Dtype::f32)}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<std::byte> out(8 + text.size() + offset);
  const std::uint64_t n = text.size();
  for (int k = 0; k < 8; ++k) out[static_cast<std::size_t>(k)] = static_cast<std::byte>((n >> (8 * k)) & 0xff);
  std::memcpy(out.data() + 8, text.data(), text.size());
  std::size_t at = 8 + text.size();
  for (const FloatTensor& t : tensors) {
    if (!t.values.empty()) std::memcpy(out.data() + at, t.values.data(), t.values.size() * 4);
    at += t.values.size() * 4;
  }
  write_bytes_atomically(file, out);
}

}  // namespace mpverify::io
