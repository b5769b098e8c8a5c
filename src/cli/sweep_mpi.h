// `mpirun -n P mpverify sweep PLAN.json --out DIR`: rank 0 plans, hands out runs one at a time and finishes
// the sweep; ranks 1 .. P-1 each train the run they were handed as a child process (sweep/run_process.h) and
// report how it ended, sending a heartbeat every second while it trains. A run whose process was killed is
// handed out again (up to sweep::kMaxAttempts starts). A rank that dies: under `mpirun --enable-recovery`
// the job goes on, rank 0 hands the dead rank's run in flight to another rank once the rank has been silent
// for `rank_timeout_s`, and the processes end without MPI_Finalize (which would wait for the dead rank);
// without it, Open MPI ends the whole job, and the sweep started again keeps every finished run. The files
// are the same bytes as a local sweep's.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "sweep/sweep_plan.h"

namespace mpverify::cli {

struct MpiSweepJob {
  std::string plan_file, out;
  bool quiet = false;
  double rank_timeout_s = 60;
  // Rank 0 only: reads and validates the plan (UsageError for bad input).
  std::function<std::pair<sweep::SweepPlan, std::vector<nlohmann::json>>()> validate;
  // Rank 0 only: prints the table (or JSON) and returns the exit code.
  std::function<int(const nlohmann::ordered_json& summary)> print;
};

// Runs the sweep on every rank (MPI is initialised and finalised here). Returns the rank's exit code: rank 0's
// is the sweep's; another rank's 0 unless it failed itself. Throws UsageError when this build has no MPI.
int run_mpi_sweep(const MpiSweepJob& job);

}  // namespace mpverify::cli
