#include "refs/loss_ref.h"

#include <algorithm>
#include <vector>

#include "ops/fp64_math.h"
#include "refs/fp64_copies.h"

namespace mpverify::refs {

using detail::widen;

// --- softmax with cross-entropy ----------------------------------------------

float softmax_cross_entropy_ref(const ops::SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                std::span<const std::int32_t> labels) {
  return static_cast<float>(ops::softmax_cross_entropy_fp64(s, widen(logits), labels));
}

void softmax_cross_entropy_backward_ref(const ops::SoftmaxCrossEntropyShape& s, std::span<const float> logits,
                                        std::span<const std::int32_t> labels, std::span<float> dlogits) {
  s.check(logits.size(), labels);
  ops::check_same_size("softmax_cross_entropy", "dlogits", dlogits.size(), "logits", logits.size());
  const auto d = ops::softmax_cross_entropy_backward_fp64(s, widen(logits), labels);
  std::transform(d.begin(), d.end(), dlogits.begin(), [](double v) { return static_cast<float>(v); });
}

// --- mean squared error --------------------------------------------------------

float mse_ref(std::span<const float> y, std::span<const float> t) {
  return static_cast<float>(ops::mse_fp64(widen(y), widen(t)));
}

void mse_backward_ref(std::span<const float> y, std::span<const float> t, std::span<float> dy) {
  ops::check_same_size("mse", "dy", dy.size(), "y", y.size());
  const auto d = ops::mse_backward_fp64(widen(y), widen(t));
  std::transform(d.begin(), d.end(), dy.begin(), [](double v) { return static_cast<float>(v); });
}

// --- binary cross-entropy with logits ---------------------------------------------

float bce_with_logits_ref(std::span<const float> x, std::span<const float> t) {
  return static_cast<float>(ops::bce_with_logits_fp64(widen(x), widen(t)));
}

void bce_with_logits_backward_ref(std::span<const float> x, std::span<const float> t, std::span<float> dx) {
  ops::check_same_size("bce_with_logits", "dx", dx.size(), "x", x.size());
  const auto d = ops::bce_with_logits_backward_fp64(widen(x), widen(t));
  std::transform(d.begin(), d.end(), dx.begin(), [](double v) { return static_cast<float>(v); });
}

}  // namespace mpverify::refs
