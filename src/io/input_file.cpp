#include "io/input_file.h"

#include <sys/stat.h>

#include <stdexcept>

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
  require_regular_file(file);
  return std::ifstream(file, mode | std::ios::in);
}

}  // namespace mpverify::io
