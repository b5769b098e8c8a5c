// Counting, in one pass, how many |x| lie below each of a set of thresholds
// on their bit patterns. Every statistic of scale_stats.h is such a count:
// rounding is monotone in |x|, so for a fixed scale and format each category
// is an interval of |x|, and so is every histogram bin of the products
// (scale_thresholds.h finds the interval ends). For IEEE floats, |x| orders
// as its bit pattern with the sign cleared, so the comparisons are integer ones.
//
// How it is fast: a coarse histogram of the top bits of |x| (exponent and 3
// fraction bits: 8 bins per binade for float, 2048 bins in L1) counts most
// elements with one increment. A bin with a threshold strictly inside it is
// "split"; only elements falling in split bins compare against that bin's
// thresholds. Loss-scale thresholds for power-of-two scales split few bins.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace mpverify::analysis {

template <class Bits>  // std::uint32_t for float, std::uint64_t for double
class ThresholdCounter {
 public:
  static constexpr int total_bits = 8 * sizeof(Bits);
  static constexpr int shift = total_bits == 32 ? 20 : 49;  // keeps exponent + 3 fraction bits
  static constexpr std::size_t bins = std::size_t{1} << (total_bits - 1 - shift);
  static constexpr Bits magnitude_mask = static_cast<Bits>(~Bits{0} >> 1);

  // `thresholds`: sorted, unique, each in (0, magnitude_mask]; std::invalid_argument otherwise.
  explicit ThresholdCounter(std::vector<Bits> thresholds);

  // Values given as raw little-endian bit patterns (`n` elements at `bytes`,
  // any alignment), e.g. a float32 tensor straight from a mapped file.
  void add_raw(const std::byte* bytes, std::size_t n);

  std::uint64_t count() const { return count_; }
  // #(|x| < thresholds[i]) for each i, in order.
  std::vector<std::uint64_t> below() const;
  // Largest |x| bit pattern below `limit` seen (0 when none): the finite maximum
  // when limit is the infinity pattern.
  Bits max_below(Bits limit) const;

 private:
  std::vector<Bits> thresholds_;
  std::vector<std::uint32_t> base_;   // per bin: #thresholds <= the bin's first pattern (bins + 1: zeros)
  std::vector<std::uint8_t> split_;   // per bin: a threshold lies strictly inside
  std::vector<std::uint64_t> hist_;   // unsplit elements per bin
  std::vector<std::uint64_t> bucket_; // split elements per bucket j: #thresholds <= |x| is j
  std::vector<Bits> max_per_bin_;     // per bin: the largest pattern seen
  std::uint64_t count_ = 0;
};

extern template class ThresholdCounter<std::uint32_t>;
extern template class ThresholdCounter<std::uint64_t>;

}  // namespace mpverify::analysis
