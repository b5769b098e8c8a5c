// Every file under a directory, by its path relative to it, with its bytes: how the determinism and
// kill-and-resume tests compare two output trees byte for byte.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace mpverify::test {

inline std::string file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::map<std::string, std::string> files_under(const std::filesystem::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files[std::filesystem::relative(e.path(), dir).string()] = file_bytes(e.path());
  return files;
}

// "" when the files under dir are `reference` (files_under of another tree) byte for byte, else the
// first difference: a file missing, one that differs, or the number of files.
inline std::string tree_difference(const std::map<std::string, std::string>& reference,
                                   const std::filesystem::path& dir) {
  const std::map<std::string, std::string> files = files_under(dir);
  for (const auto& [name, bytes] : reference) {
    const auto it = files.find(name);
    if (it == files.end()) return name + " is missing";
    if (it->second != bytes) return name + " differs";
  }
  if (files.size() != reference.size())
    return std::to_string(files.size()) + " files instead of " + std::to_string(reference.size());
  return "";
}

}  // namespace mpverify::test
