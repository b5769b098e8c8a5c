#include "analysis/threshold_counter.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace mpverify::analysis {

template <class Bits>
ThresholdCounter<Bits>::ThresholdCounter(std::vector<Bits> thresholds)
    : thresholds_(std::move(thresholds)),
      base_(bins + 1),
      split_(bins + 1),
      hist_(bins + 1),
      bucket_(thresholds_.size() + 1),
      max_per_bin_(bins + 1) {
  for (std::size_t i = 0; i < thresholds_.size(); ++i) {
    if (thresholds_[i] == 0 || thresholds_[i] > magnitude_mask || (i > 0 && thresholds_[i] <= thresholds_[i - 1]))
      throw std::invalid_argument("ThresholdCounter: thresholds must be sorted, unique and in (0, max]");
  }
  // Bin `bins` holds the zeros alone (base 0, never split), so that bin 0
  // starts at pattern 1 and a threshold of 1 (zero / non-zero) splits nothing.
  for (std::size_t b = 0; b < bins; ++b) {
    const Bits first = b == 0 ? Bits{1} : static_cast<Bits>(static_cast<Bits>(b) << shift);
    const Bits last = static_cast<Bits>(first + ((Bits{1} << shift) - 1));
    base_[b] = static_cast<std::uint32_t>(std::upper_bound(thresholds_.begin(), thresholds_.end(), first) -
                                          thresholds_.begin());
    const auto below_last = std::upper_bound(thresholds_.begin(), thresholds_.end(), last) - thresholds_.begin();
    split_[b] = static_cast<std::uint32_t>(below_last) != base_[b];
  }
}

template <class Bits>
void ThresholdCounter<Bits>::add_raw(const std::byte* bytes, std::size_t n) {
  std::uint64_t* const hist = hist_.data();
  const std::uint8_t* const split = split_.data();
  Bits* const maxes = max_per_bin_.data();
  for (std::size_t i = 0; i < n; ++i) {
    Bits a;
    std::memcpy(&a, bytes + i * sizeof(Bits), sizeof(Bits));
    a &= magnitude_mask;
    const std::size_t b = static_cast<std::size_t>(a >> shift) + (a == 0 ? bins : 0);  // compiles to a cmov
    maxes[b] = std::max(maxes[b], a);
    if (split[b]) [[unlikely]] {
      std::size_t j = base_[b];
      while (j < thresholds_.size() && thresholds_[j] <= a) ++j;
      ++bucket_[j];
    } else {
      ++hist[b];
    }
  }
  count_ += n;
}

template <class Bits>
std::vector<std::uint64_t> ThresholdCounter<Bits>::below() const {
  std::vector<std::uint64_t> bucket = bucket_;
  for (std::size_t b = 0; b <= bins; ++b) bucket[base_[b]] += hist_[b];
  std::vector<std::uint64_t> out(thresholds_.size());
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < thresholds_.size(); ++i) {
    sum += bucket[i];  // bucket i: exactly i thresholds <= |x|, i.e. |x| < thresholds[i]
    out[i] = sum;
  }
  return out;
}

template <class Bits>
Bits ThresholdCounter<Bits>::max_below(Bits limit) const {
  Bits best = 0;
  for (std::size_t b = 0; b < bins; ++b)  // the zero bin's maximum is 0
    if (max_per_bin_[b] < limit) best = std::max(best, max_per_bin_[b]);
    else if (static_cast<Bits>(static_cast<Bits>(b) << shift) < limit) {
      // The bin straddles the limit and its maximum is above it: not
      // recoverable from the maxima alone. Only the infinity pattern's bin
      // (finite values never share it) is asked about, so this cannot happen.
      throw std::logic_error("ThresholdCounter::max_below: limit inside a bin");
    }
  return best;
}

template class ThresholdCounter<std::uint32_t>;
template class ThresholdCounter<std::uint64_t>;

}  // namespace mpverify::analysis
