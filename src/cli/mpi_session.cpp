#include "cli/mpi_session.h"

#include <cstdlib>

#ifdef MPVERIFY_WITH_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace mpverify::cli {

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

std::string mpi_unavailable_reason() {
#ifdef MPVERIFY_WITH_MPI
  return "";
#else
  return "this mpverify was built without MPI (install libopenmpi-dev and openmpi-bin, then configure with "
         "-DMPVERIFY_MPI=ON)";
#endif
}

MpiSession::MpiSession() {
#ifdef MPVERIFY_WITH_MPI
  if (!launched_by_mpi()) return;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;  // someone else owns MPI in this process
  MPI_Init(nullptr, nullptr);
  // Errors come back as codes (the callers throw) instead of aborting the job silently.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  active_ = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
#endif
}

MpiSession::~MpiSession() {
#ifdef MPVERIFY_WITH_MPI
  if (active_) MPI_Finalize();
#endif
}

void MpiSession::barrier() const {
#ifdef MPVERIFY_WITH_MPI
  if (active_) MPI_Barrier(MPI_COMM_WORLD);
#endif
}

void MpiSession::abort(int code) const {
#ifdef MPVERIFY_WITH_MPI
  if (active_) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::exit(code);
}

}  // namespace mpverify::cli
