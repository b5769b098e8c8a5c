// A whole GEMM on the present GPU's tensor cores in a fixed order: every output element is one dot product
// computed by the probe kernel (mma_probe.h) as a chain of the model's instruction along K, in order of
// increasing k, each result the next one's c, from c = +0 (K padded with zero products to a multiple of the
// instruction's k). With a promotion interval N_C, each run of N_C elements is its own chain from +0, and the
// runs are added in order into an fp32 accumulator that starts at +0 by binary32 additions to nearest-even
// (DeepSeek-V3's promotion, as emu::gemm_emu and refs::gemm_mma_ref define it).
//
// This is the order emu::gemm_emu follows under `accumulate=<preset>`, so the two must agree bit for bit
// wherever the model describes the present GPU's instruction; cuBLAS picks its own order (and may split K).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "emu/mma_model.h"
#include "formats/format.h"
#include "ops/gemm_shape.h"

namespace mpverify::gpu {

// What computes n dot products of length K from operand bits (mma_probe's signature); tests substitute an
// implementation on the CPU to check the assembly of the operands and the promotion without a GPU.
using DotChain = std::function<std::vector<std::uint32_t>(const emu::MmaModel&, std::span<const std::uint32_t> a,
                                                          std::span<const std::uint32_t> b,
                                                          std::span<const std::uint32_t> c, int K)>;

// The probe holds every dot's operands apart: refuses (std::invalid_argument) past this many m n k.
inline constexpr std::size_t kMaxChainGemmTerms = std::size_t{1} << 26;

// C = op(A) op(B) (ops/gemm_shape.h), A's values in a_format and B's in b_format (exactly representable),
// which are the model's a and b formats in either order. C holds the chain's result in the model's c format
// (fp32 or fp16), as float. Throws std::runtime_error with the reason when no device can run the
// instruction, std::invalid_argument for formats the model does not take or a GEMM too large.
void gemm_mma_chain(const ops::GemmShape& shape, std::span<const float> a, std::span<const float> b,
                    std::span<float> c, const emu::MmaModel& model, const formats::Format& a_format,
                    const formats::Format& b_format, int promotion_interval, const DotChain& chain = {});

}  // namespace mpverify::gpu
