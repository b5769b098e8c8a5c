#include "metrics/value_file.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "io/json_text.h"
#include "metrics/ensemble.h"

namespace mpverify::metrics {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* const kSchema =
    "expected a header `seed,value` (optional columns `stderr` and `replicates`) and one run per line, or a JSON "
    "array [{\"seed\": 1, \"value\": 95.2}, ...]";

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  const auto last = s.find_last_not_of(" \t\r");
  return s.substr(first, last - first + 1);
}

class FileErrors {
 public:
  explicit FileErrors(const fs::path& file) : file_(file.string()) {}
  [[noreturn]] void at(std::size_t line, const std::string& what) const {
    throw InputError("'" + file_ + "' line " + std::to_string(line) + ": " + what);
  }
  [[noreturn]] void whole(const std::string& what) const { throw InputError("'" + file_ + "': " + what); }

 private:
  std::string file_;
};

// The non-finite spellings numpy, pandas, C and Python print.
bool is_non_finite_token(const std::string& token) {
  std::string t = lower(token);
  if (!t.empty() && (t[0] == '+' || t[0] == '-')) t.erase(0, 1);
  return t == "nan" || t == "inf" || t == "infinity";
}

std::optional<double> parse_double(const std::string& text) {
  std::string t = text;
  if (!t.empty() && t[0] == '+') t.erase(0, 1);
  double v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end != t.data() + t.size() || t.empty()) return std::nullopt;
  return v;
}

std::optional<std::int64_t> parse_integer(const std::string& text) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

// One CSV line split at commas outside double quotes; quotes removed. A quote left open would swallow the
// rest of the line into one field (3,"92.0 read as 92.0), so it is an error.
std::vector<std::string> split_csv(const std::string& line, std::size_t number, const FileErrors& err) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (ch == '"') {
      if (quoted && i + 1 < line.size() && line[i + 1] == '"') fields.back() += line[++i];
      else quoted = !quoted;
    } else if (ch == ',' && !quoted) {
      fields.emplace_back();
    } else {
      fields.back() += ch;
    }
  }
  if (quoted) err.at(number, "a double quote is not closed (write \"...\" around a field, \"\" for a quote inside)");
  for (std::string& f : fields) f = trim(f);
  return fields;
}

struct Columns {
  std::optional<std::size_t> seed, value, stderr_value, replicates, step;
  std::size_t count = 0;
};

Columns read_header(const std::vector<std::string>& names, std::size_t line, const FileErrors& err) {
  Columns c;
  c.count = names.size();
  std::map<std::string, std::optional<std::size_t>*> known = {
      {"seed", &c.seed}, {"value", &c.value}, {"stderr", &c.stderr_value}, {"replicates", &c.replicates},
      {"step", &c.step}};
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto k = known.find(lower(names[i]));
    if (k == known.end())
      err.at(line, "unknown column '" + names[i] + "' in the header (the columns are seed, value, and optionally "
                                                   "stderr with replicates, or step for a curve)");
    if (*k->second) err.at(line, "column '" + names[i] + "' appears twice in the header");
    *k->second = i;
  }
  if (!c.seed || !c.value)
    err.at(line, std::string("the header needs the columns seed and value (") + kSchema + ")");
  if (c.stderr_value.has_value() != c.replicates.has_value())
    err.at(line, "stderr needs replicates beside it (how many bootstrap replicates or subsets it came from: the "
                 "t quantile's degrees of freedom are replicates - 1), and replicates needs stderr");
  return c;
}

double finite_field(const std::string& text, const char* column, std::size_t line, const FileErrors& err) {
  const auto v = parse_double(text);
  if (!v || !std::isfinite(*v))
    err.at(line, std::string(column) + " is '" + text + "', expected a finite number");
  return *v;
}

ValueRecord read_csv_record(const std::vector<std::string>& f, const Columns& c, std::size_t line,
                            const FileErrors& err) {
  if (f.size() != c.count)
    err.at(line, std::to_string(f.size()) + " fields, but the header names " + std::to_string(c.count) + " columns");
  ValueRecord r;
  r.line = line;
  const auto seed = parse_integer(f[*c.seed]);
  if (!seed) err.at(line, "seed is '" + f[*c.seed] + "', expected an integer");
  r.seed = *seed;
  if (c.step) {
    const auto step = parse_integer(f[*c.step]);
    if (!step || *step < 0) err.at(line, "step is '" + f[*c.step] + "', expected an integer >= 0");
    r.step = *step;
  }
  const std::string& v = f[*c.value];
  if (v.empty()) err.at(line, "the value is empty (write nan for a run that diverged)");
  if (is_non_finite_token(v)) {
    r.non_finite = v;
  } else if (const auto x = parse_double(v)) {
    r.value = *x;
  } else {
    err.at(line, "value is '" + v + "', expected a number (or nan/inf for a run that diverged)");
  }
  if (c.stderr_value) {
    r.stderr_value = finite_field(f[*c.stderr_value], "stderr", line, err);
    const auto n = parse_integer(f[*c.replicates]);
    if (!n) err.at(line, "replicates is '" + f[*c.replicates] + "', expected an integer");
    r.replicates = *n;
  }
  return r;
}

// A CSV of runs is plain text: a control character (a NUL, an escape) would be invisible in a message, or
// end it, so the first one is named by its code and column instead.
void check_plain_text(const std::string& line, std::size_t number, const FileErrors& err) {
  for (std::size_t i = 0; i < line.size(); ++i) {
    const auto c = static_cast<unsigned char>(line[i]);
    if (c < 0x20 && c != '\t' && c != '\r') {
      char code[8];
      std::snprintf(code, sizeof code, "0x%02X", c);
      err.at(number, "holds the control character " + std::string(code) + " at column " + std::to_string(i + 1) +
                         "; a CSV of runs is plain text");
    }
  }
}

std::vector<ValueRecord> read_csv(const std::string& text, const FileErrors& err) {
  std::optional<Columns> columns;
  std::vector<ValueRecord> records;
  // At most a record a line, reserved once: a growing vector holds two copies while it moves (a curve file
  // of ten million rows is a plausible input).
  records.reserve(static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) + 1);
  // A UTF-8 byte order mark, which spreadsheet programs write first, is not part of the header's first name.
  std::size_t start = text.starts_with("\xEF\xBB\xBF") ? 3 : 0;
  for (std::size_t number = 1; start < text.size(); ++number) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string raw = text.substr(start, end - start);
    start = end + 1;
    check_plain_text(raw, number, err);
    const std::string line = trim(raw);
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> fields = split_csv(line, number, err);
    if (!columns) columns = read_header(fields, number, err);
    else records.push_back(read_csv_record(fields, *columns, number, err));
  }
  if (!columns) err.whole(std::string("is empty: ") + kSchema);
  return records;
}

// Python's bare NaN / Infinity / -Infinity outside strings become null; what
// each array entry held is remembered, with the line where each entry opens.
struct JsonScan {
  std::string text;                     // the substituted text
  std::vector<std::size_t> entry_lines;  // line of each top-level entry's '{'
  std::map<std::size_t, std::string> tokens;  // entry index -> the non-finite token it held
};

// The token Python writes for a non-finite float starting at text[i]; nullptr when none.
const char* bare_non_finite_at(const std::string& text, std::size_t i) {
  for (const char* token : {"-Infinity", "Infinity", "NaN"})
    if (text.compare(i, std::char_traits<char>::length(token), token) == 0) return token;
  return nullptr;
}

JsonScan scan_json(const std::string& in) {
  JsonScan s;
  s.text.reserve(in.size());
  bool in_string = false;
  int depth = 0;
  std::size_t line = 1;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const char ch = in[i];
    if (ch == '\n') ++line;
    if (in_string) {
      s.text += ch;
      if (ch == '\\' && i + 1 < in.size()) s.text += in[++i];
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '"') in_string = true;
    if (ch == '[' || ch == '{') {
      if (ch == '{' && depth == 1) s.entry_lines.push_back(line);
      ++depth;
    } else if (ch == ']' || ch == '}') {
      --depth;
    }
    if (const char* token = bare_non_finite_at(in, i)) {
      if (!s.entry_lines.empty() && depth >= 2) s.tokens.emplace(s.entry_lines.size() - 1, token);
      s.text += "null";
      i += std::char_traits<char>::length(token) - 1;
      continue;
    }
    s.text += ch;
  }
  return s;
}

std::size_t line_of_byte(const std::string& text, std::size_t byte) {
  const std::size_t end = std::min(byte, text.size());
  return 1 + static_cast<std::size_t>(std::count(text.begin(), text.begin() + static_cast<long>(end), '\n'));
}

ValueRecord read_json_record(const json& e, std::size_t line, const std::string& token, const FileErrors& err) {
  if (!e.is_object()) err.at(line, "an entry is " + e.dump() + ", expected an object {\"seed\": ..., \"value\": ...}");
  ValueRecord r;
  r.line = line;
  for (auto it = e.begin(); it != e.end(); ++it)
    if (it.key() != "seed" && it.key() != "value" && it.key() != "stderr" && it.key() != "replicates" &&
        it.key() != "step")
      err.at(line, "unknown key \"" + it.key() +
                       "\" (the keys are seed, value, and optionally stderr with replicates, or step for a curve)");
  const auto seed = e.find("seed");
  if (seed == e.end() || !seed->is_number_integer()) err.at(line, "needs \"seed\": an integer");
  r.seed = seed->get<std::int64_t>();
  if (const auto step = e.find("step"); step != e.end()) {
    if (!step->is_number_integer() || step->get<std::int64_t>() < 0)
      err.at(line, "\"step\" is " + step->dump() + ", expected an integer >= 0");
    r.step = step->get<std::int64_t>();
  }
  const auto value = e.find("value");
  if (value == e.end()) err.at(line, "needs \"value\": a number (NaN or null for a run that diverged)");
  if (value->is_null()) r.non_finite = token.empty() ? "null" : token;
  else if (!value->is_number()) err.at(line, "\"value\" is " + value->dump() + ", expected a number");
  else if (!std::isfinite(value->get<double>())) r.non_finite = "a non-finite number";
  else r.value = value->get<double>();
  const auto se = e.find("stderr"), n = e.find("replicates");
  if ((se == e.end()) != (n == e.end()))
    err.at(line, "\"stderr\" needs \"replicates\" beside it (the t quantile's degrees of freedom are replicates - 1)");
  if (se != e.end()) {
    if (!se->is_number() || !std::isfinite(se->get<double>())) err.at(line, "\"stderr\" must be a finite number");
    if (!n->is_number_integer()) err.at(line, "\"replicates\" must be an integer");
    r.stderr_value = se->get<double>();
    r.replicates = n->get<std::int64_t>();
  }
  return r;
}

std::vector<ValueRecord> read_json(const std::string& text, const FileErrors& err) {
  const JsonScan s = scan_json(text);
  json document;
  try {
    document = io::parse_json_text(s.text);
  } catch (const io::JsonTextError& e) {
    const bool at_end = e.byte() >= s.text.size();
    err.at(line_of_byte(s.text, e.byte()),
           std::string(at_end ? "ends in the middle of a JSON value (truncated?)" : "is not valid JSON") +
               " (parser: " + e.what() + ")");
  }
  if (!document.is_array()) err.whole(std::string("is not a JSON array: ") + kSchema);
  std::vector<ValueRecord> records;
  records.reserve(document.size());
  for (std::size_t k = 0; k < document.size(); ++k) {
    const std::size_t line = k < s.entry_lines.size() ? s.entry_lines[k] : 1;
    const auto token = s.tokens.find(k);
    records.push_back(read_json_record(document[k], line, token == s.tokens.end() ? "" : token->second, err));
  }
  return records;
}

// The first record, in file order, whose (seed, step) an earlier record already has, with that earlier
// record's line; nullopt when every pair is distinct. Sorted indices, not a map: 8 bytes a record.
std::optional<std::pair<std::size_t, std::size_t>> first_repeat(const std::vector<ValueRecord>& records) {
  std::vector<std::size_t> order(records.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  auto key = [&](std::size_t k) { return std::pair{records[k].seed, records[k].step.value_or(-1)}; };
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return std::pair{key(a), a} < std::pair{key(b), b}; });
  std::optional<std::pair<std::size_t, std::size_t>> first;  // (index of the repeat, line of the first)
  std::size_t run_start = 0;  // where the current key's records begin in `order`: its first in the file
  for (std::size_t i = 1; i < order.size(); ++i) {
    if (key(order[i]) != key(order[i - 1])) {
      run_start = i;
      continue;
    }
    if (!first || order[i] < first->first) first = std::pair{order[i], records[order[run_start]].line};
  }
  return first;
}

void check_records(const std::vector<ValueRecord>& records, const FileErrors& err) {
  if (records.empty()) err.whole(std::string("holds no runs: ") + kSchema);
  const bool steps = records.front().step.has_value();
  const auto repeat = first_repeat(records);
  for (std::size_t k = 0; k < records.size(); ++k) {
    const ValueRecord& r = records[k];
    if (r.step.has_value() != steps)
      err.at(r.line, "has " + std::string(steps ? "no" : "a") + " \"step\" where line " +
                         std::to_string(records.front().line) + " has " + (steps ? "one" : "none") +
                         ": a file is either one value per seed or a curve (one value per seed and step)");
    if (repeat && repeat->first == k)
      err.at(r.line, "seed " + std::to_string(r.seed) +
                         (steps ? " step " + std::to_string(*r.step) : std::string()) +
                         " appears a second time (first on line " + std::to_string(repeat->second) + "); " +
                         (steps ? "one value per seed and step" : "one run per seed"));
    if (r.stderr_value && *r.stderr_value < 0) err.at(r.line, "stderr is negative");
    if (r.replicates && *r.replicates < 2)
      err.at(r.line, "replicates is " + std::to_string(*r.replicates) + ", expected at least 2");
  }
}

}  // namespace

bool is_value_file(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return false;
  const std::string ext = lower(path.extension().string());
  return ext == ".csv" || ext == ".json";
}

ValueFile read_value_file(const fs::path& path) {
  const FileErrors err(path);
  ValueFile f;
  f.name = path.string();
  const bool is_json = lower(path.extension().string()) == ".json";
  try {
    const std::string text = read_text_file(path);
    f.records = is_json ? read_json(text, err) : read_csv(text, err);
    check_records(f.records, err);
  } catch (const std::bad_alloc&) {
    err.whole("is too large to hold in memory (a run takes about 150 bytes here, besides its text)");
  }
  f.has_steps = f.records.front().step.has_value();
  return f;
}

}  // namespace mpverify::metrics
