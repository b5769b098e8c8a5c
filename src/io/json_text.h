// JSON from outside (a file, a tensor file's header, a log line), parsed with
// bounds: nlohmann's parser accepts any nesting, and a value nested tens of
// thousands deep then overflows the stack in whatever recurses over it later
// (dump, copies, ==, our own walks). Every nlohmann exception (a syntax
// error, but also a number like 1e999, which raises out_of_range) becomes one
// error type with the byte offset and nlohmann's reason, for the caller to
// name its file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mpverify::io {

// The deepest nesting accepted by default: run files and headers nest a few levels; 64 is generous and
// far from any stack limit.
inline constexpr std::size_t default_json_depth = 64;

class JsonTextError : public std::runtime_error {
 public:
  JsonTextError(std::uint64_t byte, const std::string& reason)
      : std::runtime_error(reason), byte_(byte), reason_(reason) {}
  // The offset in the text where the parser stopped (0 when unknown).
  std::uint64_t byte() const { return byte_; }
  const std::string& reason() const { return reason_; }

 private:
  std::uint64_t byte_;
  std::string reason_;
};

// Throws JsonTextError for text that is not one JSON value, a number out of double's range, or nesting
// deeper than max_depth (objects and arrays).
nlohmann::json parse_json_text(std::string_view text, std::size_t max_depth = default_json_depth);

// The same, without throwing: std::nullopt where parse_json_text would throw (and *why, when given, says
// why).
std::optional<nlohmann::json> try_parse_json_text(std::string_view text, std::string* why = nullptr,
                                                  std::size_t max_depth = default_json_depth);

// A whole file of JSON: std::runtime_error "FILE: byte N: reason" when it cannot be read or parsed.
nlohmann::json read_json_file(const std::filesystem::path& file, std::size_t max_depth = default_json_depth);

}  // namespace mpverify::io
