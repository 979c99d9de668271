// The default process group and the MPI library's lifetime (internal to the distributed layer).
//
// Note [MPI lifetime]: MPI is initialized once per process, by the first init_process_group that needs
// it (or not at all when the program already did), with MPI_THREAD_SERIALIZED at least: a group's
// worker thread makes its MPI calls while the training thread computes. At process exit (or at
// destroy_process_group) the default group is destroyed first (its worker joined), then MPI is
// finalized, unless a group was aborted: MPI_Finalize would wait for the ranks that never arrived, so
// the job is ended with MPI_Abort instead and the launcher reports the exit code.
#pragma once
#include <memory>

#include "tessera/distributed.h"

namespace tessera::distributed::detail {

ProcessGroup* default_group_ptr();
void set_default_group(std::unique_ptr<ProcessGroup> group);

// Initializes MPI when nobody has (Note [MPI lifetime]); DistributedError when the library cannot
// give the thread level the backends need.
void ensure_mpi_initialized();
bool mpi_initialized_by_us();
// Called when a group aborts: the exit path ends the job with MPI_Abort instead of MPI_Finalize.
void mark_aborted_exit();
// Ends the job now (MPI_Abort on MPI_COMM_WORLD) with `code`, when MPI is running.
[[noreturn]] void abort_job(int code);

// The backends' constructors (process_group_mpi.cpp; cuda/process_group_nccl.cpp or its stub).
std::unique_ptr<ProcessGroup> make_mpi_group(const InitOptions& options);
std::unique_ptr<ProcessGroup> make_nccl_group(const InitOptions& options, const LaunchEnv& env);

}  // namespace tessera::distributed::detail
