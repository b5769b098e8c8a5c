// One planned run as its own process: `mpverify train ARGS --out DIR --quiet`, started by the sweep
// (its local workers, or an MPI rank). A process per run means a run that crashes or is killed takes
// nothing else with it, and the sweep can tell "killed" (redo it) from "refused" (a mistake to report).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <sys/types.h>
#include <vector>

namespace mpverify::sweep {

// The running executable (/proc/self/exe): what a sweep starts its runs with.
std::string own_executable();

struct RunProcess {
  pid_t pid = -1;
  std::filesystem::path log;  // the child's stdout and stderr, in the temporary directory
};

// Starts `program train ARGUMENTS --out DIR --quiet`. The child dies with its parent (PR_SET_PDEATHSIG),
// so a killed sweep leaves no run training behind. It inherits the environment less an MPI launcher's
// variables (OMPI_*, PMIX_*, PMI_*), and with `without_fault_injection` less MPVERIFY_KILL_AT_WRITE (a
// redone run must not be killed again at the same write).
// Throws std::runtime_error when the process cannot be started.
RunProcess start_run_process(const std::string& program, const std::vector<std::string>& arguments,
                             const std::filesystem::path& dir, bool without_fault_injection);

struct RunExit {
  enum class Kind { finished, killed, failed } kind = Kind::failed;
  std::string why;  // killed: the signal; failed: the exit status and the end of the run's output
};

// What a child's wait status means: finished (exit 0), killed by a signal (redo it), or failed (exit != 0:
// train refused the run; redoing it would fail again). Reads and removes the child's log.
RunExit run_exit(const RunProcess& process, int wait_status);

// Starts the run and waits for it (an MPI rank runs one run at a time).
RunExit run_to_completion(const std::string& program, const std::vector<std::string>& arguments,
                          const std::filesystem::path& dir, bool without_fault_injection);

}  // namespace mpverify::sweep
