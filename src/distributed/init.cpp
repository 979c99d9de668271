// init_process_group / destroy_process_group, and the process-wide state behind them: the default
// group and MPI's lifetime (Note [MPI lifetime]). This is the one piece of global mutable state of the
// layer, as torch.distributed's default group is.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "distributed/default_group.h"

namespace tessera::distributed {
namespace detail {
namespace {

struct State {
  std::unique_ptr<ProcessGroup> group;
  bool we_initialized_mpi = false;
  bool aborted_exit = false;
  ~State() { shutdown(); }
  void shutdown() {
    const bool aborted = aborted_exit || (group && group->is_aborted());
    group.reset();
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized) return;
    if (aborted) {
      std::fflush(stdout);
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (we_initialized_mpi) MPI_Finalize();
  }
};

State& state() {
  static State s;
  return s;
}
std::mutex g_init_mutex;

}  // namespace

ProcessGroup* default_group_ptr() { return state().group.get(); }
void set_default_group(std::unique_ptr<ProcessGroup> group) { state().group = std::move(group); }
bool mpi_initialized_by_us() { return state().we_initialized_mpi; }
void mark_aborted_exit() { state().aborted_exit = true; }

void ensure_mpi_initialized() {
  State& s = state();
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  TS_CHECK(!finalized, distributed::DistributedError, "init_process_group: MPI was already finalized in this process");
  int provided = 0;
  if (!initialized) {
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    TS_CHECK(rc == MPI_SUCCESS, distributed::DistributedError, "init_process_group: MPI_Init_thread failed (code ", rc, ")");
    s.we_initialized_mpi = true;
  } else {
    MPI_Query_thread(&provided);
  }
  TS_CHECK(provided >= MPI_THREAD_SERIALIZED, distributed::DistributedError,
           "init_process_group: the MPI library provides thread level ", provided,
           ", but the MPI backend needs MPI_THREAD_SERIALIZED (its worker thread makes the MPI calls)");
}

[[noreturn]] void abort_job(int code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  std::fflush(stdout);
  std::fflush(stderr);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace detail

bool is_available() { return true; }

void init_process_group(const std::string& backend, InitOptions options) {
  std::lock_guard<std::mutex> lock(detail::g_init_mutex);
  TS_CHECK(!is_initialized(), ValueError,
           "init_process_group: trying to initialize the default process group twice (it is ",
           default_group().backend(), ")");
  TS_CHECK(options.timeout.count() > 0, ValueError, "init_process_group: the timeout must be positive, got ",
           options.timeout.count(), " ms");
  if (backend == "mpi") {
    auto group = detail::make_mpi_group(options);
    // torchrun starts each rank alone: MPI then sees a world of one, which would silently train W
    // separate models.
    const LaunchEnv env = read_launch_env();
    TS_CHECK(env.launcher != "torchrun" || env.world_size == group->size(), ValueError,
             "init_process_group('mpi'): torchrun's WORLD_SIZE is ", env.world_size, ", but MPI sees ", group->size(),
             " process(es): the mpi backend needs mpirun or srun to start the ranks; under torchrun use 'nccl'");
    detail::set_default_group(std::move(group));
  } else if (backend == "nccl") {
    detail::set_default_group(detail::make_nccl_group(options, read_launch_env()));
  } else {
    TS_THROW(ValueError, "init_process_group: unknown backend '", backend, "' (expected 'mpi' or 'nccl')");
  }
}

void destroy_process_group() {
  std::lock_guard<std::mutex> lock(detail::g_init_mutex);
  TS_CHECK(is_initialized(), distributed::DistributedError,
           "destroy_process_group: Default process group has not been initialized, please make sure to call "
           "init_process_group.");
  // MPI stays up until the process exits (a later init_process_group may use it again).
  std::unique_ptr<ProcessGroup>& g = detail::state().group;
  if (g->is_aborted()) detail::mark_aborted_exit();
  g.reset();
}

}  // namespace tessera::distributed
