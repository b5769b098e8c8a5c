#include "io/file_error.h"

#include <utility>

namespace mpverify::io {

namespace {

std::string compose(const std::filesystem::path& file, const std::string& tensor, std::uint64_t offset,
                    const std::string& reason) {
  std::string m = file.string();
  m += ": ";
  if (tensor.empty()) {
    m += "header";
  } else {
    m += "tensor '";
    m += tensor;
    m += "'";
  }
  m += ", byte offset ";
  m += std::to_string(offset);
  m += ": ";
  m += reason;
  return m;
}

}  // namespace

FileError::FileError(std::filesystem::path file, std::string tensor, std::uint64_t offset, std::string reason)
    : std::runtime_error(compose(file, tensor, offset, reason)),
      file_(std::move(file)),
      tensor_(std::move(tensor)),
      offset_(offset),
      reason_(std::move(reason)) {}

}  // namespace mpverify::io
