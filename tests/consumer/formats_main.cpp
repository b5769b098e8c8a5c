// Rounds 1/3 to bf16 through the installed formats library alone: prints the bits.
#include <cstdio>

#include "formats/arithmetic.h"

int main() {
  using namespace mpverify::formats;
  Flags flags;
  const std::uint32_t bits = from_double(parse_format("bf16"), 1.0 / 3.0, {}, flags);
  std::printf("0x%04x %d\n", bits, flags.bits);
  return bits == 0x3eab ? 0 : 1;
}
