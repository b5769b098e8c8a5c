// mpi_allreduce without MPI: the build did not find it (cmake/Mpi.cmake).
#include <stdexcept>

#include "collective/mpi_allreduce.h"

namespace mpverify::collective {

bool mpi_built() { return false; }

MpiAllreduceResult mpi_allreduce(std::span<const float>, const AllreduceSpec&) {
  throw std::logic_error("mpi_allreduce: this build has no MPI (configure with MPVERIFY_MPI=ON and OpenMPI installed)");
}

}  // namespace mpverify::collective
