// The TCP rendezvous (rendezvous.h).
//
// Note [TCP rendezvous]: the ranks meet in a TCPStore at MASTER_ADDR:MASTER_PORT. Under torchrun
// (TORCHELASTIC_USE_AGENT_STORE=True) the agent already hosts one there and every rank is its client;
// otherwise (the variables set by hand, or by a launcher of torch's env:// convention) rank 0 hosts
// it, as torch.distributed's env:// does. Keys live under "tessera/<restart>/", the restart count
// being TORCHELASTIC_RESTART_COUNT, so a restarted job never reads its previous attempt's values.
// Each rank sets "arrived/<rank>"; rank 0 sets the value; the others get it; each then adds 1 to
// "done", and rank 0 waits until done reaches the world size before it returns, so its store (and
// the process hosting it) outlives every rank's get. When the ranks do not all come within the
// timeout, rank 0's error names the ranks whose "arrived" key is missing; another rank's names rank
// 0's store or value.
#include "distributed/rendezvous.h"

#include <cstdlib>
#include <thread>

#include "tessera/distributed/tcp_store.h"

namespace tessera::distributed::detail {

std::vector<uint8_t> tcp_rendezvous_broadcast(const LaunchEnv& env, const std::string& key_name, const std::string& what,
                                              std::vector<uint8_t> payload, std::chrono::milliseconds timeout) {
  TS_CHECK(!env.master_addr.empty() && env.master_port > 0, ValueError, what, ": ", env.world_size,
           " ranks from the launcher's variables (", env.launcher, ") meet at MASTER_ADDR:MASTER_PORT, but ",
           env.master_addr.empty() ? "MASTER_ADDR" : "MASTER_PORT", " is not set");
  const std::string prefix = "tessera/" + std::to_string(env.restart_count) + "/";
  const bool host = env.rank == 0 && !env.agent_store;
  TCPStore store(env.master_addr, {.port = env.master_port, .is_master = host, .timeout = timeout});
  store.set(prefix + "arrived/" + std::to_string(env.rank), std::string("1"));
  const std::string key = prefix + key_name;
  if (env.rank == 0) {
    store.set(key, payload);
  } else {
    try {
      payload = store.get(key);
    } catch (const DistributedTimeoutError&) {
      TS_THROW(distributed::DistributedTimeoutError, what, ": rank ", env.rank, " of ", env.world_size, " reached the store at ",
               env.master_addr, ":", env.master_port, ", but rank 0 did not set the value within ", timeout.count(),
               " ms");
    }
  }
  store.add(prefix + "done", 1);
  if (env.rank == 0) {
    const auto start = std::chrono::steady_clock::now();
    const std::string done = prefix + "done";
    while (store.add(done, 0) < env.world_size) {
      if (std::chrono::steady_clock::now() - start > timeout) {
        std::string missing;
        int count = 0;
        for (int r = 1; r < env.world_size; ++r)
          if (!store.check({prefix + "arrived/" + std::to_string(r)})) missing += (count++ ? ", " : "") + std::to_string(r);
        TS_THROW(distributed::DistributedTimeoutError, what, ": ", count ? "ranks " + missing + " of " : "every rank of ",
                 env.world_size, count ? " did not arrive" : " arrived, but not all took the value",
                 " at ", env.master_addr, ":", env.master_port, " within ", timeout.count(), " ms");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  return payload;
}

}  // namespace tessera::distributed::detail
