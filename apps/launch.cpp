// Starting `tessera train --nproc N` under mpirun (apps/launch.h).
#include "launch.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tessera/error.h"

namespace tessera::app {

bool started_by_launcher() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE"}) {
    const char* v = std::getenv(var);
    if (v && std::atoi(v) > 1) return true;
  }
  return false;
}

void exec_under_mpirun(int nproc, int argc, char** argv) {
#ifndef TESSERA_MPIEXEC
  (void)nproc;
  (void)argc;
  (void)argv;
  TS_THROW(ValueError, "train: --nproc needs the distributed layer, and this tessera was built without MPI "
           "(apt-get install libopenmpi-dev openmpi-bin, then rebuild)");
#else
  // The executable itself, not argv[0] (which may be a bare name found on PATH).
  std::vector<char> self(4096);
  const ssize_t n = readlink("/proc/self/exe", self.data(), self.size() - 1);
  TS_CHECK(n > 0, IOError, "train: --nproc: cannot find this executable (/proc/self/exe): ", std::strerror(errno));
  self[n] = '\0';
  std::vector<std::string> args = {TESSERA_MPIEXEC, "--oversubscribe", "-np", std::to_string(nproc), self.data()};
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  execv(cargs[0], cargs.data());
  TS_THROW(IOError, "train: --nproc ", nproc, ": cannot run ", args[0], ": ", std::strerror(errno));
#endif
}

}  // namespace tessera::app
