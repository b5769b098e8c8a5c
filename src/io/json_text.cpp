#include "io/json_text.h"

#include "io/input_file.h"

#include <fstream>
#include <sstream>

namespace mpverify::io {

namespace {

// Where the nesting of objects and arrays first exceeds max_depth, if it does: one pass that skips
// strings. (nlohmann's parser callback, which sees each depth, makes parsing a large object quadratic.)
std::optional<std::size_t> too_deep_at(std::string_view text, std::size_t max_depth) {
  std::size_t depth = 0;
  bool in_string = false, escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

}  // namespace

nlohmann::json parse_json_text(std::string_view text, std::size_t max_depth) {
  using nlohmann::json;
  if (const auto at = too_deep_at(text, max_depth))
    throw JsonTextError(*at, "JSON nested deeper than " + std::to_string(max_depth) + " levels (at byte " +
                                 std::to_string(*at) + ")");
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    throw JsonTextError(e.byte > 0 ? e.byte - 1 : 0, e.what());
  } catch (const json::exception& e) {  // out_of_range (a number like 1e999) and the other nlohmann errors
    throw JsonTextError(0, e.what());
  }
}

std::optional<nlohmann::json> try_parse_json_text(std::string_view text, std::string* why, std::size_t max_depth) {
  try {
    return parse_json_text(text, max_depth);
  } catch (const JsonTextError& e) {
    if (why) *why = e.what();
    return std::nullopt;
  }
}

nlohmann::json read_json_file(const std::filesystem::path& file, std::size_t max_depth) {
  std::ifstream in = open_input_file(file);
  if (!in) throw std::runtime_error(file.string() + ": cannot be opened");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw std::runtime_error(file.string() + ": cannot be read");
  try {
    return parse_json_text(text.str(), max_depth);
  } catch (const JsonTextError& e) {
    throw std::runtime_error(file.string() + ": byte " + std::to_string(e.byte()) + ": not valid JSON: " + e.what());
  }
}

}  // namespace mpverify::io
