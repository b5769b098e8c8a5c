# MPVERIFY_MPI: `mpverify allreduce --mpi` runs its ring over MPI processes
# (src/collective/mpi_allreduce.cpp, src/cli/mpi_session.cpp). On by default
# when an MPI implementation with C bindings is found (OpenMPI: Debian's
# libopenmpi-dev and openmpi-bin); off, or not found, the --mpi flag says so
# and exits with 2, and the MPI tests skip with the reason.
# Sets MPVERIFY_HAS_MPI and MPVERIFY_MPIEXEC (the launcher the tests run, or empty).
# FindMPI looks for the C bindings only with the C language enabled.
if(NOT DEFINED MPVERIFY_MPI OR MPVERIFY_MPI)
  include(CheckLanguage)
  check_language(C)
  if(CMAKE_C_COMPILER)
    enable_language(C)
    find_package(MPI COMPONENTS C QUIET)
  endif()
endif()
set(mpverify_mpi_default OFF)
if(MPI_C_FOUND)
  set(mpverify_mpi_default ON)
endif()
option(MPVERIFY_MPI "Build the MPI all-reduce (mpverify allreduce --mpi) when MPI is found" ${mpverify_mpi_default})
set(MPVERIFY_HAS_MPI OFF)
set(MPVERIFY_MPIEXEC "")
if(MPVERIFY_MPI)
  if(MPI_C_FOUND)
    set(MPVERIFY_HAS_MPI ON)
    if(MPIEXEC_EXECUTABLE)
      set(MPVERIFY_MPIEXEC ${MPIEXEC_EXECUTABLE})
    endif()
  else()
    message(STATUS "mpverify: MPVERIFY_MPI is on but no MPI (C) was found: building without it")
  endif()
endif()
message(STATUS "mpverify: MPI ${MPVERIFY_HAS_MPI}")
