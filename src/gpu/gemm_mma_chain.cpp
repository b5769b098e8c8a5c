// gemm_mma_chain (gemm_mma_chain.h): the operands of every output element laid out as the probe's dot
// products, one probe launch per promotion run, and the runs promoted into fp32 on the host.
#include "gpu/gemm_mma_chain.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>

#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "gpu/mma_probe.h"

namespace mpverify::gpu {

namespace {

// Every value of a matrix as bits of its format, each converted once (a GEMM reads each many times).
std::vector<std::uint32_t> bits_of(const formats::Format& f, std::span<const float> values) {
  std::vector<std::uint32_t> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    formats::Flags flags;
    bits[i] = formats::from_float(f, values[i], {}, flags);
    if (flags.has(formats::Flags::inexact))
      throw std::invalid_argument("gemm_mma_chain: an operand is not a value of " + f.name);
  }
  return bits;
}

struct Operands {
  std::vector<std::uint32_t> a, b;  // dot i = (row, column) at [i * K, (i + 1) * K), zero-padded
};

// The operands of elements (i, j) over k in [k0, k0 + length), from A's and B's bits (swapped: A's go to
// the instruction's b), padded with zero products to `padded` elements.
Operands lay_out(const ops::GemmShape& s, std::span<const std::uint32_t> A, std::span<const std::uint32_t> B,
                 bool swapped, int k0, int length, int padded) {
  Operands o;
  o.a.assign(s.c_size() * padded, 0u);
  o.b.assign(s.c_size() * padded, 0u);
  std::vector<std::uint32_t>& from_a = swapped ? o.b : o.a;
  std::vector<std::uint32_t>& from_b = swapped ? o.a : o.b;
  for (int i = 0; i < s.m; ++i)
    for (int j = 0; j < s.n; ++j) {
      const std::size_t dot = static_cast<std::size_t>(i) * s.n + j;
      for (int t = 0; t < length; ++t) {
        const std::size_t k = static_cast<std::size_t>(k0 + t);
        from_a[dot * padded + t] = s.transpose_a ? A[k * s.m + i] : A[static_cast<std::size_t>(i) * s.k + k];
        from_b[dot * padded + t] = s.transpose_b ? B[static_cast<std::size_t>(j) * s.k + k] : B[k * s.n + j];
      }
    }
  return o;
}

bool takes_swapped(const emu::MmaModel& m, const formats::Format& fa, const formats::Format& fb) {
  if (formats::same_values(m.a, fa) && formats::same_values(m.b, fb)) return false;
  if (formats::same_values(m.b, fa) && formats::same_values(m.a, fb)) return true;
  throw std::invalid_argument("gemm_mma_chain: " + m.name + " multiplies " + m.a.name + " by " + m.b.name + ", not " +
                              fa.name + " by " + fb.name);
}

}  // namespace

void gemm_mma_chain(const ops::GemmShape& shape, std::span<const float> a, std::span<const float> b,
                    std::span<float> c, const emu::MmaModel& model, const formats::Format& a_format,
                    const formats::Format& b_format, int promotion_interval, const DotChain& chain) {
  shape.check(a.size(), b.size(), c.size());
  const bool swapped = takes_swapped(model, a_format, b_format);
  if (promotion_interval < 0 || (promotion_interval > 0 && promotion_interval % model.k != 0))
    throw std::invalid_argument("gemm_mma_chain: the promotion interval must be a multiple of " + model.name +
                                "'s k = " + std::to_string(model.k));
  const int run = promotion_interval > 0 ? promotion_interval : shape.k;
  const int padded_run = (run + model.k - 1) / model.k * model.k;
  if (shape.c_size() * static_cast<std::size_t>(padded_run) > kMaxChainGemmTerms)
    throw std::invalid_argument("gemm_mma_chain: m n k (with k per promotion run) is at most 2^26, since every dot "
                                "product's operands are laid out apart");
  const DotChain probe = chain ? chain : DotChain(mma_probe);
  const std::vector<std::uint32_t> a_bits = bits_of(swapped ? model.b : model.a, a);
  const std::vector<std::uint32_t> b_bits = bits_of(swapped ? model.a : model.b, b);
  const std::vector<std::uint32_t> zeros(shape.c_size(), 0u);
  std::vector<float> promoted(shape.c_size(), 0.0f);
  for (int k0 = 0; k0 < shape.k; k0 += run) {
    const int length = std::min(run, shape.k - k0);
    const int padded = (length + model.k - 1) / model.k * model.k;
    const Operands o = lay_out(shape, a_bits, b_bits, swapped, k0, length, padded);
    const std::vector<std::uint32_t> d = probe(model, o.a, o.b, zeros, padded);
    for (std::size_t i = 0; i < c.size(); ++i) {
      const float partial = static_cast<float>(formats::to_double(model.c, d[i]));
      // Without promotion the one chain is the result; with it, a binary32 addition to nearest-even, a NaN
      // being the GPU's canonical 0x7FFFFFFF (as emu::mma_dot has it).
      promoted[i] = promotion_interval > 0 ? promoted[i] + partial : partial;
      if (promotion_interval > 0 && std::isnan(promoted[i])) promoted[i] = std::bit_cast<float>(0x7FFFFFFFu);
    }
  }
  std::copy(promoted.begin(), promoted.end(), c.begin());
}

}  // namespace mpverify::gpu
