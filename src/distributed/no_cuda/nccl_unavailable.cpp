// The NCCL backend in a build without CUDA (no_cuda/ is left out of a CUDA build, which has
// distributed/cuda/process_group_nccl.cpp): init_process_group("nccl") says why it cannot run.
#include "distributed/default_group.h"

namespace tessera::distributed {

bool is_nccl_available() { return false; }

namespace detail {
std::unique_ptr<ProcessGroup> make_nccl_group(const InitOptions&, const LaunchEnv&) {
  TS_THROW(distributed::DistributedError, "init_process_group: this build of tessera has no nccl backend (it was built "
           "without CUDA); use the mpi backend, with CPU tensors");
}
}  // namespace detail

}  // namespace tessera::distributed
