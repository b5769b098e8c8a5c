#include "collective/mpi_allreduce.h"

// The C API only: OpenMPI's and MPICH's deprecated C++ bindings are left out.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "collective/streams.h"
#include "formats/fp_environment.h"

namespace mpverify::collective {

namespace {

struct World {
  int rank = 0, size = 1;
};

World world() {
  World w;
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  return w;
}

void check(int code, const char* what) {
  if (code != MPI_SUCCESS) throw std::runtime_error(std::string("MPI: ") + what + " failed (code " + std::to_string(code) + ")");
}

// Every rank must hold a row of the same length.
void check_same_length(std::size_t n) {
  unsigned long long mine = n, lo = 0, hi = 0;
  check(MPI_Allreduce(&mine, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
  check(MPI_Allreduce(&mine, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  if (lo != hi)
    throw std::invalid_argument("mpi_allreduce: the ranks' rows differ in length (" + std::to_string(lo) + " to " +
                                std::to_string(hi) + ")");
}

constexpr std::size_t kCounterFields = 12;

std::array<std::uint64_t, kCounterFields> pack(const emu::Counters& c) {
  return {c.elements,  c.zeros_in,    c.nonfinite_in, c.inexact,         c.underflow, c.underflow_to_zero,
          c.subnormal, c.overflow,    c.nan_created,  c.addends_nonzero, c.swamped,   c.truncated};
}

emu::Counters unpack(const std::uint64_t* v) {
  emu::Counters c;
  c.elements = v[0], c.zeros_in = v[1], c.nonfinite_in = v[2], c.inexact = v[3], c.underflow = v[4];
  c.underflow_to_zero = v[5], c.subnormal = v[6], c.overflow = v[7], c.nan_created = v[8];
  c.addends_nonzero = v[9], c.swamped = v[10], c.truncated = v[11];
  return c;
}

AllreduceCounters sum_to_root(const AllreduceCounters& mine) {
  std::array<std::uint64_t, 3 * kCounterFields> local{}, total{};
  const auto a = pack(mine.inputs), b = pack(mine.division), c = pack(mine.additions);
  std::copy(a.begin(), a.end(), local.begin());
  std::copy(b.begin(), b.end(), local.begin() + kCounterFields);
  std::copy(c.begin(), c.end(), local.begin() + 2 * kCounterFields);
  check(MPI_Reduce(local.data(), total.data(), static_cast<int>(local.size()), MPI_UINT64_T, MPI_SUM, 0,
                   MPI_COMM_WORLD),
        "MPI_Reduce");
  return {unpack(total.data()), unpack(total.data() + kCounterFields), unpack(total.data() + 2 * kCounterFields)};
}

int as_int(std::size_t v) {
  if (v > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw std::invalid_argument("mpi_allreduce: a message of " + std::to_string(v) + " floats is beyond MPI's int count");
  return static_cast<int>(v);
}

// The ring reduce-scatter: at step s rank r sends its partial of chunk
// (r - s - offset) mod N to r + 1 and adds its own values to the partial of
// chunk (r - 1 - s - offset) mod N from r - 1 (hop s + 1 of that chunk).
// Rank r ends with chunk (r + 1 - offset) mod N, which is gathered to rank 0.
std::vector<float> ring(std::span<const float> x, const InputStage& stage, std::size_t offset, World w,
                        AllreduceCounters& counters) {
  const std::size_t n = x.size(), N = static_cast<std::size_t>(w.size), r = static_cast<std::size_t>(w.rank);
  const std::size_t max_chunk = n / N + 1;
  std::vector<float> current(max_chunk), received(max_chunk), own(max_chunk);
  auto chunk_of = [&](std::size_t back) { return ring_chunk(n, N, (r + 2 * N - back % N - offset) % N); };
  Chunk c = chunk_of(0);
  stage.prepare(x.subspan(c.begin, c.end - c.begin), r, c.begin, std::span(current).first(c.end - c.begin), counters);
  const int next = static_cast<int>((r + 1) % N), previous = static_cast<int>((r + N - 1) % N);
  for (std::size_t s = 0; s + 1 < N; ++s) {
    const Chunk send = chunk_of(s), recv = chunk_of(s + 1);
    const std::size_t len = recv.end - recv.begin;
    check(MPI_Sendrecv(current.data(), as_int(send.end - send.begin), MPI_FLOAT, next, static_cast<int>(s),
                       received.data(), as_int(len), MPI_FLOAT, previous, static_cast<int>(s), MPI_COMM_WORLD,
                       MPI_STATUS_IGNORE),
          "MPI_Sendrecv");
    const std::span<float> u = std::span(own).first(len);
    stage.prepare(x.subspan(recv.begin, len), r, recv.begin, u, counters);
    stage.rounder.add(std::span(received).first(len), u, addition_stream(s + 1), recv.begin, counters.additions);
    std::swap(current, received);
  }
  c = chunk_of(N - 1);
  std::vector<int> counts(N), displacements(N);
  for (std::size_t q = 0; q < N; ++q) {
    const Chunk held = ring_chunk(n, N, (q + 1 + N - offset) % N);
    counts[q] = as_int(held.end - held.begin);
    displacements[q] = as_int(held.begin);
  }
  std::vector<float> out(w.rank == 0 ? n : 0);
  check(MPI_Gatherv(current.data(), as_int(c.end - c.begin), MPI_FLOAT, out.data(), counts.data(),
                    displacements.data(), MPI_FLOAT, 0, MPI_COMM_WORLD),
        "MPI_Gatherv");
  return out;
}

// The rank-order tree: at level L (stride 2^(L-1)) rank i, a multiple of
// 2 * stride, adds the partial of rank i + stride; rank 0 ends with the sum.
std::vector<float> tree(std::span<const float> x, const InputStage& stage, World w, AllreduceCounters& counters) {
  const std::size_t n = x.size(), N = static_cast<std::size_t>(w.size), r = static_cast<std::size_t>(w.rank);
  std::vector<float> acc(n), received(n);
  stage.prepare(x, r, 0, acc, counters);
  std::uint64_t level = 1;
  for (std::size_t stride = 1; stride < N; stride *= 2, ++level) {
    if (r % (2 * stride) == stride) {
      check(MPI_Send(acc.data(), as_int(n), MPI_FLOAT, static_cast<int>(r - stride), static_cast<int>(level),
                     MPI_COMM_WORLD),
            "MPI_Send");
      break;
    }
    if (r % (2 * stride) == 0 && r + stride < N) {
      check(MPI_Recv(received.data(), as_int(n), MPI_FLOAT, static_cast<int>(r + stride), static_cast<int>(level),
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE),
            "MPI_Recv");
      stage.rounder.add(acc, received, tree_stream(level, r), 0, counters.additions);
    }
  }
  if (w.rank != 0) acc.clear();
  return acc;
}

}  // namespace

bool mpi_built() { return true; }

MpiAllreduceResult mpi_allreduce(std::span<const float> own_row, const AllreduceSpec& spec) {
  formats::check_fp_environment("collective::mpi_allreduce");
  const World w = world();
  check_same_length(own_row.size());
  const Rounder rounder(spec.rounding, spec.path);
  MpiAllreduceResult result;
  result.divisors = divisors(spec.divide, static_cast<std::size_t>(w.size), rounder);
  if (spec.scaling == Scaling::per_rank) {
    const double mine = rank_scale(own_row, static_cast<std::size_t>(w.size), spec.rounding.format);
    double shared = 0;
    check(MPI_Allreduce(&mine, &shared, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
    result.scale = std::isfinite(shared) ? shared : 1.0;
  }
  const InputStage stage{rounder, result.divisors, result.scale, static_cast<std::size_t>(w.size)};
  AllreduceCounters mine;
  result.values = spec.algorithm == Algorithm::tree
                      ? tree(own_row, stage, w, mine)
                      : ring(own_row, stage, spec.algorithm == Algorithm::reduce_scatter ? 1 : 0, w, mine);
  if (w.rank == 0) stage.finish(result.values, 0, mine);
  result.counters = sum_to_root(mine);
  if (w.rank != 0) result.counters = {};
  return result;
}

}  // namespace mpverify::collective
