// Rounds 1/3 to fp16 through the installed library: prints the bits.
#include <cstdio>

#include "formats/arithmetic.h"
#include "gpu/device.h"

int main() {
  using namespace mpverify::formats;
  Flags flags;
  const std::uint32_t bits = from_double(parse_format("fp16"), 1.0 / 3.0, {}, flags);
  std::printf("0x%04x %d %s\n", bits, flags.bits, mpverify::gpu::built_with_cuda() ? "cuda" : "nocuda");
  return bits == 0x3555 ? 0 : 1;
}
