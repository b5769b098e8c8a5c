#include "io/tensor_directory.h"

#include <algorithm>
#include <system_error>

#include "io/file_error.h"
#include "io/tensor_file.h"

namespace mpverify::io {

std::vector<FoundFile> find_tensor_files(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) throw FileError(path, "", 0, "no such file or directory");
  if (!fs::is_directory(st)) return {FoundFile{path, path.filename().string()}};
  std::vector<FoundFile> out;
  fs::recursive_directory_iterator it(path, fs::directory_options::none, ec);
  if (ec) throw FileError(path, "", 0, "cannot list the directory: " + ec.message());
  for (const fs::recursive_directory_iterator end; it != end; it.increment(ec)) {
    if (ec) throw FileError(path, "", 0, "cannot list the directory: " + ec.message());
    if (it->is_regular_file(ec) && is_tensor_file_name(it->path()))
      out.push_back({it->path(), fs::relative(it->path(), path).generic_string()});
  }
  std::sort(out.begin(), out.end(), [](const FoundFile& a, const FoundFile& b) { return a.relative < b.relative; });
  return out;
}

}  // namespace mpverify::io
