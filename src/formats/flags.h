// The five IEEE 754 exception flags, with TestFloat's bit values so that a
// flag word can be printed and compared the way TestFloat does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mpverify::formats {

struct Flags {
  static constexpr std::uint8_t inexact = 1;
  static constexpr std::uint8_t underflow = 2;
  static constexpr std::uint8_t overflow = 4;
  static constexpr std::uint8_t infinite = 8;  // division of a finite non-zero by zero
  static constexpr std::uint8_t invalid = 16;

  std::uint8_t bits = 0;

  void raise(std::uint8_t f) { bits |= f; }
  bool has(std::uint8_t f) const { return (bits & f) != 0; }
  void clear() { bits = 0; }
  friend bool operator==(Flags, Flags) = default;
};

// Names in the order inexact, underflow, overflow, infinite, invalid.
std::vector<std::string> flag_names(Flags f);

}  // namespace mpverify::formats
