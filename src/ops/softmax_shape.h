// The shape of a row softmax, shared by refs::softmax_ref and
// emu::softmax_emu: x is rows x cols, row-major, and each row is normalised
// on its own.
//
// causal: the rows come in blocks of `cols` rows (one T x T score matrix per
// sequence and head, stacked, T = cols), and row i of its block sees columns
// 0..i only. The other columns are masked: their probability is exactly 0
// (what a -inf logit gives), they never enter the row's max or sum, and their
// gradient is 0. No -inf is written anywhere, so a masked score is never
// counted as a non-finite value.
#pragma once

#include <cstddef>

namespace mpverify::ops {

struct SoftmaxShape {
  int rows = 1, cols = 1;
  bool causal = false;

  std::size_t size() const { return static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols); }
  // The columns row r sees (0 .. visible(r) - 1).
  std::size_t visible(std::size_t r) const {
    return causal ? r % static_cast<std::size_t>(cols) + 1 : static_cast<std::size_t>(cols);
  }
};

// Throws std::invalid_argument unless rows, cols >= 1 and, when causal, rows
// is a multiple of cols.
void check_softmax_shape(const SoftmaxShape& s, const char* op);

}  // namespace mpverify::ops
