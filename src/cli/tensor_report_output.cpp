#include "cli/tensor_report_output.h"

#include <cmath>
#include <iostream>

#include "analysis/scaled_rounding.h"
#include "cli/commands.h"
#include "record/run_log.h"

namespace mpverify::cli {

void emit(const std::string& file, const std::string& content) {
  if (file.empty()) std::cout << content;
  else record::write_file_atomically(file, content);
}

std::vector<double> parse_scales(const std::string& text, const std::string& option) {
  std::vector<double> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string term = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    double v = 0;
    try {
      std::size_t used = 0;
      if (term.starts_with("2^")) {
        const int k = std::stoi(term.substr(2), &used);
        used += 2;
        v = std::ldexp(1.0, k);
      } else {
        v = std::stod(term, &used);
      }
      if (used != term.size()) throw std::invalid_argument("trailing text");
    } catch (const std::exception&) {
      throw UsageError(option + ": '" + term + "' is not a number (give e.g. 1,8,64,2^16)");
    }
    try {
      analysis::check_scale(v);
    } catch (const std::invalid_argument& e) {
      throw UsageError(option + ": " + e.what());
    }
    out.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

nlohmann::json failures_json(const std::vector<analysis::ReadFailure>& failures) {
  nlohmann::json j = nlohmann::json::array();
  for (const analysis::ReadFailure& f : failures)
    j.push_back({{"file", f.file}, {"tensor", f.tensor}, {"offset", f.offset}, {"reason", f.reason}});
  return j;
}

void refuse_unreadable(const std::string& command, const std::vector<analysis::ReadFailure>& failures, bool skip) {
  if (failures.empty()) return;
  for (const analysis::ReadFailure& f : failures)
    std::cerr << "mpverify " << command << ": " << (skip ? "skipped: " : "") << failure_line(f) << "\n";
  if (skip) return;
  throw UsageError(std::to_string(failures.size()) + (failures.size() == 1 ? " file" : " files") +
                   " could not be read (listed above), and nothing was written: repair or remove " +
                   (failures.size() == 1 ? "it" : "them") + ", or pass --skip-unreadable to " + command +
                   " the rest (the outputs then list what was skipped)");
}

std::string failure_line(const analysis::ReadFailure& f) {
  std::string s = f.file;
  s += ": ";
  if (f.tensor.empty()) {
    s += "header";
  } else {
    s += "tensor '";
    s += f.tensor;
    s += "'";
  }
  s += ", byte offset ";
  s += std::to_string(f.offset);
  s += ": ";
  s += f.reason;
  return s;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

}  // namespace mpverify::cli
