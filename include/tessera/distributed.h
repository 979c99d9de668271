// Data-parallel training, as torch.distributed: process groups (the MPI backend on CPU tensors, the
// NCCL backend on CUDA tensors) with their collectives and asynchronous work handles, the launch
// environment (mpirun / srun / torchrun's variables) and data::DistributedSampler. DDP and ZeRO-1
// are in tessera/distributed/ddp.h and zero.h, checkpoints in tessera/distributed/checkpoint.h.
//
//   ts::distributed::init_process_group("mpi");        // under mpirun, srun or torchrun's variables
//   ts::distributed::all_reduce(grad, ts::distributed::ReduceOp::Avg);
//
// Every collective runs on every rank of the group, in the same order, with tensors of the same
// dtype and number of elements (checked by the MPI backend before the data moves, Note [Arrival
// handshake]). A collective that does not complete within the group's timeout (10 minutes unless set)
// raises DistributedTimeoutError naming the collective, its sequence number and the ranks that did not
// arrive, and aborts the group: later calls raise DistributedError, and the process ends the job
// (MPI_Abort) when it exits instead of hanging in MPI_Finalize.
//
// The header holds no MPI or NCCL types; a build without MPI has no distributed layer
// (`distributed::is_available()` is false there).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tessera/data.h"
#include "tessera/error.h"
#include "tessera/tensor.h"

namespace tessera::distributed {

// A collective that failed, or a call on an aborted or uninitialized group.
class DistributedError : public Error { public: using Error::Error; };
// A collective that did not complete within the group's timeout.
class DistributedTimeoutError : public DistributedError { public: using DistributedError::DistributedError; };

// Avg is Sum divided by the world size, for floating-point tensors only. On bool tensors Sum and Max
// are a logical or, Min a logical and (as PyTorch's NCCL backend does).
enum class ReduceOp { Sum, Avg, Max, Min };
const char* reduce_op_name(ReduceOp op);  // "SUM", "AVG", "MAX", "MIN"

inline constexpr std::chrono::milliseconds kDefaultTimeout = std::chrono::minutes(10);

// The handle of one operation. wait() blocks until it is done and rethrows its error (a timeout, a
// mismatch between ranks, an abort).
class Work {
 public:
  virtual ~Work() = default;
  virtual bool is_completed() = 0;   // done, successfully or not (never blocks)
  virtual void wait() = 0;
  virtual bool is_success() = 0;     // completed without an error
};
using WorkPtr = std::shared_ptr<Work>;

// Who this process is, from the launcher's environment (read_launch_env) or from MPI.
struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr;   // torchrun's rendezvous (empty when not set)
  int master_port = 0;
  std::string launcher;      // "mpirun", "srun", "torchrun" or "none"
  bool agent_store = false;  // TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent hosts the store
  int restart_count = 0;     // TORCHELASTIC_RESTART_COUNT
};
// Reads, in this order: OpenMPI's OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}; torchrun's
// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE; Slurm's SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID;
// MASTER_ADDR / MASTER_PORT and torchrun's TORCHELASTIC_USE_AGENT_STORE / TORCHELASTIC_RESTART_COUNT
// wherever they are set. ValueError for a malformed or inconsistent value
// (a rank outside [0, world size)).
LaunchEnv read_launch_env();

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  const std::string& backend() const { return backend_; }
  // The device of this group's tensors (the CPU for MPI).
  virtual Device device() const = 0;
  std::chrono::milliseconds timeout() const { return timeout_.load(); }
  void set_timeout(std::chrono::milliseconds timeout);
  // Collectives issued so far on this group (the next one gets this number).
  uint64_t sequence_number() const { return seq_; }

  // In place on every rank: the reduction of all ranks' `tensor`.
  WorkPtr all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::Sum);
  // In place: rank `src`'s values on every rank.
  WorkPtr broadcast(const Tensor& tensor, int src = 0);
  // output (size x input.numel() elements, contiguous) gets every rank's input, in rank order
  // (all_gather_into_tensor).
  WorkPtr all_gather(const Tensor& output, const Tensor& input);
  // The list form: outputs[r] gets rank r's input.
  WorkPtr all_gather(const std::vector<Tensor>& outputs, const Tensor& input);
  // output gets chunk `rank` of the reduction of every rank's input (input.numel() = size x
  // output.numel(); reduce_scatter_tensor).
  WorkPtr reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::Sum);
  WorkPtr barrier();
  // Point to point; tags tell apart several messages between the same pair of ranks.
  WorkPtr send(const Tensor& tensor, int dst, int tag = 0);
  WorkPtr recv(const Tensor& tensor, int src, int tag = 0);

  // Ends every pending operation with an error and makes later calls raise. The process then ends
  // the whole job at exit (MPI_Abort).
  // Safe to call from any thread (a backend's worker aborts on a timeout).
  void abort(const std::string& reason);
  bool is_aborted() const { return aborted_.load(); }
  std::string abort_reason() const;

 protected:
  ProcessGroup(std::string backend, int rank, int size, int local_rank, std::chrono::milliseconds timeout)
      : backend_(std::move(backend)), rank_(rank), size_(size), local_rank_(local_rank), timeout_(timeout) {}

  // What the backends implement; the public calls have checked the tensors (device, layout, sizes)
  // and counted the sequence number first.
  enum class Kind { AllReduce, Broadcast, AllGather, ReduceScatter, Barrier, Send, Recv };
  struct Call {
    Kind kind;
    uint64_t seq;
    Tensor input, output;   // all_reduce / broadcast / send / recv: input is output
    ReduceOp op = ReduceOp::Sum;
    int peer = 0;           // broadcast's root, send's destination, recv's source
    int tag = 0;
  };
  virtual WorkPtr run(Call call) = 0;
  virtual void on_abort() {}
  static const char* kind_name(Kind k);

  std::string backend_;
  int rank_, size_, local_rank_;
  std::atomic<std::chrono::milliseconds> timeout_;  // read by a backend's worker thread
  uint64_t seq_ = 0;

 private:
  std::atomic<bool> aborted_{false};
  mutable std::mutex abort_mutex_;
  std::string abort_reason_;

  void check_usable(const char* what) const;
  void check_tensor(const char* what, const char* role, const Tensor& t) const;
};

struct InitOptions {
  std::chrono::milliseconds timeout = kDefaultTimeout;
};

bool is_available();                    // built with the distributed layer (MPI found)
bool is_nccl_available();               // built with CUDA (NCCL comes from the toolkit)
// Creates the default group: "mpi" (CPU tensors) or "nccl" (CUDA tensors on the GPU the local rank
// picks; under mpirun or srun, or as a single process; src/distributed/cuda/process_group_nccl.cpp).
// ValueError for an unknown backend or a second initialization; DistributedError when the launcher's
// environment is unusable or (nccl) there is no GPU.
void init_process_group(const std::string& backend, InitOptions options = {});
bool is_initialized();
// The default group; DistributedError "Default process group has not been initialized" before init.
ProcessGroup& default_group();
// Ends the default group (MPI_Finalize at process exit, or MPI_Abort when the group was aborted).
void destroy_process_group();
int get_rank();
int get_world_size();
int get_local_rank();

// torch.distributed's free functions, on the default group (or `group`). Without async_op they wait
// and return a completed handle.
WorkPtr all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::Sum, bool async_op = false, ProcessGroup* group = nullptr);
WorkPtr broadcast(const Tensor& tensor, int src, bool async_op = false, ProcessGroup* group = nullptr);
WorkPtr all_gather_into_tensor(const Tensor& output, const Tensor& input, bool async_op = false, ProcessGroup* group = nullptr);
WorkPtr all_gather(const std::vector<Tensor>& outputs, const Tensor& input, bool async_op = false, ProcessGroup* group = nullptr);
WorkPtr reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::Sum,
                              bool async_op = false, ProcessGroup* group = nullptr);
WorkPtr barrier(bool async_op = false, ProcessGroup* group = nullptr);
WorkPtr send(const Tensor& tensor, int dst, int tag = 0, ProcessGroup* group = nullptr);   // waits
WorkPtr recv(const Tensor& tensor, int src, int tag = 0, ProcessGroup* group = nullptr);   // waits
WorkPtr isend(const Tensor& tensor, int dst, int tag = 0, ProcessGroup* group = nullptr);
WorkPtr irecv(const Tensor& tensor, int src, int tag = 0, ProcessGroup* group = nullptr);

}  // namespace tessera::distributed

namespace tessera::data {

struct DistributedSamplerOptions {
  std::optional<int> num_replicas = std::nullopt;  // default: the default group's size
  std::optional<int> rank = std::nullopt;          // default: the default group's rank
  bool shuffle = true;
  uint64_t seed = 0;                               // the same on every rank
  bool drop_last = false;
};

// Note [DistributedSampler]: torch.utils.data.DistributedSampler. Each epoch the indices 0..n-1 are
// permuted (when shuffling) by a generator seeded with seed + epoch, identically on every rank; then
// either padded by repeating the first ones up to a multiple of num_replicas (every sample is seen,
// a few twice), or (drop_last) cut down to one; rank r takes every num_replicas-th index from r.
class DistributedSampler {
 public:
  DistributedSampler(int64_t dataset_size, DistributedSamplerOptions options = {});
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  int64_t size() const { return num_samples_; }            // indices of this rank per epoch
  int64_t total_size() const { return num_samples_ * num_replicas_; }
  std::vector<int64_t> indices() const;                    // this rank's, for the current epoch
  int num_replicas() const { return num_replicas_; }
  int rank() const { return rank_; }

 private:
  int64_t n_;
  int num_replicas_, rank_;
  bool shuffle_, drop_last_;
  uint64_t seed_;
  int64_t epoch_ = 0;
  int64_t num_samples_;
};

}  // namespace tessera::data
