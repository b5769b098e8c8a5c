// A whole file mapped read-only into memory, so that a dump larger than the
// machine's free memory can still be read: pages come from the page cache on
// demand and can be dropped again by the kernel. The mapping is advised as
// sequential (read-ahead, early reuse of read pages).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

namespace mpverify::io {

class MappedFile {
 public:
  // Throws io::FileError (offset 0) when the file cannot be opened or mapped.
  explicit MappedFile(const std::filesystem::path& file);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  std::uint64_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void release() noexcept;  // unmaps (and unregisters) what this object holds

  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace mpverify::io
