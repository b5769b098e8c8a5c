#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "io/file_error.h"
#include "io/input_file.h"
#include "io/shrunk_mapping.h"

namespace mpverify::io {

MappedFile::MappedFile(const std::filesystem::path& file) : path_(file) {
  if (const std::string what = not_a_regular_file(file); !what.empty())
    throw FileError(file, "", 0, "is " + what + ", not a regular file; only regular files are read");
  // O_NONBLOCK: should the name become a FIFO after the check, the open returns instead of waiting for a
  // writer, and fstat below refuses it.
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw FileError(file, "", 0, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    ::close(fd);
    throw FileError(file, "", 0, err ? std::string("cannot stat: ") + std::strerror(err) : "not a regular file");
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw FileError(file, "", 0, std::string("cannot map: ") + std::strerror(err));
    }
    ::madvise(p, size_, MADV_SEQUENTIAL);
    data_ = static_cast<const std::byte*>(p);
    register_mapping(data_, size_, file);  // a SIGBUS in it then names the file (io/shrunk_mapping.h)
  }
  ::close(fd);  // the mapping keeps the file open
}

void MappedFile::release() noexcept {
  if (!data_) return;
  unregister_mapping(data_);
  ::munmap(const_cast<std::byte*>(data_), size_);
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& o) noexcept
    : path_(std::move(o.path_)), data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

}  // namespace mpverify::io
