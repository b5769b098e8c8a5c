// The ring (and tree) of allreduce.h on real MPI processes: rank r holds
// row r, the partial sums travel as MPI point-to-point messages, and each
// rank adds its own values with the same block kernel (reduce_kernel.h) and
// stochastic streams (streams.h) as the simulation, so the result carries
// the simulation's bits exactly. The all-gather of the ring and the tree's
// broadcast are copies; here they are a gather to rank 0, which writes the
// output. Built without MPI, mpi_built() is false and mpi_allreduce throws.
//
// The caller has initialised MPI (cli/mpi_session.h); this uses
// MPI_COMM_WORLD, whose size is the number of ranks.
#pragma once

#include <span>
#include <string>

#include "collective/allreduce.h"

namespace mpverify::collective {

bool mpi_built();

struct MpiAllreduceResult {
  std::vector<float> values;    // the reduced vector, on rank 0 only (empty elsewhere)
  AllreduceCounters counters;   // summed over the ranks, on rank 0 only
  Divisors divisors;
  double scale = 1;
};

// own_row: this rank's row (n elements, the same n on every rank).
MpiAllreduceResult mpi_allreduce(std::span<const float> own_row, const AllreduceSpec& spec);

}  // namespace mpverify::collective
