// The process-level side of MPI for the commands that can run as one rank
// of an `mpirun` job: MPI is initialised only when a launcher started the
// process (so `mpverify` alone never touches MPI), the session exposes the
// rank and the number of processes, and it finalizes MPI when it ends.
// Nothing here knows what a command does with the ranks.
#pragma once

#include <string>

namespace mpverify::cli {

// Whether an MPI launcher started this process, from the variables it sets:
// OMPI_COMM_WORLD_SIZE (OpenMPI's mpirun), PMIX_RANK (PMIx launchers, srun),
// PMI_SIZE (PMI-1/2 launchers, MPICH's hydra).
bool launched_by_mpi();

// Empty when this build has MPI (cmake/Mpi.cmake); else why not, with how to fix it.
std::string mpi_unavailable_reason();

class MpiSession {
 public:
  // MPI_Init when launched_by_mpi() and the build has MPI; otherwise a
  // session of one process (rank 0 of 1, active() false).
  MpiSession();
  ~MpiSession();  // MPI_Finalize, when this session initialised MPI
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  bool active() const { return active_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  // Waits for every rank (nothing without MPI).
  void barrier() const;
  // Ends every process of the job with `code` (MPI_Abort) when one rank
  // fails alone and the others would wait for it forever; exits otherwise.
  [[noreturn]] void abort(int code) const;

 private:
  bool active_ = false;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace mpverify::cli
