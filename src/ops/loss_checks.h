// The argument checks of the losses, shared by the three sides (refs, emu,
// gpu) so that they reject the same inputs with the same messages; each
// throws std::invalid_argument.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace mpverify::ops {

// `a` and `b` must hold the same number of elements; the message names both.
void check_same_size(std::string_view op, std::string_view a_name, std::size_t a, std::string_view b_name,
                     std::size_t b);
// A mean over no element is undefined.
void check_not_empty(std::string_view op, std::string_view name, std::size_t n);
// Targets of binary cross-entropy are probabilities: each in [0, 1]; the
// message names the first index outside (NaN included).
void check_probability_targets(std::string_view op, std::span<const float> t);
void check_probability_targets(std::string_view op, std::span<const double> t);

// Softmax with cross-entropy: logits are batch x classes, row-major; one
// label per row.
struct SoftmaxCrossEntropyShape {
  int batch = 0;    // b
  int classes = 0;  // m
  std::size_t logits_size() const { return static_cast<std::size_t>(batch) * static_cast<std::size_t>(classes); }
  // Throws std::invalid_argument: batch or classes below 1, logits or labels
  // of the wrong size (named), or the first label outside [0, classes)
  // (its index named).
  void check(std::size_t logits, std::span<const std::int32_t> labels) const;
};

}  // namespace mpverify::ops
