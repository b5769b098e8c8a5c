#include "analysis/threshold_counter.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace mpverify::analysis {

namespace {

template <class Bits>
constexpr Bits inf_pattern = static_cast<Bits>(ThresholdCounter<Bits>::magnitude_mask -
                                               (ThresholdCounter<Bits>::magnitude_mask >> (sizeof(Bits) == 4 ? 8 : 11)));

// Histogram tables the increments rotate over: consecutive elements in the
// same bin then touch different counters instead of waiting for the previous
// store. Four float tables (4 x 2049 x 4 bytes) still fit in L1; the double
// table is too large for that to pay.
template <class Bits>
constexpr std::size_t hist_tables = sizeof(Bits) == 4 ? 4 : 1;

constexpr std::size_t block = 4096;  // elements per scan: bins and side list stay in L1

// The side list's bucket tables, rotated over for the same reason: its
// elements crowd into the few buckets around the split bins' thresholds, and
// one table made each increment wait for the last (a cost seen in profiles).
constexpr std::size_t side_tables = 4;

// Counts side-list elements into the rotating bucket tables (stride apart):
// bucket j = #(thresholds <= a), by bisection from the bin's base over
// width[bin] / 2, ..., 1 steps (thresholds padded above with ~0, so no bounds
// check). Nearly every split bin holds one threshold (a category's bound for
// one scale): one comparison, and the branch to the general loop, taken by
// the bins of float's subnormals where the binade edges crowd, is predicted.
template <class Bits>
void count_side(const Bits* side, std::size_t k, const std::uint32_t* base, const std::uint32_t* width,
                const Bits* thresholds, int shift, std::uint64_t* bucket, std::size_t stride) {
  auto bucket_of = [&](Bits a) {
    const std::size_t b = static_cast<std::size_t>(a >> shift);
    std::size_t j = base[b];
    if (__builtin_expect(width[b] == 2, 1)) return j + (thresholds[j] <= a ? 1 : 0);
    for (std::size_t step = width[b] / 2; step > 0; step /= 2) j += thresholds[j + step - 1] <= a ? step : 0;
    return j;
  };
  std::size_t s = 0;
  for (; s + side_tables <= k; s += side_tables)
    for (std::size_t t = 0; t < side_tables; ++t) ++bucket[t * stride + bucket_of(side[s + t])];
  for (; s < k; ++s) ++bucket[bucket_of(side[s])];
}

std::atomic<std::size_t> default_threads{std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 4)};

}  // namespace

void set_default_counter_threads(std::size_t threads) {
  if (threads == 0) throw std::invalid_argument("set_default_counter_threads: threads must be at least 1");
  default_threads = threads;
}

std::size_t default_counter_threads() { return default_threads; }

namespace detail {

template <class Bits>
std::size_t scan_block_portable(const std::byte* in, std::size_t m, const std::uint32_t* split_bits,
                                std::uint16_t* bin, Bits* side, Bits& max_finite) {
  using C = ThresholdCounter<Bits>;
  Bits mx = max_finite;
  std::size_t k = 0;
  for (std::size_t i = 0; i < m; ++i) {
    Bits w;
    std::memcpy(&w, in + i * sizeof(Bits), sizeof(Bits));
    const Bits a = w & C::magnitude_mask;
    const std::size_t b = a == 0 ? C::bins : static_cast<std::size_t>(a >> C::shift);
    bin[i] = static_cast<std::uint16_t>(b);
    side[k] = a;  // kept only when the bin is split: no branch to mispredict
    k += (split_bits[b / 32] >> (b % 32)) & 1u;
    mx = std::max(mx, a < inf_pattern<Bits> ? a : Bits{0});
  }
  max_finite = mx;
  return k;
}

template std::size_t scan_block_portable<std::uint32_t>(const std::byte*, std::size_t, const std::uint32_t*,
                                                        std::uint16_t*, std::uint32_t*, std::uint32_t&);
template std::size_t scan_block_portable<std::uint64_t>(const std::byte*, std::size_t, const std::uint32_t*,
                                                        std::uint16_t*, std::uint64_t*, std::uint64_t&);

std::size_t scan_block_aligned_portable(const std::byte* in, std::size_t m, const std::uint32_t* cuts, int cut_count,
                                        int cut_log2, std::uint16_t* bin, HistTables hist, std::uint32_t* side,
                                        std::uint32_t& max_finite) {
  std::uint32_t mx = max_finite;
  std::size_t k = 0;
  for (std::size_t i = 0; i < m; ++i) {
    std::uint32_t w;
    std::memcpy(&w, in + i * 4, 4);
    const std::uint32_t a = w & 0x7fffffffu, fraction = a & 0x7fffffu;
    std::uint32_t b = (a >> 23) << cut_log2;
    for (int c = 1; c < cut_count; ++c) b += fraction >= cuts[c] ? 1u : 0u;
    bin[i] = static_cast<std::uint16_t>(b);
    ++hist.counts[(i % 4) * hist.stride + b];
    side[k] = a;  // kept only for a subnormal: no branch to mispredict
    k += a != 0 && a < 0x00800000u;
    mx = std::max(mx, a < 0x7f800000u ? a : 0u);
  }
  max_finite = mx;
  return k;
}

}  // namespace detail

template <class Bits>
ThresholdCounter<Bits>::ThresholdCounter(std::vector<Bits> thresholds, ScanPath path, BinLayout layout)
    : thresholds_(std::move(thresholds)),
      count_thresholds_(thresholds_.size()),
      base_(bins + 1),
      split_(bins + 1),
      width_(bins + 1),
      split_bits_((bins + 1 + 31) / 32),
      hist_(hist_tables<Bits> * (bins + 1)),
      bucket_stride_(thresholds_.size() + 1),
      bucket_(side_tables * bucket_stride_) {
  for (std::size_t i = 0; i < thresholds_.size(); ++i) {
    if (thresholds_[i] == 0 || thresholds_[i] > magnitude_mask || (i > 0 && thresholds_[i] <= thresholds_[i - 1]))
      throw std::invalid_argument("ThresholdCounter: thresholds must be sorted, unique and in (0, max]");
  }
  if (path == ScanPath::avx512 && (sizeof(Bits) != 4 || !cpu_has_avx512_scan()))
    throw std::invalid_argument(sizeof(Bits) != 4 ? "ThresholdCounter: the AVX-512 scan is for float32 only"
                                                  : "ThresholdCounter: this CPU has no AVX-512; use the portable scan");
  path_ = path == ScanPath::automatic ? (sizeof(Bits) == 4 && cpu_has_avx512_scan() ? ScanPath::avx512
                                                                                     : ScanPath::portable)
                                      : path;
  // Bin `bins` holds the zeros alone (base 0, never split), so that bin 0
  // starts at pattern 1 and a threshold of 1 (zero / non-zero) splits nothing.
  for (std::size_t b = 0; b < bins; ++b) {
    const Bits first = b == 0 ? Bits{1} : static_cast<Bits>(static_cast<Bits>(b) << shift);
    const Bits last = static_cast<Bits>(first + ((Bits{1} << shift) - 1));
    base_[b] = static_cast<std::uint32_t>(std::upper_bound(thresholds_.begin(), thresholds_.end(), first) -
                                          thresholds_.begin());
    const auto below_last = std::upper_bound(thresholds_.begin(), thresholds_.end(), last) - thresholds_.begin();
    const std::size_t inside = static_cast<std::size_t>(below_last) - base_[b];
    split_[b] = inside != 0;
    if (inside != 0) split_bits_[b / 32] |= std::uint32_t{1} << (b % 32);
    std::size_t width = 1;
    while (width <= inside) width *= 2;
    width_[b] = static_cast<std::uint32_t>(width);
    search_width_ = std::max(search_width_, width);
  }
  if constexpr (sizeof(Bits) == 4) {
    if (layout == BinLayout::automatic) {
      std::vector<std::uint32_t> cuts = {0, 1};
      for (const Bits t : thresholds_)
        if ((t >> 23) != 0) cuts.push_back(t & 0x7fffffu);
      std::sort(cuts.begin(), cuts.end());
      cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
      if (cuts.size() <= 8) {
        cuts_ = cuts;
        while ((std::size_t{1} << cut_log2_) < cuts_.size()) ++cut_log2_;
        aligned_base_.assign(std::size_t{256} << cut_log2_, 0);
        for (std::uint32_t e = 0; e < 256; ++e)
          for (std::size_t i = 0; i < cuts_.size(); ++i)
            aligned_base_[(e << cut_log2_) + i] = static_cast<std::uint32_t>(
                std::upper_bound(thresholds_.begin(), thresholds_.end(), (e << 23) | cuts_[i]) - thresholds_.begin());
      }
    }
  }
  // Padding above every magnitude lets the side list's search run a fixed
  // number of steps without a bounds check.
  thresholds_.insert(thresholds_.end(), search_width_ - 1, static_cast<Bits>(~Bits{0}));
  threads_ = default_threads;
}

template <class Bits>
void ThresholdCounter<Bits>::set_threads(std::size_t threads) {
  if (threads == 0) throw std::invalid_argument("ThresholdCounter: threads must be at least 1");
  threads_ = threads;
}

template <class Bits>
void ThresholdCounter<Bits>::add_raw(const std::byte* bytes, std::size_t n) {
  const std::size_t parts = std::max<std::size_t>(1, std::min(threads_, n / min_per_thread));
  if (parts == 1) {
    count_into(bytes, n, hist_.data(), bucket_.data(), max_finite_);
  } else {
    // Whole blocks per part, so that every part but the last scans full vectors.
    const std::size_t per = (n / parts + block - 1) / block * block;
    struct Part {
      std::vector<std::uint64_t> hist, bucket;
      Bits max_finite = 0;
    };
    std::vector<Part> extra(parts - 1);
    std::vector<std::jthread> workers;  // joined on the way out, also when a later start throws
    for (std::size_t p = 1; p < parts; ++p) {
      Part& part = extra[p - 1];
      part.hist.assign(hist_.size(), 0);
      part.bucket.assign(bucket_.size(), 0);
      const std::size_t begin = std::min(n, p * per), end = p + 1 == parts ? n : std::min(n, (p + 1) * per);
      workers.emplace_back([this, &part, bytes, begin, end] {
        count_into(bytes + begin * sizeof(Bits), end - begin, part.hist.data(), part.bucket.data(), part.max_finite);
      });
    }
    count_into(bytes, std::min(n, per), hist_.data(), bucket_.data(), max_finite_);
    workers.clear();
    for (const Part& part : extra) {
      for (std::size_t i = 0; i < hist_.size(); ++i) hist_[i] += part.hist[i];
      for (std::size_t i = 0; i < bucket_.size(); ++i) bucket_[i] += part.bucket[i];
      max_finite_ = std::max(max_finite_, part.max_finite);
    }
  }
  count_ += n;
}

template <class Bits>
void ThresholdCounter<Bits>::count_into(const std::byte* bytes, std::size_t n, std::uint64_t* hist,
                                        std::uint64_t* bucket, Bits& max_finite) const {
  constexpr std::size_t tables = hist_tables<Bits>;
  constexpr std::size_t stride = bins + 1;
  std::uint16_t bin[block];
  Bits side[block + 16];  // + 16: the AVX-512 scan stores whole vectors
  for (std::size_t start = 0; start < n; start += block) {
    const std::size_t m = std::min(block, n - start);
    const std::byte* const in = bytes + start * sizeof(Bits);
    std::size_t k;
    bool binned = false;  // the aligned scan counts its bins itself
    if constexpr (sizeof(Bits) == 4) {
      const int cut_count = static_cast<int>(cuts_.size());
      if (cut_count != 0) {
        static_assert(hist_tables<std::uint32_t> == 4, "HistTables holds four tables");
        const detail::HistTables counts{hist, stride};
        k = path_ == ScanPath::avx512 ? detail::scan_block_aligned_f32_avx512(in, m, cuts_.data(), cut_count, cut_log2_,
                                                                              bin, counts, side, max_finite)
                                      : detail::scan_block_aligned_portable(in, m, cuts_.data(), cut_count, cut_log2_,
                                                                            bin, counts, side, max_finite);
        binned = true;
      } else {
        k = path_ == ScanPath::avx512 ? detail::scan_block_f32_avx512(in, m, split_bits_.data(), bin, side, max_finite)
                                      : detail::scan_block_portable(in, m, split_bits_.data(), bin, side, max_finite);
      }
    } else {
      k = detail::scan_block_portable(in, m, split_bits_.data(), bin, side, max_finite);
    }
    if (!binned) {
      std::size_t i = 0;
      for (; i + tables <= m; i += tables)
        for (std::size_t t = 0; t < tables; ++t) ++hist[t * stride + bin[i + t]];
      for (; i < m; ++i) ++hist[bin[i]];
    }
    count_side(side, k, base_.data(), width_.data(), thresholds_.data(), shift, bucket, bucket_stride_);
  }
}

template <class Bits>
std::vector<std::uint64_t> ThresholdCounter<Bits>::below() const {
  constexpr std::size_t stride = bins + 1;
  std::vector<std::uint64_t> bucket(bucket_stride_);
  for (std::size_t t = 0; t < side_tables; ++t)
    for (std::size_t j = 0; j < bucket_stride_; ++j) bucket[j] += bucket_[t * bucket_stride_ + j];
  if (!cuts_.empty()) {
    // Aligned bins: every one but the subnormals' (exponent field 0, above
    // the zero bin; counted from the side list) and the unused ones past the
    // last cut of each binade.
    for (std::size_t b = 0; b < aligned_base_.size(); ++b) {
      const std::size_t cut = b & ((std::size_t{1} << cut_log2_) - 1);
      if (cut >= cuts_.size() || (b >> cut_log2_ == 0 && cut != 0)) continue;
      for (std::size_t t = 0; t < hist_tables<Bits>; ++t) bucket[aligned_base_[b]] += hist_[t * stride + b];
    }
  } else {
    for (std::size_t b = 0; b <= bins; ++b) {
      if (split_[b]) continue;  // counted in `bucket_` from the side list
      for (std::size_t t = 0; t < hist_tables<Bits>; ++t) bucket[base_[b]] += hist_[t * stride + b];
    }
  }
  std::vector<std::uint64_t> out(count_thresholds_);
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < count_thresholds_; ++i) {
    sum += bucket[i];  // bucket i: exactly i thresholds <= |x|, i.e. |x| < thresholds[i]
    out[i] = sum;
  }
  return out;
}

template class ThresholdCounter<std::uint32_t>;
template class ThresholdCounter<std::uint64_t>;

}  // namespace mpverify::analysis
