// One JSON object written as text, byte for byte as nlohmann::json's dump() writes the same object (keys
// in sorted order, no spaces, numbers in its shortest round-trip form, invalid UTF-8 replaced), without
// building the object: the recorders write a line per tensor, and building then dumping an nlohmann
// object cost about 20 us a line, more than measuring a small tensor. Keys must come in increasing order
// (as nlohmann's std::map sorts them); a key out of order throws std::logic_error.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace mpverify::record {

class JsonLine {
 public:
  JsonLine& add(std::string_view key, std::uint64_t value);
  JsonLine& add(std::string_view key, int value);
  JsonLine& add(std::string_view key, double value);  // inf and NaN are written null, as nlohmann does
  JsonLine& add(std::string_view key, std::string_view value);
  JsonLine& add(std::string_view key, const char* value) { return add(key, std::string_view(value)); }
  JsonLine& add_null(std::string_view key);
  JsonLine& add(std::string_view key, std::span<const std::uint64_t> values);  // an array of counts

  // The object's text, closed; the line is empty afterwards.
  std::string take();

 private:
  void key(std::string_view k);
  std::string text_ = "{";
  std::string last_key_;
};

}  // namespace mpverify::record
