// Where the random bits of a training run's stochastic roundings come from: the one mapping from
// (run seed, tensor, step) to the (seed, stream) of formats::stochastic_draw. Element i of the tensor then
// draws stochastic_draw(seed, stream, i), i its position in the tensor (QuantizeSpec::first_index + its
// offset in a chunk), so the bits depend on nothing but the run's seed, the tensor's name, the step and the
// position: not on how the work is cut into chunks or threads, nor on what else ran before.
//
//   seed   = the run's seed (Philox's key)
//   stream = 0x5D << 56  |  FNV-1a-32(tensor) << 24  |  step      (step < 2^24)
//
// The top byte 0x5D is a tag no other Philox user of the project puts there (the data, the initialization,
// the batches, the character-level text's windows and the DCGAN's latent codes use streams whose top byte is
// 0x00, 0x05, 0x06, 0x5B, 0xBA or 0xC7), so a rounding never reuses a draw of the data or the initialization
// under the same seed. The tensor is named
// as the recorders name it: "LAYER.TENSOR" for a stored gradient ("fc1.dw", "conv2.dx", "loss.dlogits"),
// "PARAM.update" and "PARAM.decay" for the optimizer's write into the weights ("fc1.w.update"),
// "LAYER.dgrad.dy" and "LAYER.wgrad.dy" for a block-scaled training GEMM's quantization of dy; a tensor
// stored a second time within one step (the DCGAN's discriminator, backward once for itself and once for
// the generator) is "NAME#1", then "NAME#2", ... Distinct names differ in stream unless their 32-bit
// hashes collide, which tests/stochastic_rounding_test checks for every model's names.
#pragma once

#include <cstdint>
#include <string_view>

#include "emu/quantize.h"
#include "formats/format.h"

namespace mpverify::emu {

struct RoundingKey {
  std::uint64_t seed = 0;
  std::uint64_t stream = 0;
};

inline constexpr std::uint64_t kRoundingStreamTag = 0x5D;
inline constexpr std::uint64_t kRoundingSteps = std::uint64_t{1} << 24;

// FNV-1a, 32 bits, over the name's bytes: stable across compilers, platforms and runs.
std::uint32_t tensor_hash(std::string_view tensor);

// The mapping above. Throws std::out_of_range for step >= 2^24.
RoundingKey rounding_key(std::uint64_t run_seed, std::string_view tensor, std::uint64_t step);

// A stochastic rounding into `format` drawing from `key` (element i of the array: index i).
QuantizeSpec stochastic_spec(const formats::Format& format, const RoundingKey& key);

}  // namespace mpverify::emu
