// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC'11), the counter-based generator behind stochastic rounding. A draw is a
// pure function of (seed, stream, index), so the CPU emulator and a GPU
// kernel that evaluate the same triple get the same bits, in any order and on
// any number of threads. Header-only and usable from CUDA device code.
#pragma once

#include <array>
#include <cstdint>

#include "formats/host_device.h"

namespace mpverify::formats {

MPVERIFY_HOST_DEVICE constexpr std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> counter,
                                                                         std::array<std::uint32_t, 2> key) {
  constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = std::uint64_t{kMul0} * counter[0];
    const std::uint64_t p1 = std::uint64_t{kMul1} * counter[2];
    counter = {static_cast<std::uint32_t>(p1 >> 32) ^ counter[1] ^ key[0], static_cast<std::uint32_t>(p1),
               static_cast<std::uint32_t>(p0 >> 32) ^ counter[3] ^ key[1], static_cast<std::uint32_t>(p0)};
    key = {key[0] + kWeyl0, key[1] + kWeyl1};
  }
  return counter;
}

// The four words of block `block` of stream `stream` under `seed`: the
// counter is (block, stream) and the key the seed, each as two 32-bit halves,
// low half first. The one mapping from the project's (seed, stream, position)
// to Philox's counter and key; every consumer goes through it.
MPVERIFY_HOST_DEVICE constexpr std::array<std::uint32_t, 4> philox_block(std::uint64_t seed, std::uint64_t stream,
                                                                        std::uint64_t block) {
  return philox4x32_10(
      {static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32), static_cast<std::uint32_t>(stream),
       static_cast<std::uint32_t>(stream >> 32)},
      {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
}

// The 32-bit draw for element `index` of stream `stream` under `seed`: one
// Philox block serves four consecutive elements.
MPVERIFY_HOST_DEVICE constexpr std::uint32_t stochastic_draw(std::uint64_t seed, std::uint64_t stream,
                                                             std::uint64_t index) {
  return philox_block(seed, stream, index >> 2)[index & 3];
}

}  // namespace mpverify::formats
