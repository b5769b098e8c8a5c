#include "training/trace_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "io/input_file.h"
#include "io/json_text.h"

namespace mpverify::training {

namespace {

const std::vector<std::pair<std::string, TraceFormat>>& formats() {
  static const std::vector<std::pair<std::string, TraceFormat>> table{
      {"auto", TraceFormat::automatic}, {"lines", TraceFormat::lines},         {"csv", TraceFormat::csv},
      {"jsonl", TraceFormat::jsonl},    {"deepspeed", TraceFormat::deepspeed}, {"megatron", TraceFormat::megatron},
      {"monitor", TraceFormat::monitor}};
  return table;
}

// A text's lines as views into the text, which the caller keeps: 8 bytes a line on top of the text itself,
// where a vector of strings cost about 60 (a trace of ten million steps is a 20 MB file).
class TextLines {
 public:
  explicit TextLines(std::string_view text) : text_(text) {
    if (!text.empty()) starts_.push_back(0);
    for (std::size_t p = text.find('\n'); p != std::string_view::npos; p = text.find('\n', p + 1))
      if (p + 1 < text.size()) starts_.push_back(p + 1);
  }
  std::size_t size() const { return starts_.size(); }
  // Line i without its newline, as std::getline gives it.
  std::string_view operator[](std::size_t i) const {
    const std::size_t end = i + 1 < starts_.size() ? starts_[i + 1] - 1 : text_.size();
    std::string_view line = text_.substr(starts_[i], end - starts_[i]);
    if (line.ends_with('\n')) line.remove_suffix(1);
    return line;
  }

 private:
  std::string_view text_;
  std::vector<std::size_t> starts_;
};

[[noreturn]] void fail(std::size_t index, const std::string& what) {
  throw TraceError("line " + std::to_string(index + 1) + ": " + what);
}

std::string trim(std::string_view s) {
  const std::size_t first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return "";
  return std::string(s.substr(first, s.find_last_not_of(" \t\r") - first + 1));
}

bool meaningful(std::string_view line) {
  const std::string t = trim(line);
  return !t.empty() && t[0] != '#';
}

// A whole token as a number (decimal, inf, nan).
std::optional<double> to_number(const std::string& token) {
  double v = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
  if (ec != std::errc() || end != token.data() + token.size() || token.empty()) return std::nullopt;
  return v;
}

// The number that follows `key` in a log line (spaces skipped), if any.
std::optional<double> number_after(std::string_view line, std::string_view key) {
  const std::size_t at = line.find(key);
  if (at == std::string::npos) return std::nullopt;
  const char* begin = line.data() + at + key.size();
  const char* const end = line.data() + line.size();
  while (begin < end && *begin == ' ') ++begin;
  double v = 0;
  const auto [stop, ec] = std::from_chars(begin, end, v);
  if (ec != std::errc() || stop == begin) return std::nullopt;
  return v;
}

const std::vector<std::string> kColumns{"step", "found_inf", "scale", "amax", "amin", "optimizer"};

// The largest step number read: every integer up to 2^53 is a double, and a step past it (or nan, inf, a
// fraction) is a damaged log, not a count to convert (the conversion would be undefined past 2^63).
constexpr double kMaxStep = 0x1p53;

// A step, iteration or skipped count as an integer; nullopt unless it is a whole number in [0, 2^53].
std::optional<std::int64_t> count_value(double v) {
  if (!(v >= 0 && v <= kMaxStep) || v != std::floor(v)) return std::nullopt;
  return static_cast<std::int64_t>(v);
}

// `what` (a number the log printed after `key`) as a count, or the line's error.
std::int64_t count_or_fail(std::size_t index, const char* key, double v) {
  const std::optional<std::int64_t> n = count_value(v);
  if (!n) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", v);
    fail(index, std::string(key) + " " + text + " is not a whole number in 0..2^53");
  }
  return *n;
}

std::vector<std::string> split_csv(std::string_view line) {
  std::vector<std::string> cells;
  if (line.empty()) return cells;
  for (std::size_t begin = 0;;) {
    const std::size_t comma = line.find(',', begin);
    cells.push_back(trim(line.substr(begin, comma == std::string_view::npos ? std::string_view::npos : comma - begin)));
    if (comma == std::string_view::npos) break;
    begin = comma + 1;
  }
  return cells;
}

// A found_inf cell or JSON value: 0/1/true/false.
double flag_value(std::size_t index, const std::string& text) {
  if (text == "1" || text == "true" || text == "True") return 1;
  if (text == "0" || text == "false" || text == "False") return 0;
  fail(index, "found_inf '" + text + "' is not 0, 1, true or false");
}

// A recorded loss scale is a finite number >= 0: a scaler never holds inf or NaN (torch refuses to grow to
// inf), so a logged "nan" is a damaged log, not a scale a rule could be checked against.
double logged_scale(std::size_t index, const std::string& what, double v) {
  if (!std::isfinite(v)) fail(index, what + " " + (std::isnan(v) ? "nan" : "inf") + " is not a loss scale (a "
                                       "finite number >= 0); the log is damaged here");
  return v;
}

double scale_or_amax(std::size_t index, const std::string& column, const std::string& text) {
  const auto v = to_number(text);
  if (!v) fail(index, column + " '" + text + "' is not a number");
  if (*v < 0 || std::signbit(*v)) fail(index, column + " '" + text + "' is negative");
  return column == "scale" ? logged_scale(index, "scale", *v) : *v;  // an amax may be inf or nan
}

void set_cell(TraceStep& t, std::size_t index, const std::string& column, const std::string& text) {
  if (text.empty()) return;  // unknown
  if (column == "found_inf") {
    t.found_inf = flag_value(index, text);
  } else if (column == "optimizer") {
    t.optimizer = text;
  } else if (column == "step") {
    const auto v = to_number(text);
    const std::optional<std::int64_t> step = v ? count_value(*v) : std::nullopt;
    if (!step) fail(index, "step '" + text + "' is not a whole number in 0..2^53");
    t.step = *step;
  } else {
    (column == "scale" ? t.scale : column == "amax" ? t.amax : t.amin) = scale_or_amax(index, column, text);
  }
}

void need_a_column(bool found, const std::string& what) {
  if (!found)
    throw TraceError(what + " has none of the columns found_inf, scale, amax (a trace's columns: step, found_inf, "
                            "scale, amax)");
}

std::vector<TraceStep> read_csv(const TextLines& lines) {
  std::size_t header = 0;
  while (header < lines.size() && !meaningful(lines[header])) ++header;
  if (header == lines.size()) return {};
  const std::vector<std::string> names = split_csv(trim(lines[header]));
  bool useful = false;
  for (const auto& n : names) useful |= n == "found_inf" || n == "scale" || n == "amax";
  need_a_column(useful, "line " + std::to_string(header + 1) + ": the CSV header");
  std::vector<TraceStep> steps;
  steps.reserve(lines.size());  // at most a step a line: no doubling (a reallocation holds both copies)
  for (std::size_t i = header + 1; i < lines.size(); ++i) {
    if (!meaningful(lines[i])) continue;
    const std::vector<std::string> cells = split_csv(trim(lines[i]));
    if (cells.size() != names.size())
      fail(i, std::to_string(cells.size()) + " cells under a header of " + std::to_string(names.size()));
    TraceStep t;
    t.line = static_cast<int>(i + 1);
    t.bare = false;
    for (std::size_t c = 0; c < names.size(); ++c)
      if (std::find(kColumns.begin(), kColumns.end(), names[c]) != kColumns.end()) set_cell(t, i, names[c], cells[c]);
    steps.push_back(t);
  }
  return steps;
}

// A JSON value of a column as the text a CSV cell would hold.
std::string cell_text(const nlohmann::json& v) {
  if (v.is_null()) return "";
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

std::vector<TraceStep> read_jsonl(const TextLines& lines) {
  std::vector<TraceStep> steps;
  steps.reserve(lines.size());  // at most a step a line: no doubling (a reallocation holds both copies)
  bool useful = false;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!meaningful(lines[i])) continue;
    nlohmann::json j;
    try {
      j = io::parse_json_text(lines[i]);
    } catch (const io::JsonTextError& e) {
      fail(i, std::string("not a JSON object: ") + e.what());
    }
    if (!j.is_object()) fail(i, "not a JSON object");
    TraceStep t;
    t.line = static_cast<int>(i + 1);
    t.bare = false;
    for (const auto& column : kColumns) {
      if (!j.contains(column)) continue;
      useful |= column == "found_inf" || column == "scale" || column == "amax";
      // The Monitor writes a non-finite scale as a string ("inf").
      set_cell(t, i, column, cell_text(j[column]));
    }
    steps.push_back(t);
  }
  if (!steps.empty()) need_a_column(useful, "the JSON lines");
  return steps;
}

// The progress line's step (`step=N, skipped=K`), or nullopt.
std::optional<std::pair<std::int64_t, std::int64_t>> deepspeed_progress(std::string_view line, std::size_t index) {
  const auto step = number_after(line, "step=");
  const auto skipped = number_after(line, "skipped=");
  if (!step || !skipped) return std::nullopt;
  return std::make_pair(count_or_fail(index, "step=", *step), count_or_fail(index, "skipped=", *skipped));
}

std::vector<TraceStep> read_deepspeed(const TextLines& lines) {
  std::vector<TraceStep> steps;
  steps.reserve(lines.size());  // at most a step a line: no doubling (a reallocation holds both copies)
  std::optional<std::pair<double, std::size_t>> overflow;  // attempted scale, its line
  ScalePrecision precision = ScalePrecision::exact;
  std::optional<std::int64_t> last_step, last_skipped;
  std::size_t overflow_lines = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (const auto attempted = number_after(lines[i], "Attempted loss scale:")) {
      overflow = {logged_scale(i, "Attempted loss scale:", *attempted), i};
      overflow_lines += 1;
      // DynamicLossScaler (ZeRO) prints int(cur_scale); FP16_Optimizer the float.
      precision = lines[i].find("OVERFLOW! Rank") != std::string::npos ? ScalePrecision::integer_part
                                                                       : ScalePrecision::exact;
      continue;
    }
    const auto progress = deepspeed_progress(lines[i], i);
    if (!progress) continue;
    const auto [step, skipped] = *progress;
    if (step == 0) {  // the report at initialisation: no step yet
      last_step = 0;
      last_skipped = skipped;
      continue;
    }
    if (last_step && step != *last_step + 1)
      fail(i, "step=" + std::to_string(step) + " follows step=" + std::to_string(*last_step) +
                  ": a trace needs every step (DeepSpeed's steps_per_print=1)");
    TraceStep t;
    t.line = static_cast<int>(i + 1);
    t.bare = false;
    t.step = step;
    const bool grew = last_skipped ? skipped > *last_skipped : overflow.has_value();
    if (overflow && !grew) fail(i, "an overflow line (line " + std::to_string(overflow->second + 1) +
                                       ") but the skipped count did not grow");
    t.found_inf = grew ? 1 : 0;
    if (overflow) {
      t.scale = overflow->first;
      t.scale_precision = precision;
    }
    overflow.reset();
    last_step = step;
    last_skipped = skipped;
    steps.push_back(t);
  }
  if (steps.empty() && overflow_lines > 0)
    throw TraceError("the DeepSpeed log has overflow lines but no progress lines 'step=N, skipped=K': run with "
                     "steps_per_print=1 so that every step is logged");
  return steps;
}

std::vector<TraceStep> read_megatron(const TextLines& lines) {
  std::vector<TraceStep> steps;
  steps.reserve(lines.size());  // at most a step a line: no doubling (a reallocation holds both copies)
  std::optional<double> previous_scale;
  std::optional<std::int64_t> last;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto iteration = number_after(lines[i], " iteration ");
    const auto scale = number_after(lines[i], "loss scale:");
    if (!iteration || !scale) continue;
    const auto skipped = number_after(lines[i], "number of skipped iterations:");
    if (!skipped) fail(i, "an iteration line without 'number of skipped iterations:'");
    const std::int64_t n = count_or_fail(i, "iteration", *iteration);
    if (last && n != *last + 1)
      fail(i, "iteration " + std::to_string(n) + " follows iteration " + std::to_string(*last) +
                  ": a trace needs every iteration (Megatron's --log-interval 1)");
    TraceStep t;
    t.line = static_cast<int>(i + 1);
    t.bare = false;
    t.step = n;
    t.found_inf = *skipped > 0 ? 1 : 0;
    // The logged scale is the one after this iteration's update.
    if (previous_scale) t.scale = previous_scale;
    t.scale_precision = ScalePrecision::one_decimal;
    previous_scale = logged_scale(i, "loss scale:", *scale);
    last = n;
    steps.push_back(t);
  }
  return steps;
}

TraceFormat detect_format(const TextLines& lines) {
  std::size_t first = 0;
  while (first < lines.size() && !meaningful(lines[first])) ++first;
  if (first == lines.size()) return TraceFormat::lines;
  if (trim(lines[first])[0] == '{') return TraceFormat::jsonl;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string_view l = lines[i];
    if (l.find(" iteration ") != std::string_view::npos && l.find("loss scale:") != std::string_view::npos)
      return TraceFormat::megatron;
    if (l.find("Attempted loss scale:") != std::string_view::npos ||
        (number_after(l, "step=") && number_after(l, "skipped=")))
      return TraceFormat::deepspeed;
  }
  for (const auto& cell : split_csv(trim(lines[first])))
    if (std::find(kColumns.begin(), kColumns.end(), cell) != kColumns.end()) return TraceFormat::csv;
  return TraceFormat::lines;
}

}  // namespace

std::vector<std::string> trace_format_names() {
  std::vector<std::string> names;
  for (const auto& [name, f] : formats()) names.push_back(name);
  return names;
}

std::optional<TraceFormat> parse_trace_format(std::string_view name) {
  for (const auto& [n, f] : formats())
    if (n == name) return f;
  return std::nullopt;
}

std::string trace_format_name(TraceFormat format) {
  for (const auto& [n, f] : formats())
    if (f == format) return n;
  return "?";
}

TraceFormat detect_trace_format(std::string_view text) { return detect_format(TextLines(text)); }

ReadTrace read_trace(std::istream& in, TraceFormat format) {
  std::ostringstream whole;
  if (in.peek() != std::char_traits<char>::eof()) whole << in.rdbuf();
  const std::string text = std::move(whole).str();
  const TextLines lines(text);
  ReadTrace r;
  r.format = format == TraceFormat::automatic ? detect_format(lines) : format;
  switch (r.format) {
    case TraceFormat::csv: r.steps = read_csv(lines); break;
    case TraceFormat::jsonl:
    case TraceFormat::monitor: r.steps = read_jsonl(lines); break;
    case TraceFormat::deepspeed: r.steps = read_deepspeed(lines); break;
    case TraceFormat::megatron: r.steps = read_megatron(lines); break;
    case TraceFormat::lines:
    case TraceFormat::automatic: r.steps = parse_trace_text(text); break;
  }
  // A log holds other lines besides its steps: give back what was reserved for them.
  if (r.steps.capacity() > 2 * r.steps.size()) r.steps.shrink_to_fit();
  return r;
}

ReadTrace read_trace_path(const std::string& path, TraceFormat format) {
  if (path == "-") {
    if (format == TraceFormat::monitor) throw TraceError("a Monitor run is a directory, not standard input");
    return read_trace(std::cin, format);
  }
  std::error_code ec;
  const bool directory = std::filesystem::is_directory(path, ec);
  if (format == TraceFormat::monitor && !directory)
    throw TraceError("'" + path + "' is not a run directory (--log-format monitor reads DIR/steps.jsonl)");
  if (directory) {
    if (format != TraceFormat::automatic && format != TraceFormat::monitor)
      throw TraceError("'" + path + "' is a directory: only a run directory (--log-format monitor) can be one");
    const std::string steps = (std::filesystem::path(path) / "steps.jsonl").string();
    std::ifstream in = io::open_input_file(steps, std::ios::in);
    if (!in) throw TraceError("'" + path + "' has no steps.jsonl: is it a Monitor or `mpverify train` run directory?");
    ReadTrace r = read_trace(in, TraceFormat::jsonl);
    r.format = TraceFormat::monitor;
    return r;
  }
  std::ifstream in = io::open_input_file(path, std::ios::in);
  if (!in) throw TraceError("cannot read '" + path + "'");
  return read_trace(in, format);
}

}  // namespace mpverify::training
