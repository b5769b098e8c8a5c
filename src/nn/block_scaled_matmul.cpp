#include "nn/block_scaled_matmul.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "emu/hadamard.h"
#include "nn/tensor_counters.h"

namespace mpverify::nn {

namespace {

constexpr int kHadamardBlock = 16;

// The two operands' schemes, and the gradient operand's rounding, for one of the three GEMMs.
emu::BlockScaledGemmPolicy policy_for(Context& ctx, std::string_view layer, BlockGemm gemm) {
  const BlockScaling& s = *ctx.precision().block_scaling;
  emu::BlockScaledGemmPolicy p;
  p.accumulation = s.accumulation;
  p.scheme_a = gemm == BlockGemm::fprop ? s.input : s.gradient;
  p.scheme_b = gemm == BlockGemm::wgrad ? s.input : s.weight;
  p.quantize_a.scale_rule = p.quantize_b.scale_rule = s.scale_rule;
  if (gemm != BlockGemm::fprop && s.gradient_rounding == formats::Rounding::stochastic) {
    std::string tensor(to_string(gemm));
    tensor += ".dy";
    const emu::RoundingKey key = ctx.rounding_key(layer, tensor);
    p.quantize_a.rounding = formats::Rounding::stochastic;
    p.quantize_a.seed = key.seed;
    p.quantize_a.stream = key.stream;
  }
  return p;
}

// x (rows x cols, row-major, K = rows) padded with zero rows to `padded` rows and transformed along K.
std::vector<float> hadamard_along_rows(std::span<const float> x, std::size_t rows, std::size_t cols,
                                       std::size_t padded) {
  std::vector<float> out(padded * cols, 0.0f);
  std::copy(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(rows * cols), out.begin());
  emu::random_hadamard_transform(out, padded, cols, emu::RhtAxis::within_columns);
  return out;
}

// wgrad under the random Hadamard transform: dW = (H dy)^T (H x), H applied along the batch (K) of both.
void hadamard_wgrad(Context& ctx, const emu::BlockScaledGemmPolicy& policy, const ops::GemmShape& shape,
                    std::span<const float> a, std::span<const float> b, std::span<float> c,
                    emu::BlockScaledGemmCounters* counters) {
  if (!shape.transpose_a || shape.transpose_b)
    throw std::invalid_argument("block-scaled wgrad: expects dy^T x with dy and x stored batch-major");
  const auto k = static_cast<std::size_t>(shape.k);
  const std::size_t padded = (k + kHadamardBlock - 1) / kHadamardBlock * kHadamardBlock;
  const std::vector<float> ha = hadamard_along_rows(a, k, static_cast<std::size_t>(shape.m), padded);
  const std::vector<float> hb = hadamard_along_rows(b, k, static_cast<std::size_t>(shape.n), padded);
  ops::GemmShape s = shape;
  s.k = static_cast<int>(padded);
  ctx.backend().block_scaled_gemm(s, ha, hb, c, policy, counters);
}

// The GEMM's counts as counter sites of the training tensor (nn/tensor_counters.h), and each operand's
// quantization shown to the recorders.
void report(Context& ctx, std::string_view layer, BlockGemm gemm, std::string_view tensor,
            const emu::BlockScaledGemmPolicy& policy, const emu::BlockScaledGemmCounters& n) {
  std::string name(layer);
  name += '.';
  name += tensor;
  TensorCounters counters(ctx, std::move(name));
  if (emu::CounterSet* sites = counters.get()) {
    emu::block_counters_into(n.a, sites->at("block-gemm.a"));
    emu::block_counters_into(n.b, sites->at("block-gemm.b"));
    emu::mma_counters_into(n.accumulate, sites->at("block-gemm.accumulate"));
  }
  StoreObserver* observer = ctx.observer();
  if (!observer) return;
  const std::string_view gemm_name = to_string(gemm);
  const std::string a = std::string(gemm_name) + (gemm == BlockGemm::fprop ? ".x" : ".dy");
  const std::string b = std::string(gemm_name) + (gemm == BlockGemm::wgrad ? ".x" : ".w");
  observer->on_block_quantized(layer, a, ctx.pass(), policy.scheme_a, n.a, n.stats_a);
  observer->on_block_quantized(layer, b, ctx.pass(), policy.scheme_b, n.b, n.stats_b);
}

}  // namespace

std::string_view to_string(BlockGemm g) {
  switch (g) {
    case BlockGemm::fprop: return "fprop";
    case BlockGemm::dgrad: return "dgrad";
    case BlockGemm::wgrad: return "wgrad";
  }
  return "?";
}

void block_scaled_matmul(Context& ctx, std::string_view layer, BlockGemm gemm, const ops::GemmShape& shape,
                         std::span<const float> a, std::span<const float> b, std::span<float> c,
                         std::string_view tensor) {
  const emu::BlockScaledGemmPolicy policy = policy_for(ctx, layer, gemm);
  const bool observed = ctx.counters() || ctx.observer();
  emu::BlockScaledGemmCounters n;
  if (gemm == BlockGemm::wgrad && ctx.precision().block_scaling->wgrad_hadamard)
    hadamard_wgrad(ctx, policy, shape, a, b, c, observed ? &n : nullptr);
  else
    ctx.backend().block_scaled_gemm(shape, a, b, c, policy, observed ? &n : nullptr);
  if (observed) report(ctx, layer, gemm, tensor, policy, n);
}

}  // namespace mpverify::nn
