// The exact sum of many floats, and each reduced element's error against it.
//
// Exact: a fixed-point accumulator of 320 bits (ten 32-bit digits held in
// 64-bit integers) whose lowest bit is 2^-149, float's smallest subnormal.
// Every finite float, and every double whose bits lie at or above 2^-149,
// adds in exactly (a 24- or 53-bit integer shifted into two or three
// digits); the digits do not carry until the end, and with at most 2^20
// terms no digit can overflow. The only rounding is the final conversion of
// the exact integer to double (relative error below 2^-52), done after the
// computed result has been subtracted exactly, so a small error between two
// large values is not lost to cancellation.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "formats/format.h"

namespace mpverify::collective {

class ExactSum {
 public:
  // Adds x exactly. False (nothing added) for NaN or infinity.
  bool add(double x);
  // The exact sum rounded to double.
  double value() const;

 private:
  std::array<std::int64_t, 10> digits_{};
};

// The ranks x n addends, row r = rank r (C order), as float32.
struct RankRows {
  std::span<const float> data;
  std::size_t ranks = 0;
  std::size_t n = 0;
  std::span<const float> row(std::size_t r) const { return data.subspan(r * n, n); }
};

struct ErrorSummary {
  std::size_t compared = 0;         // elements with finite addends and a finite result
  std::size_t nonfinite_inputs = 0;  // elements with a NaN or infinite addend (not compared)
  std::size_t nonfinite_results = 0; // finite addends but a NaN or infinite result (overflow; not compared)
  std::size_t inexact = 0;          // compared elements whose result differs from the exact value
  double max_abs_error = 0;
  std::size_t max_abs_index = 0;
  double mean_abs_error = 0;
  double max_rel_error = 0;         // |error| / |exact|, over exact != 0
  double max_ulp_error = 0;         // |error| in units in the last place of the format at the exact value
};

struct ErrorReport {
  std::vector<double> error;  // per element: result - exact (NaN where not compared)
  ErrorSummary summary;
};

// The error of each result[i] against the exact (sum over ranks of
// rows.row(r)[i]) / divisor, divisor a positive integer (1: the sum; N: the
// average), and the summary; ulps are the format's.
ErrorReport compare_to_exact(const RankRows& rows, std::span<const float> result, std::uint64_t divisor,
                             const formats::Format& format);

// One unit in the last place of the format at |x| (its smallest subnormal's
// spacing below the normal range).
double format_ulp(const formats::Format& format, double x);

}  // namespace mpverify::collective
