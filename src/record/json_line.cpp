#include "record/json_line.h"

#include <charconv>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace mpverify::record {

namespace {

// Printable ASCII other than the quote and the backslash: written as they are, as nlohmann writes them.
bool plain_ascii(std::string_view s) {
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c > 0x7e || c == '"' || c == '\\') return false;
  }
  return true;
}

void append_string(std::string& out, std::string_view s) {
  if (!plain_ascii(s)) {
    out += nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return;
  }
  out += '"';
  out += s;
  out += '"';
}

template <class Integer>
void append_integer(std::string& out, Integer v) {
  char buffer[24];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, v).ptr;
  out.append(buffer, end);
}

}  // namespace

void JsonLine::key(std::string_view k) {
  if (!last_key_.empty() && !(last_key_ < k))
    throw std::logic_error("JsonLine: key \"" + std::string(k) + "\" after \"" + last_key_ +
                           "\" (keys go in increasing order, as nlohmann sorts them)");
  if (text_.size() > 1) text_ += ',';
  append_string(text_, k);
  text_ += ':';
  last_key_.assign(k);
}

JsonLine& JsonLine::add(std::string_view k, std::uint64_t value) {
  key(k);
  append_integer(text_, value);
  return *this;
}

JsonLine& JsonLine::add(std::string_view k, int value) {
  key(k);
  append_integer(text_, value);
  return *this;
}

JsonLine& JsonLine::add(std::string_view k, double value) {
  key(k);
  text_ += nlohmann::json(value).dump();  // its own float format ("1.0", "1e-05"); null when not finite
  return *this;
}

JsonLine& JsonLine::add(std::string_view k, std::string_view value) {
  key(k);
  append_string(text_, value);
  return *this;
}

JsonLine& JsonLine::add_null(std::string_view k) {
  key(k);
  text_ += "null";
  return *this;
}

JsonLine& JsonLine::add(std::string_view k, std::span<const std::uint64_t> values) {
  key(k);
  text_ += '[';
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i) text_ += ',';
    append_integer(text_, values[i]);
  }
  text_ += ']';
  return *this;
}

std::string JsonLine::take() {
  text_ += '}';
  std::string out = std::move(text_);
  text_.clear();  // (assigning "{" here trips GCC 12's false -Wrestrict, bug 105651)
  text_.push_back('{');
  last_key_.clear();
  return out;
}

}  // namespace mpverify::record
