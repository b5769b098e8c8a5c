#include "data/sklearn_digits.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdlib>
#include <string_view>
#include <system_error>
#include <vector>

#include "data/data_file_error.h"
#include "data/stratified_split.h"

namespace mpverify::data {

namespace {

constexpr std::size_t kPixels = static_cast<std::size_t>(kSklearnDigitsSide) * kSklearnDigitsSide;
constexpr int kMaxCount = 16;  // each pixel counts set bits in a 4 x 4 block of the 32 x 32 bitmap

[[noreturn]] void fail(const std::filesystem::path& file, std::size_t line, const std::string& what) {
  std::string message = "8x8 digits file ";
  message += file.string();
  if (line) {
    message += " line ";
    message += std::to_string(line);
  }
  message += ": ";
  message += what;
  message += " (expected scikit-learn's digits.csv.gz: 1797 lines of 64 pixel counts 0..16 and a label 0..9)";
  throw DataFileError(message);
}

std::string read_gz(const std::filesystem::path& file) {
  gzFile gz = gzopen(file.c_str(), "rb");
  if (!gz) fail(file, 0, "cannot open it");
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const int got = gzread(gz, buffer, sizeof buffer);
    if (got < 0) {
      int code = 0;
      const std::string reason = gzerror(gz, &code);
      gzclose(gz);
      fail(file, 0, "cannot decompress it: " + reason);
    }
    if (got == 0) break;
    text.append(buffer, static_cast<std::size_t>(got));
  }
  gzclose(gz);
  return text;
}

}  // namespace

std::filesystem::path sklearn_digits_default_path() {
  if (const char* env = std::getenv("MPVERIFY_SKLEARN_DIGITS"); env && *env) return env;
  return "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz";
}

std::string sklearn_digits_install_command() { return "apt-get install -y python3-sklearn"; }

Dataset load_sklearn_digits(const std::filesystem::path& path_in) {
  std::filesystem::path file = path_in.empty() ? sklearn_digits_default_path() : path_in;
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) file /= "digits.csv.gz";
  if (!std::filesystem::is_regular_file(file, ec)) {
    std::string message = "8x8 digits not found: ";
    message += file.string();
    message += " does not exist. Install them with `";
    message += sklearn_digits_install_command();
    message += "` (Debian's scikit-learn; or run .ci/install-deps), or point --data-dir or MPVERIFY_SKLEARN_DIGITS at "
               "digits.csv.gz";
    throw DataFileError(message);
  }
  const std::string text = read_gz(file);
  Dataset d;
  d.height = d.width = kSklearnDigitsSide;
  d.channels = 1;
  d.classes = 10;
  std::size_t line = 0, start = 0;
  std::array<std::size_t, 10> counts{};
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view row(text.data() + start, end - start);
    if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
    start = end + 1;
    ++line;
    std::size_t field = 0, pos = 0;
    for (;; ++field) {
      const std::size_t comma = std::min(row.find(',', pos), row.size());
      const std::string_view token = row.substr(pos, comma - pos);
      int v = 0;
      const auto [p, err] = std::from_chars(token.data(), token.data() + token.size(), v);
      if (token.empty() || err != std::errc() || p != token.data() + token.size())
        fail(file, line, "field " + std::to_string(field + 1) + " '" + std::string(token) + "' is not an integer");
      if (field < kPixels) {
        if (v < 0 || v > kMaxCount)
          fail(file, line, "pixel " + std::to_string(field + 1) + " is " + std::to_string(v) + ", outside 0..16");
        d.images.push_back(static_cast<float>(v) / static_cast<float>(kMaxCount));  // exact: a power-of-two divisor
      } else if (field == kPixels) {
        if (v < 0 || v > 9) fail(file, line, "label " + std::to_string(v) + " is outside 0..9");
        d.labels.push_back(v);
        ++counts[static_cast<std::size_t>(v)];
      } else {
        fail(file, line, "more than 65 fields");
      }
      if (comma == row.size()) break;
      pos = comma + 1;
    }
    if (field != kPixels) fail(file, line, "has " + std::to_string(field + 1) + " fields, expected 65");
  }
  if (d.size() != kSklearnDigitsImages || counts != kSklearnDigitsCounts)
    fail(file, 0, "holds " + std::to_string(d.size()) + " images (or other per-digit counts), expected 1797");
  validate(d);
  return d;
}

Split sklearn_digits_split(const std::filesystem::path& path, std::uint64_t seed) {
  return stratified_split(load_sklearn_digits(path), kSklearnDigitsTestSize, seed);
}

}  // namespace mpverify::data
