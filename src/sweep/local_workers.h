// Training a sweep's runs on this machine, `workers` processes at a time (sweep/run_process.h).
#pragma once

#include <cstddef>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "sweep/sweep_plan.h"
#include "sweep/sweep_progress.h"

namespace mpverify::sweep {

// A run that failed (train exited with an error, or was killed more often than redone): the run and why.
class SweepRunError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// How often a run killed in flight is started in all before the sweep gives up on it.
inline constexpr std::size_t kMaxAttempts = 3;

// Trains `runs` (indices into plan.runs, in that order) with `program` (the mpverify executable), `workers` at
// a time, each into out / run.dir after removing what an interrupted run left there. A run killed by a
// signal is trained again, up to kMaxAttempts starts; a failed run stops the sweep from starting others, and
// once the running ones end, SweepRunError names it.
void run_with_workers(const SweepPlan& plan, const std::filesystem::path& out, const std::vector<std::size_t>& runs,
                      const std::string& program, std::size_t workers, SweepProgress& progress);

// The error of a run that cannot be redone: "<run dir>: <why>".
std::string run_failure(const SweepPlan& plan, std::size_t run, const std::string& why);

}  // namespace mpverify::sweep
