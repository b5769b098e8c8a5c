#include "report/output_files.h"

#include "record/run_log.h"

namespace mpverify::report {

namespace fs = std::filesystem;

fs::path figure_path(const fs::path& report, std::string_view what, std::string_view extension) {
  std::string name = report.stem().string();
  name += '-';
  name += what;
  name += extension;
  return report.parent_path() / name;
}

void write_output(const fs::path& path, const std::string& content, std::vector<fs::path>& written) {
  if (!path.parent_path().empty()) fs::create_directories(path.parent_path());
  record::write_file_atomically(path, content);
  written.push_back(path);
}

}  // namespace mpverify::report
