// `tessera train --nproc N`: N processes on this machine through mpirun (OpenMPI). The command re-runs
// itself under mpirun with the same arguments; each process then finds its rank in the launcher's
// environment (distributed::read_launch_env) and trains one data-parallel replica. The same binary
// started by srun or with torchrun's variables trains as one rank of that job.
#pragma once

namespace tessera::app {

// Whether this process was started by a launcher with more than one rank (mpirun, srun, torchrun).
bool started_by_launcher();
// Replaces this process by `mpirun -np nproc <this executable> argv[1...]`; returns only by raising
// (a build without MPI, or mpirun not found).
[[noreturn]] void exec_under_mpirun(int nproc, int argc, char** argv);

}  // namespace tessera::app
