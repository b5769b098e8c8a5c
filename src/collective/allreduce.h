// Reduced-precision all-reduce across ranks, simulated with the emulator's
// arithmetic: one gradient row per rank, summed in a format in the order a
// collective library uses (docs/allreduce.md defines each order exactly).
//
// Every input is first rounded to the format (after a division or scaling
// where asked), every addition is rounded once to the format, and the
// counters record what each rounding did (emu/counters.h: swamping is a lost
// update as emu/lost_update.h defines it, with w the partial sum that
// receives and u the addend sent to it).
//
//   ring            chunk c (numpy.array_split boundaries) is accumulated as
//                   acc = x[c], acc = fl(acc + x[(c+j) mod N]) for j = 1..N-1
//                   (the textbook ring reduce-scatter), then copied to all.
//   tree            ranks summed pairwise in rank order, level by level,
//                   (0+1), (2+3), ..., an odd one out passing up unchanged.
//   reduce_scatter  the ring whose chunk c ends on rank c (NCCL's and thus
//                   FSDP's reduce-scatter): acc = x[c+1], then x[c+2], ...,
//                   x[c] last; the result is the concatenation of the shards.
//
// Division by N (an average, as FSDP takes it): before the sum (each rank's
// rounded input divided and rounded again), after it, split as FSDP's
// predivide/postdivide factors, or NCCL's ReduceOp.AVG for floats (each
// input multiplied by fl(1/N) before the sum).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <optional>
#include <vector>

#include "collective/exact_sum.h"
#include "collective/reduce_kernel.h"
#include "emu/counters.h"
#include "emu/quantize.h"

namespace mpverify::collective {

enum class Algorithm { ring, tree, reduce_scatter };
enum class Divide { none, before, after, split, premul };
// per_rank: each rank's power-of-two scale from its amax, the sum carried at
// the smallest of them (docs/allreduce.md, "Scaling").
enum class Scaling { none, per_rank };

std::string_view to_string(Algorithm a);
std::string_view to_string(Divide d);
std::string_view to_string(Scaling s);
std::optional<Algorithm> parse_algorithm(std::string_view text);  // ring, tree, reduce-scatter
std::optional<Divide> parse_divide(std::string_view text);        // none, before, after, split, premul
std::optional<Scaling> parse_scaling(std::string_view text);      // none, per-rank

constexpr std::size_t kMaxRanks = 1u << 20;

struct AllreduceSpec {
  emu::QuantizeSpec rounding;  // format, rounding mode, stochastic seed (streams: docs/allreduce.md)
  Algorithm algorithm = Algorithm::ring;
  Divide divide = Divide::none;
  Scaling scaling = Scaling::none;
  KernelPath path = KernelPath::automatic;
};

struct AllreduceCounters {
  emu::Counters inputs;     // every input rounded to the format (after scaling)
  emu::Counters division;   // the divisions (before: one per input; after: one per result)
  emu::Counters additions;  // every addition
  AllreduceCounters& operator+=(const AllreduceCounters& o);
};

// The factors of a division mode for N ranks.
struct Divisors {
  double before = 1;  // inputs divided by this before the sum
  double after = 1;   // the sum divided by this
  double premul = 1;  // inputs multiplied by this (a value of the format)
  std::uint64_t total_ranks = 1;
  // What the exact reference divides by: N with any division, 1 without.
  std::uint64_t total() const;
};
Divisors divisors(Divide d, std::size_t ranks, const Rounder& rounder);
// FSDP's predivide factor, as PyTorch computes it (f = 1; while N % f == 0
// and N / f > f: f *= 2); the postdivide factor is N / f.
std::uint64_t fsdp_predivide_factor(std::uint64_t ranks);

// Per-rank scaling: rank r's scale 2^k_r, the largest power of two with
// amax_r * 2^k_r <= max_finite / N (1 for an all-zero row), and the shared
// scale, the smallest of them.
// Infinity for a row without a finite non-zero value (no constraint).
double rank_scale(std::span<const float> row, std::size_t ranks, const formats::Format& format);
// The smallest rank_scale over the rows (1 when every row is zero).
double shared_scale(const RankRows& rows, const formats::Format& format);

// Chunk c of n elements cut into `ranks` pieces as numpy.array_split does.
struct Chunk {
  std::size_t begin = 0, end = 0;
};
Chunk ring_chunk(std::size_t n, std::size_t ranks, std::size_t c);

struct AllreduceResult {
  std::vector<float> values;  // the reduced vector (float32), after any division and unscaling
  AllreduceCounters counters;
  Divisors divisors;
  double scale = 1;           // the shared scale (per_rank scaling), else 1
};

// rows: ranks x n, 2 <= ranks <= kMaxRanks. Throws std::invalid_argument on bad shapes.
AllreduceResult allreduce(const RankRows& rows, const AllreduceSpec& spec);

// The building blocks the MPI ring shares with the simulation, so both run
// the same arithmetic: rank r's rows [begin, end) prepared for the sum
// (scaled, rounded, divided), and the final step of one element range.
struct InputStage {
  const Rounder& rounder;
  Divisors divisors;
  double scale = 1;
  std::size_t ranks = 0;
  void prepare(std::span<const float> x, std::size_t rank, std::size_t first_index, std::span<float> out,
               AllreduceCounters& counters) const;
  void finish(std::span<float> values, std::size_t first_index, AllreduceCounters& counters) const;
};

}  // namespace mpverify::collective
