#include "metrics/ensemble.h"

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "io/input_file.h"
#include "io/json_text.h"

namespace mpverify::metrics {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string quoted(const fs::path& p) {
  std::string s = "'";
  s += p.string();
  s += "'";
  return s;
}

[[noreturn]] void fail(const fs::path& file, const std::string& what) { throw InputError(quoted(file) + ": " + what); }

}  // namespace

std::string read_text_file(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) throw InputError(quoted(file) + " does not exist");
  if (fs::is_directory(file, ec)) fail(file, "is a directory, expected a file");
  std::ifstream in = io::open_input_file(file);
  if (!in) fail(file, "cannot be opened for reading");
  std::ostringstream text;
  if (in.peek() != std::ifstream::traits_type::eof()) text << in.rdbuf();  // an empty file is not a failed read
  return std::move(text).str();  // moved, not copied: the text may be large
}

namespace {

// Whether `text` holds NaN or Infinity outside a string: the token Python's
// json.dump and some loggers write for a non-finite float, which JSON lacks.
bool has_bare_nonfinite_token(const std::string& text) {
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      if (ch == '\\') ++i;
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '"') in_string = true;
    else if (text.compare(i, 3, "NaN") == 0 || text.compare(i, 8, "Infinity") == 0 || text.compare(i, 3, "nan") == 0 ||
             text.compare(i, 3, "inf") == 0)
      return true;
  }
  return false;
}

// Parses one JSON value; the message says where and why it does not parse.
json parse_or_explain(const std::string& text, const fs::path& file, const std::string& where) {
  try {
    return io::parse_json_text(text);
  } catch (const io::JsonTextError& e) {
    std::string m = where;
    if (has_bare_nonfinite_token(text)) {
      m += "holds a literal NaN or Infinity, which JSON does not allow (the run log writes null for a non-finite "
           "value); rewrite it as null";
    } else {
      // The parser stopped at the end when the input ended mid-value.
      const bool at_end = e.byte() >= text.size();
      m += at_end ? "ends in the middle of a JSON value (truncated? a run still writing it, or a copy cut short)"
                  : "is not valid JSON";
      m += " (parser: ";
      m += e.what();
      m += ")";
    }
    fail(file, m);
  }
}

std::string seed_dir_name(std::int64_t seed) { return "seed-" + std::to_string(seed); }

}  // namespace

json read_json_document(const fs::path& file) {
  const std::string text = read_text_file(file);
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) fail(file, "is empty (a run killed while writing it?)");
  json document = parse_or_explain(text, file, "");
  if (!document.is_object()) fail(file, "is not a JSON object");
  return document;
}

std::vector<json> read_json_lines_checked(const fs::path& file) {
  const std::string text = read_text_file(file);
  std::vector<json> records;
  std::size_t start = 0;
  for (std::size_t number = 1; start < text.size(); ++number) {
    std::size_t end = text.find('\n', start);
    const bool last_unterminated = end == std::string::npos;
    if (last_unterminated) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    // The run log writes no blank lines; skipping them keeps the numbering a text editor shows.
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = "line " + std::to_string(number) + " ";
    json record;
    try {
      record = io::parse_json_text(line);
    } catch (const io::JsonTextError&) {
      if (last_unterminated && !has_bare_nonfinite_token(line))
        fail(file, where + "is cut off: the file ends without a newline in the middle of a record (truncated? a "
                           "run still writing it, or a copy cut short)");
      parse_or_explain(line, file, where);  // throws with the reason
    }
    if (!record.is_object()) fail(file, where + "is not a JSON object");
    records.push_back(std::move(record));
  }
  if (records.empty()) fail(file, "holds no records (a run killed before its first step?)");
  return records;
}

RunDirectory read_run_directory(const fs::path& dir, bool with_steps) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw InputError("run directory " + quoted(dir) + " does not exist");
  if (!fs::is_directory(dir, ec))
    throw InputError(quoted(dir) + " is not a directory (give a run directory or an ensemble directory)");
  RunDirectory run;
  run.name = dir.string();
  if (!fs::exists(dir / "summary.json", ec))
    throw InputError(quoted(dir / "summary.json") +
                     " not found: not a run directory (nor an ensemble directory: no ensemble.json), or a run that "
                     "has not finished");
  run.summary = read_json_document(dir / "summary.json");
  if (const auto config = run.summary.find("config"); config != run.summary.end()) {
    if (!config->is_object()) fail(dir / "summary.json", "\"config\" is not an object");
    if (const auto seed = config->find("seed"); seed != config->end() && seed->is_number_integer())
      run.seed = seed->get<std::int64_t>();
  }
  if (with_steps) run.steps = read_json_lines_checked(dir / "steps.jsonl");
  return run;
}

Ensemble read_ensemble(const fs::path& dir, bool with_steps) {
  Ensemble e;
  e.name = dir.string();
  while (e.name.size() > 1 && e.name.ends_with('/')) e.name.pop_back();
  const fs::path root(e.name);
  std::error_code ec;
  if (!fs::exists(root, ec)) throw InputError("directory " + quoted(root) + " does not exist");
  if (!fs::is_directory(root, ec))
    throw InputError(quoted(root) + " is not a directory (give a run directory or an ensemble directory)");
  if (!fs::exists(root / "ensemble.json", ec)) {
    e.runs.push_back(read_run_directory(root, with_steps));
    return e;
  }
  e.is_ensemble = true;
  const fs::path manifest = root / "ensemble.json";
  const json document = read_json_document(manifest);
  const auto seeds = document.find("seeds");
  if (seeds == document.end() || !seeds->is_array() || seeds->empty())
    fail(manifest, "needs \"seeds\": a non-empty array of the seeds the ensemble ran");
  std::set<std::int64_t> seen;
  for (const json& s : *seeds) {
    if (!s.is_number_integer()) fail(manifest, "\"seeds\" holds " + s.dump() + ", expected integers");
    const auto seed = s.get<std::int64_t>();
    if (!seen.insert(seed).second) fail(manifest, "\"seeds\" lists seed " + std::to_string(seed) + " twice");
    e.listed_seeds.push_back(seed);
  }
  for (const std::int64_t seed : e.listed_seeds) {
    const fs::path run_dir = root / seed_dir_name(seed);
    if (!fs::is_directory(run_dir, ec))
      throw InputError(quoted(run_dir) + " not found, but " + quoted(manifest) + " lists seed " +
                       std::to_string(seed) + " (an ensemble still training, or a seed directory removed)");
    RunDirectory run = read_run_directory(run_dir, with_steps);
    if (run.seed && *run.seed != seed)
      fail(run_dir / "summary.json", "config.seed is " + std::to_string(*run.seed) + " but the directory is " +
                                         seed_dir_name(seed));
    if (!run.seed) run.seed = seed;  // the directory's name says it
    e.runs.push_back(std::move(run));
  }
  return e;
}

Ensemble read_named_ensemble(const std::filesystem::path& parent, const std::string& name, bool with_steps) {
  Ensemble e = read_ensemble(parent / name, with_steps);
  e.name = name;
  for (RunDirectory& r : e.runs)
    if (r.seed) r.name = name + "/seed-" + std::to_string(*r.seed);
  return e;
}

namespace {

[[noreturn]] void bad_step_log(const RunDirectory& run, const std::string& what) {
  throw InputError("'" + run.name + "/steps.jsonl': " + what);
}

}  // namespace

// Per step, the loss (nullopt: non-finite, null in the log), in step order
// 0..steps-1; bad input unless every step appears exactly once. A run that
// declared itself diverged (`stopped_early`) stopped before the last step, so
// its missing steps are left nullopt instead.
std::vector<std::optional<double>> read_loss_curve(const RunDirectory& run, const std::string& key, std::int64_t steps,
                                                   bool stopped_early) {
  const std::vector<json>& records = *run.steps;
  // config.steps comes from a file: check it against the log before sizing anything by it (a forged
  // 10^9 would ask for gigabytes). A complete log holds every step; one that stopped early holds fewer,
  // and the rest of its curve is left empty up to a bound far beyond any run that was recorded.
  const auto held = static_cast<std::int64_t>(records.size());
  if (!stopped_early && steps > held)
    bad_step_log(run, "holds " + std::to_string(held) + " records but summary.json's config.steps is " +
                          std::to_string(steps) + " (truncated, or a run that stopped early without saying so)");
  constexpr std::int64_t kMaxStepsBeyondTheLog = 10'000'000;
  if (steps > held + kMaxStepsBeyondTheLog)
    bad_step_log(run, "summary.json's config.steps is " + std::to_string(steps) + ", more than " +
                          std::to_string(kMaxStepsBeyondTheLog) + " beyond the " + std::to_string(held) +
                          " steps logged: not a run this log belongs to");
  std::vector<std::optional<double>> curve(static_cast<std::size_t>(steps));
  std::vector<bool> seen(static_cast<std::size_t>(steps), false);
  for (std::size_t i = 0; i < records.size(); ++i) {
    const json& r = records[i];
    const std::string at = "line " + std::to_string(i + 1) + ": ";
    const auto s = r.find("step");
    if (s == r.end() || !s->is_number_integer()) bad_step_log(run, at + "no integer \"step\"");
    const auto step = s->get<std::int64_t>();
    if (step < 0 || step >= steps)
      bad_step_log(run, at + "step " + std::to_string(step) + " is outside 0.." + std::to_string(steps - 1) +
                   " (summary.json's config.steps is " + std::to_string(steps) + ")");
    const auto index = static_cast<std::size_t>(step);
    if (seen[index]) bad_step_log(run, at + "step " + std::to_string(step) + " appears a second time");
    seen[index] = true;
    const auto loss = r.find(key);
    if (loss == r.end()) bad_step_log(run, at + "no \"" + key + "\" (the loss the gate compares)");
    if (loss->is_null()) continue;
    if (!loss->is_number()) bad_step_log(run, at + "\"" + key + "\" is " + loss->dump() + ", expected a number");
    const double x = loss->get<double>();
    if (std::isfinite(x)) curve[index] = x;
  }
  for (std::size_t k = 0; k < seen.size(); ++k)
    if (!seen[k] && !stopped_early)
      bad_step_log(run,
          "step " + std::to_string(k) + " is missing (the log holds " + std::to_string(records.size()) + " of " +
              std::to_string(steps) + " steps: truncated, or a run that stopped early without saying so)");
  return curve;
}

}  // namespace mpverify::metrics
