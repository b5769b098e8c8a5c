// The one error type of the tensor readers: a file that cannot be read as
// what it claims to be. The message names the file, the tensor (or "header"
// when the damage is before any tensor) and the byte offset where the reader
// found the problem, so that a user can open the file at that offset.
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace mpverify::io {

class FileError : public std::runtime_error {
 public:
  FileError(std::filesystem::path file, std::string tensor, std::uint64_t offset, std::string reason);

  const std::filesystem::path& file() const { return file_; }
  const std::string& tensor() const { return tensor_; }  // "" when the problem is in the file's header
  std::uint64_t offset() const { return offset_; }
  const std::string& reason() const { return reason_; }

 private:
  std::filesystem::path file_;
  std::string tensor_;
  std::uint64_t offset_ = 0;
  std::string reason_;
};

}  // namespace mpverify::io
