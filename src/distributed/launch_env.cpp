// read_launch_env: who this process is, from the launcher's variables. mpirun (OpenMPI) and srun set
// their own; torchrun sets RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE and the rendezvous
// MASTER_ADDR / MASTER_PORT. Whatever is found is checked for consistency.
#include <cstdlib>
#include <string>

#include "tessera/distributed.h"

namespace tessera::distributed {
namespace {

std::optional<int64_t> env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);
  TS_CHECK(end && *end == '\0' && x >= 0 && x <= (1 << 30), ValueError, "read_launch_env: the environment variable ",
           name, "='", v, "' is not a non-negative integer");
  return x;
}

// The first of `names` that is set.
std::optional<int64_t> first_int(std::initializer_list<const char*> names, const char** which) {
  for (const char* n : names) {
    if (auto v = env_int(n)) {
      *which = n;
      return v;
    }
  }
  return std::nullopt;
}

}  // namespace

LaunchEnv read_launch_env() {
  LaunchEnv env;
  struct Source {
    const char* launcher;
    const char *rank, *size, *local_rank, *local_size;
  };
  const Source sources[] = {
      {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
      {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
  };
  env.launcher = "none";
  for (const Source& s : sources) {
    auto rank = env_int(s.rank);
    auto size = env_int(s.size);
    if (!rank || !size) continue;
    env.launcher = s.launcher;
    env.rank = static_cast<int>(*rank);
    env.world_size = static_cast<int>(*size);
    TS_CHECK(env.world_size >= 1 && env.rank < env.world_size, ValueError, "read_launch_env: ", s.rank, "=", *rank,
             " is out of range for ", s.size, "=", *size);
    const char* which = nullptr;
    env.local_rank = static_cast<int>(first_int({s.local_rank}, &which).value_or(0));
    // SLURM_NTASKS_PER_NODE may read "4(x2)" on heterogeneous allocations: env_int would reject it, so
    // Slurm's local size is only taken when it is a plain number.
    std::optional<int64_t> local_size;
    if (std::string(s.launcher) != "srun") local_size = env_int(s.local_size);
    else if (const char* v = std::getenv(s.local_size); v && std::string(v).find_first_not_of("0123456789") == std::string::npos && *v)
      local_size = std::atoll(v);
    env.local_world_size = static_cast<int>(local_size.value_or(env.world_size));
    TS_CHECK(env.local_rank < std::max(env.local_world_size, 1) || !local_size, ValueError, "read_launch_env: ",
             s.local_rank, "=", env.local_rank, " is out of range for a local world size of ", env.local_world_size);
    break;
  }
  if (const char* a = std::getenv("MASTER_ADDR"); a && *a) env.master_addr = a;
  if (auto p = env_int("MASTER_PORT")) {
    TS_CHECK(*p > 0 && *p < 65536, ValueError, "read_launch_env: MASTER_PORT=", *p, " is not a TCP port");
    env.master_port = static_cast<int>(*p);
  }
  if (const char* a = std::getenv("TORCHELASTIC_USE_AGENT_STORE")) env.agent_store = std::string(a) == "True";
  if (auto c = env_int("TORCHELASTIC_RESTART_COUNT")) env.restart_count = static_cast<int>(*c);
  return env;
}

}  // namespace tessera::distributed
