// The TCP rendezvous of torchrun's convention (internal to the distributed layer): how ranks started
// with RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT, and no MPI, share what rank 0 made (NCCL's
// unique id). Note [TCP rendezvous] in rendezvous.cpp.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/distributed.h"

namespace tessera::distributed::detail {

// Every rank of `env` calls it; rank 0 passes `payload` under `key`, the others get rank 0's back.
// `what` names the caller and the value in errors. DistributedTimeoutError, naming the ranks
// that did not arrive, when the ranks do not all meet within `timeout`.
std::vector<uint8_t> tcp_rendezvous_broadcast(const LaunchEnv& env, const std::string& key, const std::string& what,
                                              std::vector<uint8_t> payload, std::chrono::milliseconds timeout);

}  // namespace tessera::distributed::detail
