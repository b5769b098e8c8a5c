// What the fuzz targets share: the input as bytes, text or parts, a scratch
// directory for readers that take a path, and standard streams swapped for
// the duration of a call.
//
// A target catches exactly the error types its reader documents for bad
// input; anything else that escapes (another exception, a crash, a sanitizer
// report, a timeout, an allocation over -malloc_limit_mb) is a finding.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace mpverify::fuzz {

inline std::span<const std::byte> bytes_of(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const std::byte*>(data), size};
}

inline std::string_view text_of(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The input cut at every NUL byte: the parts of a multi-file input (no text
// format read here holds a NUL, so the separator costs no coverage).
inline std::vector<std::string_view> parts_of(std::string_view text) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (std::size_t at; (at = text.find('\0', start)) != std::string_view::npos; start = at + 1)
    parts.push_back(text.substr(start, at - start));
  parts.push_back(text.substr(start));
  return parts;
}

// A directory of this process's own under the system's temporary directory,
// emptied for each input (fresh()) and removed at exit.
class ScratchDirectory {
 public:
  ScratchDirectory()
      : path_(std::filesystem::temp_directory_path() / ("mpverify-fuzz-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~ScratchDirectory() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;

  // The directory, emptied.
  const std::filesystem::path& fresh() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    std::filesystem::create_directories(path_);
    return path_;
  }

 private:
  std::filesystem::path path_;
};

inline ScratchDirectory& scratch() {
  static ScratchDirectory dir;
  return dir;
}

inline void write_file(const std::filesystem::path& file, std::string_view content) {
  std::filesystem::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  if (!out) {
    std::cerr << "fuzz harness: cannot write " << file << "\n";
    std::abort();
  }
}

// Standard input replaced by `text` and standard output and error discarded
// while it lives (for code that reads std::cin and prints).
class StandardStreams {
 public:
  explicit StandardStreams(std::string text)
      : in_(std::move(text)),
        old_in_(std::cin.rdbuf(in_.rdbuf())),
        old_out_(std::cout.rdbuf(sink_.rdbuf())),
        old_err_(std::cerr.rdbuf(sink_.rdbuf())) {}
  ~StandardStreams() {
    std::cin.rdbuf(old_in_);
    std::cout.rdbuf(old_out_);
    std::cerr.rdbuf(old_err_);
    std::cin.clear();
    std::cout.clear();
  }
  StandardStreams(const StandardStreams&) = delete;
  StandardStreams& operator=(const StandardStreams&) = delete;

 private:
  std::istringstream in_;
  std::ostringstream sink_;
  std::streambuf* old_in_;
  std::streambuf* old_out_;
  std::streambuf* old_err_;
};

}  // namespace mpverify::fuzz
