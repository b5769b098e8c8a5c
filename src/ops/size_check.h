// The size check that every op of refs/, src/emu/ and src/gpu/ runs on its
// spans before touching them, so that a wrong size is named, not overrun.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace mpverify::ops {

// Throws std::invalid_argument "<op>: <what> has A elements, expected E".
inline void check_size(std::string_view op, std::string_view what, std::size_t actual, std::size_t expected) {
  if (actual == expected) return;
  std::string message(op);
  message += ": ";
  message += what;
  message += " has ";
  message += std::to_string(actual);
  message += " elements, expected ";
  message += std::to_string(expected);
  throw std::invalid_argument(message);
}

}  // namespace mpverify::ops
