#include "analysis/dump_steps.h"

#include <algorithm>
#include <optional>
#include <charconv>
#include <fstream>
#include <sstream>
#include <system_error>

#include <nlohmann/json.hpp>

#include "io/input_file.h"
#include "io/json_text.h"

namespace mpverify::analysis {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kPrefix = "step-";
const char* const kSchema =
    R"(step.json holds an object such as {"step": 10, "scale": 65536.0, "found_inf": false, "skipped": false, "loss": 2.3})";

[[noreturn]] void fail(const fs::path& file, const std::string& what) {
  throw StepLayoutError(file.string() + ": " + what + " (" + kSchema + "; every field is optional)");
}

std::optional<double> number_field(const nlohmann::json& j, const char* key, const fs::path& file) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  if (!j[key].is_number()) fail(file, std::string("\"") + key + "\" is " + j[key].dump() + ", not a number");
  return j[key].get<double>();
}

std::optional<bool> bool_field(const nlohmann::json& j, const char* key, const fs::path& file) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  if (!j[key].is_boolean()) fail(file, std::string("\"") + key + "\" is " + j[key].dump() + ", not true or false");
  return j[key].get<bool>();
}

StepRecord read_step_json(const fs::path& file, std::int64_t step) {
  std::ifstream in = io::open_input_file(file);
  if (!in) fail(file, "cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  std::string why;
  const std::optional<nlohmann::json> parsed = io::try_parse_json_text(text.str(), &why);
  if (!parsed) fail(file, "is not JSON (" + why + ")");
  const nlohmann::json& j = *parsed;
  if (!j.is_object()) fail(file, "is not a JSON object");
  if (const std::optional<double> s = number_field(j, "step", file); s && *s != static_cast<double>(step))
    throw StepLayoutError(file.string() + ": \"step\" is " + j["step"].dump() + " but the directory is step " +
                          std::to_string(step) + " (rename the directory after the step it holds, or fix step.json)");
  StepRecord r;
  r.scale = number_field(j, "scale", file);
  r.loss = number_field(j, "loss", file);
  r.found_inf = bool_field(j, "found_inf", file);
  r.skipped = bool_field(j, "skipped", file);
  return r;
}

}  // namespace

std::optional<std::int64_t> step_number(std::string_view name) {
  if (!name.starts_with(kPrefix) || name.size() == kPrefix.size()) return std::nullopt;
  const std::string_view digits = name.substr(kPrefix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  std::int64_t n = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;  // too many digits
  return n;
}

std::vector<StepDirectory> find_step_directories(const fs::path& dir) {
  std::vector<StepDirectory> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const std::optional<std::int64_t> step = step_number(name);
    if (!step || !e.is_directory(ec)) continue;
    StepDirectory d{*step, name, e.path(), std::nullopt};
    if (const fs::path json = e.path() / "step.json"; fs::exists(json, ec)) d.record = read_step_json(json, *step);
    out.push_back(std::move(d));
  }
  std::sort(out.begin(), out.end(), [](const StepDirectory& a, const StepDirectory& b) {
    return a.step != b.step ? a.step < b.step : a.name < b.name;
  });
  for (std::size_t i = 1; i < out.size(); ++i)
    if (out[i].step == out[i - 1].step)
      throw StepLayoutError((dir / out[i - 1].name).string() + " and " + (dir / out[i].name).string() +
                            " are both step " + std::to_string(out[i].step) + " (keep one of them)");
  return out;
}

std::optional<StepName> split_step_name(const std::string& displayed_name) {
  const std::size_t slash = displayed_name.find('/');
  if (slash == std::string::npos || !step_number(std::string_view(displayed_name).substr(0, slash))) return std::nullopt;
  return StepName{displayed_name.substr(0, slash), displayed_name.substr(slash + 1)};
}

std::string step_file_kind(const std::string& file_within_step) {
  const std::size_t slash = file_within_step.find('/');
  if (slash != std::string::npos) return file_within_step.substr(0, slash);
  return std::filesystem::path(file_within_step).stem().string();
}

std::string dump_kind(const std::string& displayed_name) {
  const std::optional<StepName> in_step = split_step_name(displayed_name);
  if (!in_step) return "";
  return step_file_kind(in_step->within.substr(0, in_step->within.find(':')));
}

bool loss_scaled_kind(const std::string& kind) { return kind == "grads" || kind == "activation_grads"; }

}  // namespace mpverify::analysis
