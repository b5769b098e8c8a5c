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
// "split"; elements falling in split bins are also copied to a side list and
// compared against that bin's thresholds afterwards (their histogram counts
// are then ignored). Each block is first scanned (bin of each element, the
// side list, the finite maximum) without branches, on AVX-512 where the CPU
// has it (threshold_counter_x86.cpp) and otherwise by its portable twin; the
// histogram increments are then spread over several tables so that repeats
// of a bin do not wait on each other's stores. A large add_raw is split
// between threads with their own tables, merged afterwards: every count is
// exact and order-free, so the result does not depend on the thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace mpverify::analysis {

// Which block scan a counter uses. Both give bit-for-bit the same counts
// (tests hold them together); `avx512` exists for float32 only.
enum class ScanPath { automatic, portable, avx512 };

// How values are binned (float32 only; double is always `coarse`):
//  - coarse: the top bits (exponent + 3 fraction bits); thresholds inside a
//    bin send its elements to the side list;
//  - aligned, chosen by `automatic` when the thresholds' fraction fields (of
//    those at or above float's smallest normal) take at most 8 values, as the
//    bounds of power-of-two scales do (0 for binade edges, 1 just above a
//    power of two, the top of a binade for a rounding midpoint): each binade
//    is cut at those fraction values, so every such threshold is a bin's
//    first pattern and only float's subnormals (the thresholds below the
//    smallest normal, if any, crowd there) go to the side list.
enum class BinLayout { automatic, coarse };

// True when this CPU runs the AVX-512 scan.
bool cpu_has_avx512_scan();

// The thread count new counters start with (at first: the hardware's, at
// most 4). For programs that build counters indirectly (analyze_path) and
// want another count, e.g. a benchmark comparing one thread with two.
void set_default_counter_threads(std::size_t threads);
std::size_t default_counter_threads();

template <class Bits>  // std::uint32_t for float, std::uint64_t for double
class ThresholdCounter {
 public:
  static constexpr int total_bits = 8 * sizeof(Bits);
  static constexpr int shift = total_bits == 32 ? 20 : 49;  // keeps exponent + 3 fraction bits
  static constexpr std::size_t bins = std::size_t{1} << (total_bits - 1 - shift);
  static constexpr Bits magnitude_mask = static_cast<Bits>(~Bits{0} >> 1);

  // `thresholds`: sorted, unique, each in (0, magnitude_mask]; std::invalid_argument otherwise.
  // `path`: automatic picks AVX-512 for float32 where the CPU has it; asking
  // for avx512 on a CPU without it, or for double, is std::invalid_argument.
  explicit ThresholdCounter(std::vector<Bits> thresholds, ScanPath path = ScanPath::automatic,
                            BinLayout layout = BinLayout::automatic);

  // Values given as raw little-endian bit patterns (`n` elements at `bytes`,
  // any alignment), e.g. a float32 tensor straight from a mapped file.
  void add_raw(const std::byte* bytes, std::size_t n);

  std::uint64_t count() const { return count_; }
  // #(|x| < thresholds[i]) for each i, in order.
  std::vector<std::uint64_t> below() const;
  // The largest finite |x| bit pattern seen (0 when none).
  Bits max_finite() const { return max_finite_; }
  ScanPath path() const { return path_; }
  // True when the aligned layout is in use (see BinLayout).
  bool aligned() const { return !cuts_.empty(); }
  // Threads one add_raw may use (default_counter_threads() at construction); each
  // takes at least `min_per_thread` elements, so small calls stay on one.
  void set_threads(std::size_t threads);
  std::size_t threads() const { return threads_; }
  static constexpr std::size_t min_per_thread = std::size_t{1} << 18;

 private:
  std::vector<Bits> thresholds_;      // followed by `search_width_ - 1` copies of ~0 (above every |x|)
  std::size_t count_thresholds_ = 0;  // without that padding
  std::size_t search_width_ = 1;      // a power of two above the most thresholds strictly inside one bin
  std::vector<std::uint32_t> base_;   // per bin: #thresholds <= the bin's first pattern (bins + 1: zeros)
  std::vector<std::uint8_t> split_;   // per bin: a threshold lies strictly inside
  std::vector<std::uint32_t> width_;  // per bin: the power of two above its inside thresholds (bisection steps)
  std::vector<std::uint32_t> split_bits_;  // the same, one bit per bin (bin b: word b / 32, bit b % 32)
  std::vector<std::uint64_t> hist_;   // elements per bin (split bins' counts unused)
  // The aligned layout (empty cuts_: coarse): bin = exponent field << cut_log2_
  // + #(cuts_[1..] <= fraction field); cuts_[0] = 0, cuts_[1] = 1 (zero alone).
  std::vector<std::uint32_t> cuts_;
  int cut_log2_ = 0;
  std::vector<std::uint32_t> aligned_base_;  // per aligned bin: #thresholds <= its first pattern
  std::size_t bucket_stride_;         // buckets per table: the thresholds + 1
  std::vector<std::uint64_t> bucket_; // split elements per bucket j (#thresholds <= |x| is j), over rotating tables
  ScanPath path_ = ScanPath::portable;
  std::size_t threads_ = 1;
  Bits max_finite_ = 0;
  std::uint64_t count_ = 0;

  // Counts n elements into the given tables (hist_'s and bucket_'s shapes).
  void count_into(const std::byte* bytes, std::size_t n, std::uint64_t* hist, std::uint64_t* bucket,
                  Bits& max_finite) const;
};

extern template class ThresholdCounter<std::uint32_t>;
extern template class ThresholdCounter<std::uint64_t>;

namespace detail {

// One block of a scan: for each of the `m` values at `in`, its magnitude's
// bin (the top bits; `zero_bin` for zero) into bin[i]; the magnitudes whose
// bin has its bit set in `split_bits` appended, in order, to `side` (which
// has room for m + 16); the largest finite magnitude (below `inf`) folded
// into `max_finite`. Returns how many went to `side`.
template <class Bits>
std::size_t scan_block_portable(const std::byte* in, std::size_t m, const std::uint32_t* split_bits,
                                std::uint16_t* bin, Bits* side, Bits& max_finite);
// The same on AVX-512 for float32 (threshold_counter_x86.cpp); requires cpu_has_avx512_scan().
std::size_t scan_block_f32_avx512(const std::byte* in, std::size_t m, const std::uint32_t* split_bits,
                                  std::uint16_t* bin, std::uint32_t* side, std::uint32_t& max_finite);
// The histogram tables a fused scan counts into: four tables `stride` apart,
// element i of a block into table i % 4 (so that repeats of a bin do not
// wait on each other's stores).
struct HistTables {
  std::uint64_t* counts;
  std::size_t stride;
};
// One block of the aligned layout (float32): bin[i] = the value's aligned bin
// (`cuts`: `cut_count` <= 8 sorted fraction values, cuts[0] = 0, cuts[1] = 1;
// bins of 1 << cut_log2 per binade), counted into `hist` in the same pass
// (the increments then overlap the vector work instead of following it);
// the non-zero magnitudes below float's smallest normal appended to `side`;
// the finite maximum as above.
std::size_t scan_block_aligned_portable(const std::byte* in, std::size_t m, const std::uint32_t* cuts, int cut_count,
                                        int cut_log2, std::uint16_t* bin, HistTables hist, std::uint32_t* side,
                                        std::uint32_t& max_finite);
std::size_t scan_block_aligned_f32_avx512(const std::byte* in, std::size_t m, const std::uint32_t* cuts,
                                          int cut_count, int cut_log2, std::uint16_t* bin, HistTables hist,
                                          std::uint32_t* side, std::uint32_t& max_finite);

}  // namespace detail

}  // namespace mpverify::analysis
