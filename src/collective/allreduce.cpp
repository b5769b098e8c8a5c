#include "collective/allreduce.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "collective/streams.h"
#include "emu/native_rounding.h"
#include "formats/fp_environment.h"

namespace mpverify::collective {

namespace {

constexpr std::size_t kRingBlock = 2048;   // elements of one chunk reduced together (acc and addend in L1)
constexpr std::size_t kTreeWork = 1u << 20;  // floats of the tree's per-block work area (ranks x block)

// One rounding of a double: through the block kernel's fast path when the
// value is a float (the same bits and counts as the generic rounding), else
// the generic rounding of the double (an exact value or its round-to-odd stand-in).
float round_double(const Rounder& rounder, double v, std::uint64_t stream, std::uint64_t index,
                   emu::Counters& counters) {
  const float f = static_cast<float>(v);
  if (static_cast<double>(f) == v) {
    float out;
    rounder.quantize({&f, 1}, {&out, 1}, stream, index, counters);
    return out;
  }
  return rounder.round_exact(v, stream, index, counters);
}

// fl(q / d) rounded once: the quotient rounded to odd in double (exact when
// the remainder q - quot * d, exact by FMA, is zero), which rounds to the
// format as the exact quotient does (round-to-odd, 53 >= p + 2).
float divide(const Rounder& rounder, float q, double d, std::uint64_t stream, std::uint64_t index,
             emu::Counters& counters) {
  const double x = q;
  const double quot = x / d;
  if (!std::isfinite(quot) || !std::isfinite(x)) return rounder.round_exact(quot, stream, index, counters);
  const double r = std::fma(-quot, d, x);
  if (r == 0) return round_double(rounder, quot, stream, index, counters);
  const bool away = (r < 0) != (quot < 0);  // |quot| above the exact quotient
  return rounder.round_exact(emu::detail::odd_below(quot, away), stream, index, counters);
}

void check_rows(const RankRows& rows) {
  if (rows.ranks < 1 || rows.ranks > kMaxRanks)
    throw std::invalid_argument("allreduce: " + std::to_string(rows.ranks) + " ranks; expected 1 to " +
                                std::to_string(kMaxRanks));
  if (rows.data.size() != rows.ranks * rows.n)
    throw std::invalid_argument("allreduce: " + std::to_string(rows.data.size()) + " values for " +
                                std::to_string(rows.ranks) + " ranks of " + std::to_string(rows.n));
}

void ring_sum(const RankRows& rows, const InputStage& stage, std::size_t offset, std::span<float> out,
              AllreduceCounters& counters) {
  const std::size_t ranks = rows.ranks;
  std::vector<float> addend(kRingBlock);
  for (std::size_t c = 0; c < ranks; ++c) {
    const Chunk chunk = ring_chunk(rows.n, ranks, c);
    const std::size_t first = (c + offset) % ranks;
    for (std::size_t from = chunk.begin; from < chunk.end; from += kRingBlock) {
      const std::size_t len = std::min(kRingBlock, chunk.end - from);
      const std::span<float> acc = out.subspan(from, len);
      const std::span<float> u(addend.data(), len);
      stage.prepare(rows.row(first).subspan(from, len), first, from, acc, counters);
      for (std::size_t j = 1; j < ranks; ++j) {
        const std::size_t r = (first + j) % ranks;
        stage.prepare(rows.row(r).subspan(from, len), r, from, u, counters);
        stage.rounder.add(acc, u, addition_stream(j), from, counters.additions);
      }
    }
  }
}

void tree_sum(const RankRows& rows, const InputStage& stage, std::span<float> out, AllreduceCounters& counters) {
  const std::size_t ranks = rows.ranks;
  const std::size_t block = std::clamp<std::size_t>(kTreeWork / ranks, 16, 1024);
  std::vector<float> work(ranks * block);
  for (std::size_t from = 0; from < rows.n; from += block) {
    const std::size_t len = std::min(block, rows.n - from);
    auto node = [&](std::size_t r) { return std::span<float>(work.data() + r * block, len); };
    for (std::size_t r = 0; r < ranks; ++r) stage.prepare(rows.row(r).subspan(from, len), r, from, node(r), counters);
    std::uint64_t level = 1;
    for (std::size_t stride = 1; stride < ranks; stride *= 2, ++level)
      for (std::size_t i = 0; i + stride < ranks; i += 2 * stride)
        stage.rounder.add(node(i), node(i + stride), tree_stream(level, i), from, counters.additions);
    std::copy_n(work.data(), len, out.data() + from);
  }
}

}  // namespace

std::string_view to_string(Algorithm a) {
  switch (a) {
    case Algorithm::ring: return "ring";
    case Algorithm::tree: return "tree";
    case Algorithm::reduce_scatter: return "reduce-scatter";
  }
  return "?";
}

std::string_view to_string(Divide d) {
  switch (d) {
    case Divide::none: return "none";
    case Divide::before: return "before";
    case Divide::after: return "after";
    case Divide::split: return "split";
    case Divide::premul: return "premul";
  }
  return "?";
}

std::string_view to_string(Scaling s) { return s == Scaling::none ? "none" : "per-rank"; }

std::optional<Algorithm> parse_algorithm(std::string_view t) {
  for (Algorithm a : {Algorithm::ring, Algorithm::tree, Algorithm::reduce_scatter})
    if (t == to_string(a)) return a;
  return std::nullopt;
}

std::optional<Divide> parse_divide(std::string_view t) {
  for (Divide d : {Divide::none, Divide::before, Divide::after, Divide::split, Divide::premul})
    if (t == to_string(d)) return d;
  return std::nullopt;
}

std::optional<Scaling> parse_scaling(std::string_view t) {
  for (Scaling s : {Scaling::none, Scaling::per_rank})
    if (t == to_string(s)) return s;
  return std::nullopt;
}

AllreduceCounters& AllreduceCounters::operator+=(const AllreduceCounters& o) {
  inputs += o.inputs;
  division += o.division;
  additions += o.additions;
  return *this;
}

std::uint64_t fsdp_predivide_factor(std::uint64_t ranks) {
  std::uint64_t factor = 1;
  while (ranks % factor == 0 && ranks > factor * factor) factor *= 2;  // N / f > f over the reals
  return factor;
}

std::uint64_t Divisors::total() const { return before == 1 && after == 1 && premul == 1 ? 1 : total_ranks; }

Divisors divisors(Divide d, std::size_t ranks, const Rounder& rounder) {
  Divisors out;
  out.total_ranks = ranks;
  const double n = static_cast<double>(ranks);
  switch (d) {
    case Divide::none: break;
    case Divide::before: out.before = n; break;
    case Divide::after: out.after = n; break;
    case Divide::split: {
      const double f = static_cast<double>(fsdp_predivide_factor(ranks));
      out.before = f;
      out.after = n / f;  // PyTorch's world_size / predivide factor, a double (1.5 for N = 6)
      break;
    }
    case Divide::premul: {
      // NCCL: the scalar is float(1.0 / nRanks) converted to the data type.
      emu::Counters unused;
      out.premul = rounder.round_exact(static_cast<double>(static_cast<float>(1.0 / n)), 0, 0, unused);
      if (rounder.spec().rounding == formats::Rounding::stochastic)
        throw std::invalid_argument("--divide premul rounds its scalar to nearest: use it with --rounding rne");
      break;
    }
  }
  return out;
}

double rank_scale(std::span<const float> row, std::size_t ranks, const formats::Format& format) {
  double amax = 0;
  for (const float x : row)
    if (std::isfinite(x)) amax = std::max(amax, static_cast<double>(std::fabs(x)));
  if (amax == 0) return std::numeric_limits<double>::infinity();  // no constraint from this rank
  const double limit = format.max_finite();
  const double n = static_cast<double>(ranks);
  // amax * 2^k * n is exact in double (24 + 21 bits): step k to the largest that fits.
  int k = std::ilogb(limit) - std::ilogb(amax) - static_cast<int>(std::ceil(std::log2(n)));
  while (std::ldexp(amax, k + 1) * n <= limit) ++k;
  while (std::ldexp(amax, k) * n > limit) --k;
  return std::ldexp(1.0, k);
}

Chunk ring_chunk(std::size_t n, std::size_t ranks, std::size_t c) {
  const std::size_t q = n / ranks, rem = n % ranks;
  const std::size_t begin = c * q + std::min(c, rem);
  return {begin, begin + q + (c < rem ? 1 : 0)};
}

void InputStage::prepare(std::span<const float> x, std::size_t rank, std::size_t first_index, std::span<float> out,
                         AllreduceCounters& counters) const {
  if (scale == 1) {
    rounder.quantize(x, out, input_stream(rank), first_index, counters.inputs);
  } else {
    for (std::size_t i = 0; i < x.size(); ++i)  // x * 2^k is exact in double
      out[i] = round_double(rounder, static_cast<double>(x[i]) * scale, input_stream(rank), first_index + i,
                            counters.inputs);
  }
  if (divisors.before != 1)
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = divide(rounder, out[i], divisors.before, division_stream(rank), first_index + i, counters.division);
  if (divisors.premul != 1)
    for (std::size_t i = 0; i < out.size(); ++i)  // a product of two format values is exact in double
      out[i] = round_double(rounder, static_cast<double>(out[i]) * divisors.premul, division_stream(rank),
                            first_index + i, counters.division);
}

void InputStage::finish(std::span<float> values, std::size_t first_index, AllreduceCounters& counters) const {
  if (divisors.after != 1)
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] = divide(rounder, values[i], divisors.after, post_division_stream(), first_index + i,
                         counters.division);
  if (scale != 1)  // back from the scaled domain: a power of two, exact unless float32 underflows
    for (float& v : values) v = static_cast<float>(static_cast<double>(v) / scale);
}

double shared_scale(const RankRows& rows, const formats::Format& format) {
  double s = std::numeric_limits<double>::infinity();
  for (std::size_t r = 0; r < rows.ranks; ++r) s = std::min(s, rank_scale(rows.row(r), rows.ranks, format));
  return std::isfinite(s) ? s : 1.0;
}

AllreduceResult allreduce(const RankRows& rows, const AllreduceSpec& spec) {
  formats::check_fp_environment("collective::allreduce");
  check_rows(rows);
  const Rounder rounder(spec.rounding, spec.path);
  AllreduceResult result;
  result.divisors = divisors(spec.divide, rows.ranks, rounder);
  if (spec.scaling == Scaling::per_rank) result.scale = shared_scale(rows, spec.rounding.format);
  const InputStage stage{rounder, result.divisors, result.scale, rows.ranks};
  result.values.assign(rows.n, 0.0f);
  if (spec.algorithm == Algorithm::tree) tree_sum(rows, stage, result.values, result.counters);
  else ring_sum(rows, stage, spec.algorithm == Algorithm::reduce_scatter ? 1 : 0, result.values, result.counters);
  stage.finish(result.values, 0, result.counters);
  return result;
}

}  // namespace mpverify::collective
