#include "formats/flags.h"

namespace mpverify::formats {

std::vector<std::string> flag_names(Flags f) {
  std::vector<std::string> names;
  if (f.has(Flags::inexact)) names.emplace_back("inexact");
  if (f.has(Flags::underflow)) names.emplace_back("underflow");
  if (f.has(Flags::overflow)) names.emplace_back("overflow");
  if (f.has(Flags::infinite)) names.emplace_back("infinite");
  if (f.has(Flags::invalid)) names.emplace_back("invalid");
  return names;
}

}  // namespace mpverify::formats
