#include "io/npy.h"

#include <cstring>
#include <limits>
#include <optional>
#include <string_view>

#include "io/atomic_write.h"
#include "io/mapped_file.h"

namespace mpverify::io {

namespace {

constexpr std::string_view magic = "\x93NUMPY";

// A reader of the header's Python dict literal, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// Only what np.save writes is accepted: string keys; string, bool and tuple-
// of-non-negative-int values.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::filesystem::path& file, const std::string& tensor,
               std::uint64_t text_offset)
      : s_(text), file_(file), tensor_(tensor), base_(text_offset) {}

  struct Fields {
    std::optional<std::string> descr;
    std::optional<bool> fortran_order;
    std::optional<std::vector<std::uint64_t>> shape;
  };

  Fields parse() {
    Fields f;
    skip_space();
    expect('{');
    for (;;) {
      skip_space();
      if (peek() == '}') { ++i_; break; }
      const std::size_t key_at = i_;
      const std::string key = string_literal();
      skip_space();
      expect(':');
      skip_space();
      if (key == "descr") f.descr = string_literal();
      else if (key == "fortran_order") f.fortran_order = bool_literal();
      else if (key == "shape") f.shape = int_tuple();
      else fail(key_at, "unexpected key '" + key + "' (expected descr, fortran_order, shape)");
      skip_space();
      if (peek() == ',') { ++i_; continue; }
      skip_space();
      expect('}');
      break;
    }
    skip_space();
    if (i_ != s_.size()) fail(i_, "text after the header's closing brace");
    if (!f.descr) fail(0, "header has no 'descr'");
    if (!f.fortran_order) fail(0, "header has no 'fortran_order'");
    if (!f.shape) fail(0, "header has no 'shape'");
    return f;
  }

 private:
  [[noreturn]] void fail(std::size_t at, const std::string& why) const {
    throw FileError(file_, tensor_, base_ + at, "bad .npy header: " + why);
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    if (peek() != c) fail(i_, std::string("expected '") + c + "'");
    ++i_;
  }
  std::string string_literal() {
    const char q = peek();
    if (q != '\'' && q != '"') fail(i_, "expected a quoted string");
    const std::size_t end = s_.find(q, i_ + 1);
    if (end == std::string_view::npos) fail(i_, "unterminated string");
    std::string out(s_.substr(i_ + 1, end - i_ - 1));
    i_ = end + 1;
    return out;
  }
  bool bool_literal() {
    if (s_.substr(i_, 4) == "True") { i_ += 4; return true; }
    if (s_.substr(i_, 5) == "False") { i_ += 5; return false; }
    fail(i_, "expected True or False");
  }
  std::vector<std::uint64_t> int_tuple() {
    expect('(');
    std::vector<std::uint64_t> dims;
    for (;;) {
      skip_space();
      if (peek() == ')') { ++i_; return dims; }
      const std::size_t at = i_;
      if (peek() < '0' || peek() > '9') fail(at, "expected a non-negative dimension");
      std::uint64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        const auto digit = static_cast<std::uint64_t>(peek() - '0');
        if (v > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) fail(at, "dimension too large");
        v = v * 10 + digit;
        ++i_;
      }
      if (peek() == 'L') ++i_;  // Python 2 writers
      dims.push_back(v);
      skip_space();
      if (peek() == ',') { ++i_; continue; }
      skip_space();
      expect(')');
      return dims;
    }
  }

  std::string_view s_;
  std::size_t i_ = 0;
  const std::filesystem::path& file_;
  const std::string& tensor_;
  std::uint64_t base_;
};

struct DescrType {
  Dtype dtype;
  bool big_endian;
};

std::optional<DescrType> parse_descr(const std::string& d) {
  if (d == "bfloat16" || d == "<V2" || d == "|V2") return DescrType{Dtype::bf16, false};
  if (d.size() != 3) return std::nullopt;
  bool big = false;
  if (d[0] == '>') big = true;
  else if (d[0] != '<' && d[0] != '=') return std::nullopt;
  if (d[1] != 'f') return std::nullopt;
  if (d[2] == '2') return DescrType{Dtype::f16, big};
  if (d[2] == '4') return DescrType{Dtype::f32, big};
  if (d[2] == '8') return DescrType{Dtype::f64, big};
  return std::nullopt;
}

// numpy's integer and boolean type strings: byte order, kind (i, u or b), item size.
bool is_integer_or_bool(const std::string& d) {
  return d.size() >= 3 && std::string_view("<>=|").find(d[0]) != std::string_view::npos &&
         (d[1] == 'i' || d[1] == 'u' || d[1] == 'b') &&
         d.find_first_not_of("0123456789", 2) == std::string::npos;
}

std::uint32_t read_le(const std::byte* p, int n) {
  std::uint32_t v = 0;
  for (int k = n - 1; k >= 0; --k) v = (v << 8) | static_cast<std::uint8_t>(p[k]);
  return v;
}

std::vector<std::byte> header_bytes(const std::vector<std::size_t>& shape, const char* descr) {
  std::string h = "{'descr': '";
  h += descr;
  h += "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) h += ", ";
    h += std::to_string(shape[i]);
  }
  if (shape.size() == 1) h += ",";  // Python's one-element tuple: "(3,)"
  h += ")";
  h += ", }";
  // numpy pads with spaces and a final newline so that the data starts at a
  // multiple of 64 bytes.
  const std::size_t total = ((10 + h.size() + 1 + 63) / 64) * 64;
  h.append(total - 10 - h.size() - 1, ' ');
  h += '\n';
  if (h.size() > 65535) throw std::invalid_argument("write_npy: header too long for version 1.0");
  std::vector<std::byte> out(10 + h.size());
  std::memcpy(out.data(), magic.data(), magic.size());
  out[6] = std::byte{1};
  out[7] = std::byte{0};
  out[8] = static_cast<std::byte>(h.size() & 0xff);
  out[9] = static_cast<std::byte>(h.size() >> 8);
  std::memcpy(out.data() + 10, h.data(), h.size());
  return out;
}

template <class T>
std::vector<std::byte> image(std::span<const T> values, const std::vector<std::size_t>& shape, const char* descr) {
  std::size_t count = 1;
  for (const std::size_t d : shape) count *= d;
  if (count != values.size())
    throw std::invalid_argument("write_npy: the shape has " + std::to_string(count) + " elements, the values " +
                                std::to_string(values.size()));
  std::vector<std::byte> out = header_bytes(shape, descr);
  const std::size_t at = out.size();
  out.resize(at + values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(out.data() + at, values.data(), values.size() * sizeof(T));
  return out;
}

}  // namespace

TensorEntry parse_npy(std::span<const std::byte> bytes, const std::filesystem::path& file, const std::string& tensor,
                      std::uint64_t base_offset) {
  const std::uint64_t size = bytes.size();
  const auto fail = [&](std::uint64_t at, const std::string& why) -> FileError {
    return FileError(file, tensor, base_offset + at, why);
  };
  if (size < 10) throw fail(0, "too short for an .npy header (" + std::to_string(size) + " bytes, need at least 10)");
  if (std::memcmp(bytes.data(), magic.data(), magic.size()) != 0) throw fail(0, "not an .npy file (bad magic)");
  const int major = static_cast<int>(bytes[6]);
  std::uint64_t header_start = 0, header_len = 0;
  if (major == 1) {
    header_start = 10;
    header_len = read_le(bytes.data() + 8, 2);
  } else if (major == 2 || major == 3) {
    if (size < 12) throw fail(0, "too short for an .npy version 2 header");
    header_start = 12;
    header_len = read_le(bytes.data() + 8, 4);
  } else {
    throw fail(6, "unsupported .npy version " + std::to_string(major) + " (expected 1, 2 or 3)");
  }
  if (header_len > size - header_start)
    throw fail(8, "header length " + std::to_string(header_len) + " runs past the end (" + std::to_string(size) +
                      " bytes)");
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + header_start), header_len);
  const HeaderParser::Fields f = HeaderParser(text, file, tensor, base_offset + header_start).parse();

  TensorEntry e;
  e.name = tensor;
  const auto dt = parse_descr(*f.descr);
  if (!dt) {
    FileError error = fail(header_start, "unsupported dtype '" + *f.descr +
                                             "' (accepted: <f2 <f4 <f8, big-endian >f2 >f4 >f8, bfloat16 as <V2)");
    if (is_integer_or_bool(*f.descr)) throw NonFloatArray(std::move(error), *f.descr);
    throw error;
  }
  e.dtype = dt->dtype;
  e.big_endian = dt->big_endian;
  e.fortran_order = *f.fortran_order;
  e.shape = *f.shape;
  const std::uint64_t esize = element_size(e.dtype);
  std::uint64_t count = 1;
  for (const std::uint64_t d : e.shape) {
    if (d != 0 && count > std::numeric_limits<std::uint64_t>::max() / esize / d)
      throw fail(header_start, "shape's element count overflows 64 bits");
    count *= d;
  }
  e.count = count;
  const std::uint64_t data_start = header_start + header_len;
  const std::uint64_t need = count * esize;
  if (need > size - data_start)
    throw fail(data_start, "data needs " + std::to_string(need) + " bytes but only " +
                               std::to_string(size - data_start) + " follow the header (truncated file?)");
  if (need < size - data_start)
    throw fail(data_start + need, std::to_string(size - data_start - need) + " bytes after the array's data");
  e.data_offset = base_offset + data_start;
  e.data = bytes.subspan(data_start, need);
  return e;
}

DoubleArray read_npy_f64(const std::filesystem::path& file) {
  const MappedFile m(file);
  const TensorEntry e = parse_npy(m.bytes(), file, file.stem().string());
  DoubleArray a;
  for (const std::uint64_t d : e.shape) a.shape.push_back(static_cast<std::size_t>(d));
  a.values.resize(e.count);
  decode_doubles(e.dtype, e.big_endian, e.data.data(), a.values);
  if (e.fortran_order && e.shape.size() > 1)
    a.values = fortran_to_c_order(std::span<const double>(a.values), e.shape);
  return a;
}

std::vector<std::byte> npy_image(std::span<const float> values, const std::vector<std::size_t>& shape) {
  return image(values, shape, "<f4");
}
std::vector<std::byte> npy_image(std::span<const double> values, const std::vector<std::size_t>& shape) {
  return image(values, shape, "<f8");
}

std::vector<std::byte> npy_image(std::span<const std::uint8_t> values, const std::vector<std::size_t>& shape) {
  return image(values, shape, "|u1");
}

std::vector<std::byte> npy_header_f32(const std::vector<std::size_t>& shape) { return header_bytes(shape, "<f4"); }

void write_npy(const std::filesystem::path& file, std::span<const float> values, std::vector<std::size_t> shape) {
  write_bytes_atomically(file, npy_image(values, shape));
}
void write_npy(const std::filesystem::path& file, std::span<const double> values, std::vector<std::size_t> shape) {
  write_bytes_atomically(file, npy_image(values, shape));
}

}  // namespace mpverify::io
