#include "data/kjv_text.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <span>
#include <stdexcept>
#include <vector>

#include "io/input_file.h"
#include "data/data_file_error.h"
#include "data/lzw.h"

namespace mpverify::data {

namespace {

constexpr std::size_t kHeaderBytes = 92;  // magic, version, description, window size, window count
constexpr std::size_t kLzwHeaderBytes = 3;

[[noreturn]] void fail(const std::filesystem::path& file, const std::string& what) {
  std::string message = "KJV file ";
  message += file.string();
  message += ": ";
  message += what;
  message += " (expected bible-kjv-text's /usr/lib/bible.data: \"EC02\", windows of LZW-compressed text); "
             "reinstall with `";
  message += kjv_install_command();
  message += "`";
  throw DataFileError(message);
}

std::uint32_t big_endian_u32(std::span<const std::uint8_t> bytes, std::size_t at) {
  return std::uint32_t{bytes[at]} << 24 | std::uint32_t{bytes[at + 1]} << 16 | std::uint32_t{bytes[at + 2]} << 8 |
         std::uint32_t{bytes[at + 3]};
}

std::vector<std::uint8_t> read_bytes(const std::filesystem::path& file) {
  std::ifstream in = io::open_input_file(file);
  if (!in || std::filesystem::is_directory(file)) {
    std::string message = "KJV text not found: cannot read ";
    message += file.string();
    message += ". Install it with `";
    message += kjv_install_command();
    message += "` (or run .ci/install-deps), or point the file argument or MPVERIFY_KJV_FILE at a copy of that "
               "package's /usr/lib/bible.data";
    throw DataFileError(message);
  }
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The N + 1 window offsets, checked to increase and to end at the file's end.
std::vector<std::size_t> window_offsets(const std::filesystem::path& file, std::span<const std::uint8_t> bytes) {
  if (bytes.size() < kHeaderBytes) fail(file, "shorter than its 92-byte header");
  if (bytes[0] != 'E' || bytes[1] != 'C' || bytes[2] != '0' || bytes[3] != '2') {
    fail(file, "does not begin with \"EC02\"");
  }
  const std::uint32_t count = big_endian_u32(bytes, 88);
  const std::size_t table_end = kHeaderBytes + 4 * (std::size_t{count} + 1);
  if (count == 0 || table_end + kLzwHeaderBytes > bytes.size()) {
    fail(file, "its window count " + std::to_string(count) + " does not fit the file");
  }
  std::vector<std::size_t> offsets;
  for (std::size_t k = 0; k <= count; ++k) offsets.push_back(big_endian_u32(bytes, kHeaderBytes + 4 * k));
  if (offsets.front() < table_end + kLzwHeaderBytes) fail(file, "window 0 begins inside the header");
  for (std::size_t k = 1; k <= count; ++k) {
    if (offsets[k] <= offsets[k - 1]) fail(file, "window " + std::to_string(k - 1) + " is empty or out of order");
  }
  if (offsets.back() != bytes.size()) {
    fail(file, "the window table ends at byte " + std::to_string(offsets.back()) + ", the file at " +
                   std::to_string(bytes.size()));
  }
  return offsets;
}

std::string decode_windows(const std::filesystem::path& file, std::span<const std::uint8_t> bytes) {
  const std::vector<std::size_t> offsets = window_offsets(file, bytes);
  const std::size_t window = big_endian_u32(bytes, 84);
  const std::size_t count = offsets.size() - 1;
  std::string text;
  try {
    // One compress(1) header, just before window 0, serves every window.
    const LzwHeader header = lzw_header(bytes.subspan(offsets.front() - kLzwHeaderBytes, kLzwHeaderBytes));
    for (std::size_t k = 0; k < count; ++k) {
      // A window may hold no more than the window size: the bound stops a hostile stream (LZW can
      // claim gigabytes from a few hundred KiB) before it is decoded rather than after.
      const std::string part = lzw_decode(bytes.subspan(offsets[k], offsets[k + 1] - offsets[k]), header, window);
      const bool last = k + 1 == count;
      if (last ? part.empty() || part.size() > window : part.size() != window) {
        fail(file, "window " + std::to_string(k) + " decodes to " + std::to_string(part.size()) +
                       " bytes, not the window size " + std::to_string(window));
      }
      text += part;
    }
  } catch (const std::invalid_argument& e) {
    fail(file, e.what());
  }
  return text;
}

// The length of the reference that begins `line` ("Ge1:1", "1Sa3:10", "SSol1:1"), 0 if none.
std::size_t reference_length(std::string_view line) {
  std::size_t i = 0;
  const auto is = [&](char lo, char hi) { return i < line.size() && line[i] >= lo && line[i] <= hi; };
  if (is('1', '3')) ++i;
  if (!is('A', 'Z')) return 0;
  ++i;
  while (is('a', 'z') || is('A', 'Z')) ++i;
  for (char separator : {':', ' '}) {
    const std::size_t digits = i;
    while (is('0', '9')) ++i;
    if (i == digits || i >= line.size() || line[i] != separator) return 0;
    ++i;
  }
  return i - 1;  // without the space
}

// The file a path argument names: the default for none, bible.data inside a directory.
std::filesystem::path resolve(const std::filesystem::path& path) {
  std::filesystem::path file = path.empty() ? kjv_default_file() : path;
  if (std::filesystem::is_directory(file)) file /= "bible.data";
  return file;
}

}  // namespace

std::filesystem::path kjv_default_file() {
  if (const char* env = std::getenv("MPVERIFY_KJV_FILE"); env && *env) return env;
  return "/usr/lib/bible.data";
}

std::string kjv_install_command() { return "apt-get install -y bible-kjv-text"; }

std::string read_kjv_data(const std::filesystem::path& path) {
  const std::filesystem::path file = resolve(path);
  const std::vector<std::uint8_t> bytes = read_bytes(file);
  return decode_windows(file, bytes);
}

std::string kjv_verses(std::string_view raw, std::string_view source) {
  const auto fail_at = [&](std::size_t line, const std::string& what) {
    std::string message = "KJV text ";
    message += source;
    message += " line ";
    message += std::to_string(line);
    message += ": ";
    message += what;
    throw DataFileError(message);
  };
  if (raw.empty() || raw.back() != '\n') {
    fail_at(static_cast<std::size_t>(std::count(raw.begin(), raw.end(), '\n')) + 1, "does not end with a newline");
  }
  std::string verses;
  verses.reserve(raw.size());
  std::size_t begin = raw.find('\n') + 1;  // the title line is dropped
  for (std::size_t line = 2; begin < raw.size(); ++line) {
    const std::size_t end = raw.find('\n', begin);
    const std::string_view text = raw.substr(begin, end - begin);
    const std::size_t reference = reference_length(text);
    if (reference == 0) fail_at(line, "does not begin with a reference such as \"Ge1:1 \"");
    verses.append(text.substr(reference + 1));
    verses += '\n';
    begin = end + 1;
  }
  return verses;
}

std::string load_kjv_verses(const std::filesystem::path& path) {
  const std::filesystem::path file = resolve(path);
  return kjv_verses(read_kjv_data(file), file.string());
}

}  // namespace mpverify::data
