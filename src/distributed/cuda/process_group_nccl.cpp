// The NCCL backend: CUDA tensors, one communicator per group on the GPU that the local rank picks,
// collectives on a communication stream, a watchdog thread for timeouts and NCCL's asynchronous
// errors.
//
// Note [NCCL streams]: a collective is queued on the group's communication stream (high priority)
// after an event recorded on the caller's current stream, so it reads the values that compute
// queued before it; its tensors are record_stream'ed on the communication stream, so the caching
// allocator does not reuse their memory before the collective has read and written it. The Work's
// wait() makes the caller's current stream wait for the collective's end event (as PyTorch's
// ProcessGroupNCCL: the host does not block), then raises if the group was aborted; barrier() also
// blocks the host until its end event. So DDP's bucket all-reduces overlap backward on the GPU, and
// the optimizer step queued after the end-of-backward wait runs after them.
//
// Note [NCCL watchdog]: a thread polls, every 100 ms or so, ncclCommGetAsyncError (a peer that failed,
// a network error) and the end events of the collectives in flight. A collective not completed within
// the group's timeout aborts the communicator (ncclCommAbort, which makes the kernels of the stuck
// collective return) and the group, with a message naming the collective and its sequence number
// (NCCL does not tell which ranks did not arrive, so the message says so), written to stderr; then the
// job ends (MPI_Abort under MPI, else exit status 1), as PyTorch's watchdog tears the process down: the
// streams of an aborted communicator hold values nothing may use. Never a silent hang.
//
// Note [NCCL under CUDA graph capture]: a collective called while the caller's stream is being
// captured is captured too: the comm stream joins the capture through the ready event, NCCL's kernel
// becomes a node of the graph, and the end event's wait in Work::wait() joins it back, so a replay runs
// the collective in the same order against the step's kernels (DDP's bucket all-reduces inside a
// graphed training step). Such a Work is not given to the watchdog: an event recorded during capture is
// no record, and querying it would fail; each replay's collective is the graph's to complete. Its
// is_completed() and is_success() raise, saying so. The watchdog itself queries its events in the
// thread-local capture mode, so that a query of work queued before a capture began does not invalidate
// a global-mode capture on another thread (PyTorch's ProcessGroupNCCL does both, pytorch #103503 and
// #148594). A barrier blocks the host and cannot be captured: it raises before queuing anything.
//
// Note [NCCL unique id]: ranks meet through ncclGetUniqueId on rank 0, whose 128 bytes reach the
// others by MPI_Bcast on MPI_COMM_WORLD under mpirun or srun (MPI gives rank, size and local rank), or
// through the TCP rendezvous at MASTER_ADDR:MASTER_PORT under torchrun's variables (they give rank,
// size and local rank; Note [TCP rendezvous] in src/distributed/rendezvous.cpp), which needs no MPI.
// A world of one process needs neither.
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <condition_variable>
#include <cstring>
#include <cstdio>
#include <list>
#include <mutex>
#include <thread>

#include "distributed/default_group.h"
#include "distributed/rendezvous.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/graph_capture.h"
#include "tessera/cuda.h"
#include "tessera/functions.h"

namespace tessera::distributed {

bool is_nccl_available() { return true; }

namespace detail {
namespace {

using Clock = std::chrono::steady_clock;
using ::tessera::detail::str_cat;

void nccl_check(ncclResult_t r, const char* what, ncclComm_t comm = nullptr) {
  if (r == ncclSuccess || r == ncclInProgress) return;
  const char* last = comm ? ncclGetLastError(comm) : nullptr;
  TS_THROW(distributed::DistributedError, "nccl backend: ", what, " failed: ", ncclGetErrorString(r),
           (last && *last) ? str_cat(" (", last, ")") : std::string());
}

ncclDataType_t nccl_dtype(DType dt, const char* what) {
  switch (dt) {
    case kBool:
    case kUInt8: return ncclUint8;
    case kInt8: return ncclInt8;
    case kInt32: return ncclInt32;
    case kInt64: return ncclInt64;
    case kFloat16: return ncclFloat16;
    case kBFloat16: return ncclBfloat16;
    case kFloat32: return ncclFloat32;
    case kFloat64: return ncclFloat64;
    default: break;
  }
  TS_THROW(DTypeError, what, ": the nccl backend does not move ", dtype_name(dt), " tensors");
}

// Bool as uint8 0/1: a logical or is MAX, a logical and MIN (Sum of bools would count).
ncclRedOp_t nccl_op(ReduceOp op, DType dt) {
  if (dt == kBool) return op == ReduceOp::Min ? ncclMin : ncclMax;
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
  }
  return ncclSum;
}

class NcclProcessGroup;

class NcclWork final : public Work {
 public:
  NcclWork(NcclProcessGroup* group, std::string what, bool host_blocking, bool captured)
      : group_(group), what_(std::move(what)), host_blocking_(host_blocking), captured_(captured) {}
  bool is_completed() override;
  bool is_success() override;
  void wait() override;

  cuda::Event end;
  Clock::time_point start = Clock::now();
  std::vector<Tensor> tensors;  // kept alive until the watchdog sees the end event

 private:
  friend class NcclProcessGroup;
  NcclProcessGroup* group_;
  std::string what_;
  bool host_blocking_;
  bool captured_;  // queued during a CUDA graph capture (Note [NCCL under CUDA graph capture])

  void check_not_captured(const char* op) const;
};

class NcclProcessGroup final : public ProcessGroup {
 public:
  NcclProcessGroup(int rank, int size, int local_rank, int device, std::chrono::milliseconds timeout, ncclComm_t comm)
      : ProcessGroup("nccl", rank, size, local_rank, timeout), device_(device), comm_(comm),
        comm_stream_(cuda::Stream::create(device, cuda::Stream::Priority::High)) {
    watchdog_ = std::thread([this] { watch(); });
  }

  ~NcclProcessGroup() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    watchdog_.join();
    if (!is_aborted()) {
      // Pending work first: destroying a communicator under a running collective is undefined.
      cudaSetDevice(device_);
      cudaStreamSynchronize(static_cast<cudaStream_t>(comm_stream_.handle()));
      ncclCommDestroy(comm_);
    }
  }

  Device device() const override { return Device::cuda(device_); }
  const cuda::Stream& comm_stream() const { return comm_stream_; }
  void raise_if_aborted(const std::string& what) const {
    TS_CHECK(!is_aborted(), distributed::DistributedError, what, ": the process group (nccl, rank ", rank_,
             ") was aborted: ", abort_reason());
  }

 protected:
  WorkPtr run(Call c) override {
    cuda::DeviceGuard device_guard(device_);
    const std::string what = c.kind == Kind::Send   ? str_cat("send to rank ", c.peer)
                             : c.kind == Kind::Recv ? str_cat("recv from rank ", c.peer)
                                                    : str_cat(kind_name(c.kind), " (sequence number ", c.seq, ")");
    // Order after the compute queued so far (Note [NCCL streams]).
    const cuda::Stream compute = cuda::current_stream(device_);
    const bool captured = cuda::stream_is_captured(static_cast<cudaStream_t>(compute.handle()));
    TS_CHECK(!(captured && c.kind == Kind::Barrier), distributed::DistributedError,
             what, ": a barrier blocks the host until every rank arrives, so it cannot be captured into a CUDA graph "
             "(call it before capture_begin or after capture_end)");
    auto work = std::make_shared<NcclWork>(this, what, c.kind == Kind::Barrier, captured);
    cuda::Event ready;
    ready.record(compute);
    ready.wait(comm_stream_);
    cudaStream_t s = static_cast<cudaStream_t>(comm_stream_.handle());
    Tensor scratch;
    switch (c.kind) {
      case Kind::AllReduce: {
        const DType dt = c.input.dtype();
        nccl_check(ncclAllReduce(c.input.data_ptr(), c.input.data_ptr(), c.input.numel(), nccl_dtype(dt, "all_reduce"),
                                 nccl_op(c.op, dt), comm_, s), "ncclAllReduce", comm_);
        break;
      }
      case Kind::Broadcast:
        nccl_check(ncclBroadcast(c.input.data_ptr(), c.input.data_ptr(), c.input.numel(),
                                 nccl_dtype(c.input.dtype(), "broadcast"), c.peer, comm_, s), "ncclBroadcast", comm_);
        break;
      case Kind::AllGather:
        nccl_check(ncclAllGather(c.input.data_ptr(), c.output.data_ptr(), c.input.numel(),
                                 nccl_dtype(c.input.dtype(), "all_gather"), comm_, s), "ncclAllGather", comm_);
        break;
      case Kind::ReduceScatter: {
        const DType dt = c.input.dtype();
        nccl_check(ncclReduceScatter(c.input.data_ptr(), c.output.data_ptr(), c.output.numel(),
                                     nccl_dtype(dt, "reduce_scatter"), nccl_op(c.op, dt), comm_, s),
                   "ncclReduceScatter", comm_);
        break;
      }
      case Kind::Barrier: {
        // A one-element all-reduce, as ProcessGroupNCCL's barrier.
        scratch = zeros({1}, TensorOptions(kFloat32, device()));
        ready.record(compute);  // the zeros are written on the compute stream
        ready.wait(comm_stream_);
        nccl_check(ncclAllReduce(scratch.data_ptr(), scratch.data_ptr(), 1, ncclFloat32, ncclSum, comm_, s),
                   "ncclAllReduce (barrier)", comm_);
        break;
      }
      case Kind::Send:
        nccl_check(ncclSend(c.input.data_ptr(), c.input.numel(), nccl_dtype(c.input.dtype(), "send"), c.peer, comm_, s),
                   "ncclSend", comm_);
        break;
      case Kind::Recv:
        nccl_check(ncclRecv(c.input.data_ptr(), c.input.numel(), nccl_dtype(c.input.dtype(), "recv"), c.peer, comm_, s),
                   "ncclRecv", comm_);
        break;
    }
    for (const Tensor* t : {&c.input, &c.output, &scratch}) {
      if (!t->defined()) continue;
      t->record_stream(comm_stream_);
      work->tensors.push_back(*t);
    }
    work->end.record(comm_stream_);
    if (!captured) {  // a captured collective completes with each replay (Note [NCCL under CUDA graph capture])
      std::lock_guard<std::mutex> lock(mutex_);
      in_flight_.push_back(work);
    }
    return work;
  }

  void on_abort() override {
    mark_aborted_exit();
    ncclCommAbort(comm_);  // the stuck kernels return (Note [NCCL watchdog])
  }

 private:
  void watch() {
    cudaSetDevice(device_);
    // This thread's queries must not invalidate another thread's global-mode capture (Note [NCCL under
    // CUDA graph capture]); the mode is per thread and this thread makes no other CUDA call.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeThreadLocal;
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(100));
      if (stop_ || is_aborted()) continue;
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(comm_, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress) {
        const std::string reason = str_cat("nccl backend: an asynchronous NCCL error on rank ", rank_, ": ",
                                           ncclGetErrorString(async));
        lock.unlock();
        fail(reason);
      }
      const auto now = Clock::now();
      for (auto it = in_flight_.begin(); it != in_flight_.end();) {
        NcclWork& w = **it;
        if (w.end.query()) {
          it = in_flight_.erase(it);  // the tensors are released here
          continue;
        }
        if (now - w.start > timeout()) {
          const std::string reason = str_cat(w.what_, " timed out after ", timeout().count(), " ms on rank ", rank_,
                                             " of ", size_, ": it did not complete (NCCL does not report which ranks "
                                             "did not arrive); the communicator was aborted");
          lock.unlock();
          fail(reason);
        }
        ++it;
      }
    }
  }

  // The watchdog's end (Note [NCCL watchdog]): the stuck work has left the streams without the values
  // the program expects, so nothing after it may run on them; the job ends, saying why.
  [[noreturn]] void fail(const std::string& reason) {
    abort(reason);
    std::fprintf(stderr, "[rank %d] %s\n", rank_, reason.c_str());
    abort_job(1);
  }

  int device_;
  ncclComm_t comm_;
  cuda::Stream comm_stream_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::list<std::shared_ptr<NcclWork>> in_flight_;
  bool stop_ = false;
  std::thread watchdog_;
};

void NcclWork::check_not_captured(const char* op) const {
  TS_CHECK(!captured_, ValueError, op, ": ", what_, " was captured into a CUDA graph; it runs, and completes, with "
           "each replay of the graph, which this work does not track (wait() orders the current stream after it)");
}

bool NcclWork::is_completed() {
  check_not_captured("Work.is_completed");
  return group_->is_aborted() || end.query();
}

bool NcclWork::is_success() {
  check_not_captured("Work.is_success");
  return !group_->is_aborted() && end.query();
}

void NcclWork::wait() {
  group_->raise_if_aborted(what_);
  const cuda::Stream current = cuda::current_stream(group_->device().index());
  TS_CHECK(!captured_ || cuda::stream_is_captured(static_cast<cudaStream_t>(current.handle())), ValueError,
           "Work.wait: ", what_, " was captured into a CUDA graph, so its end exists only inside that capture: wait "
           "for it before capture_end, on a stream of the capture");
  end.wait(current);
  if (host_blocking_) {
    while (!end.query()) {
      group_->raise_if_aborted(what_);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  group_->raise_if_aborted(what_);
}

}  // namespace

std::unique_ptr<ProcessGroup> make_nccl_group(const InitOptions& options, const LaunchEnv& env) {
  int device_count = 0;
  TS_CUDA_CHECK(cudaGetDeviceCount(&device_count));
  TS_CHECK(device_count > 0, distributed::DistributedError, "init_process_group: the nccl backend needs a GPU, found none");
  int rank = env.rank, size = env.world_size, local_rank = env.local_rank;
  ncclUniqueId id;
  if (size == 1) {
    nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  } else if (env.launcher == "torchrun") {
    std::vector<uint8_t> bytes(sizeof(id));
    if (rank == 0) {
      nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
      std::memcpy(bytes.data(), &id, sizeof(id));
    }
    bytes = tcp_rendezvous_broadcast(env, "nccl_unique_id", "init_process_group('nccl'): the NCCL unique id", std::move(bytes),
                                     options.timeout);
    TS_CHECK(bytes.size() == sizeof(id), distributed::DistributedError, "init_process_group('nccl'): rank 0 sent a ",
             bytes.size(), "-byte unique id, expected ", sizeof(id));
    std::memcpy(&id, bytes.data(), sizeof(id));
  } else {
    ensure_mpi_initialized();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_free(&node);
    if (rank == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    const int rc = MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    TS_CHECK(rc == MPI_SUCCESS, distributed::DistributedError,
             "init_process_group('nccl'): MPI_Bcast of the NCCL unique id failed (code ", rc, ")");
  }
  const int device = local_rank % device_count;  // the local rank picks the GPU
  cuda::DeviceGuard guard(device);
  ncclComm_t comm = nullptr;
  nccl_check(ncclCommInitRank(&comm, size, id, rank), "ncclCommInitRank");
  return std::make_unique<NcclProcessGroup>(rank, size, local_rank, device, options.timeout, comm);
}

}  // namespace detail
}  // namespace tessera::distributed
