// A TCPStore end for tcp_store_interop.py, which plays the other end with torch's own TCPStore:
//   tcp_store_probe client HOST PORT   reads "from_torch", sets "from_tessera", adds 2 to "count"
//   tcp_store_probe server PORT_FILE   hosts a store (any free port, written to PORT_FILE), sets
//                                      "from_tessera", waits for torch's "from_torch" and "done"
//   tcp_store_probe rendezvous         under torchrun: the TCP rendezvous of init_process_group('nccl')
//                                      with the launcher's variables; prints "rank R of W: <hex>"
// Every answer is printed on one line; errors go to stderr with a non-zero exit status.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "distributed/rendezvous.h"
#include "tessera/distributed.h"
#include "tessera/distributed/tcp_store.h"

namespace dist = tessera::distributed;
using namespace std::chrono_literals;

namespace {

std::string text(const std::vector<uint8_t>& v) { return {v.begin(), v.end()}; }

std::string hex(const std::vector<uint8_t>& v) {
  std::string s;
  char b[3];
  for (uint8_t x : v) std::snprintf(b, sizeof(b), "%02x", x), s += b;
  return s;
}

int run(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "client" && argc == 4) {
    dist::TCPStore store(argv[2], {.port = std::stoi(argv[3]), .timeout = 30s});
    std::printf("from_torch=%s\n", text(store.get("from_torch")).c_str());
    store.set("from_tessera", std::string("hello from tessera"));
    std::printf("count=%lld\n", static_cast<long long>(store.add("count", 2)));
    std::printf("check=%d num_keys=%lld\n", store.check({"from_torch", "from_tessera"}) ? 1 : 0,
                static_cast<long long>(store.num_keys()));
    store.wait({"torch_done"});
    return 0;
  }
  if (mode == "server" && argc == 3) {
    dist::TCPStore store("127.0.0.1", {.port = 0, .is_master = true, .timeout = 60s});
    store.set("from_tessera", std::string("hello from tessera's server"));
    { std::ofstream(argv[2]) << store.port() << "\n"; }
    std::printf("from_torch=%s\n", text(store.get("from_torch")).c_str());
    store.wait({"done"});
    std::printf("count=%s\n", text(store.get("count")).c_str());
    return 0;
  }
  if (mode == "rendezvous" && argc == 2) {
    const dist::LaunchEnv env = dist::read_launch_env();
    std::vector<uint8_t> payload;
    if (env.rank == 0) {
      const std::string s = "unique id of rank 0, pid " + std::to_string(::getpid());
      payload.assign(s.begin(), s.end());
    }
    payload = dist::detail::tcp_rendezvous_broadcast(env, "probe_id", "tcp_store_probe", payload, 60s);
    std::printf("rank %d of %d (launcher %s, agent store %d, port %d): %s\n", env.rank, env.world_size,
                env.launcher.c_str(), env.agent_store ? 1 : 0, env.master_port, hex(payload).c_str());
    return 0;
  }
  std::fprintf(stderr, "usage: tcp_store_probe client HOST PORT | server PORT_FILE | rendezvous\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tcp_store_probe: %s\n", e.what());
    return 1;
  }
}
