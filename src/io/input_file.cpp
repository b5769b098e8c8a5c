#include "io/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace mpverify::io {

std::string not_a_regular_file(const std::filesystem::path& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return "";  // missing or unreadable: the open says which
  if (S_ISREG(st.st_mode)) return "";
  if (S_ISFIFO(st.st_mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  if (S_ISDIR(st.st_mode)) return "a directory";
  return "not a regular file";
}

void require_regular_file(const std::filesystem::path& file) {
  const std::string what = not_a_regular_file(file);
  if (!what.empty())
    throw std::runtime_error(file.string() + ": is " + what + ", not a regular file; mpverify reads only regular "
                             "files (links to them are followed)");
}

std::ifstream open_input_file(const std::filesystem::path& file, std::ios::openmode mode) {
  require_regular_file(file);  // names what the file is, before anything is opened
  // The check above and an open by name are two steps, between which the name could be swapped for a FIFO.
  // So the file is opened without blocking (a FIFO opens at once for reading), checked again as opened, and
  // the stream is opened on that very file through /proc/self/fd (which reopens the file, not the name).
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {  // missing or unreadable: a stream that failed to open, which the caller reports
    std::ifstream missing;
    missing.setstate(std::ios::failbit);
    return missing;
  }
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  std::ifstream in;
  if (regular) in.open("/proc/self/fd/" + std::to_string(fd), mode | std::ios::in);
  ::close(fd);
  if (!regular)
    throw std::runtime_error(file.string() + ": is not a regular file once opened (it was replaced while it was "
                             "being opened); mpverify reads only regular files");
  if (!in.is_open()) return std::ifstream(file, mode | std::ios::in);  // no /proc: the name, checked just above
  return in;
}

}  // namespace mpverify::io
