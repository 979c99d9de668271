// The NCCL backend where it is not built: init_process_group("nccl") says why it cannot run.
#include "distributed/default_group.h"

namespace tessera::distributed {

bool is_nccl_available() { return false; }

namespace detail {
std::unique_ptr<ProcessGroup> make_nccl_group(const InitOptions&, const LaunchEnv&) {
  TS_THROW(distributed::DistributedError, "init_process_group: this build of tessera has no nccl backend (it is not "
           "implemented yet); use the mpi backend, with CPU tensors");
}
}  // namespace detail

}  // namespace tessera::distributed
