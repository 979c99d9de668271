// The MPI backend: CPU tensors, OpenMPI's non-blocking collectives, one worker thread per group.
//
// Note [MPI worker]: every MPI call of a group after its construction is made by its worker thread,
// one operation at a time in the order the training thread issued them (the order every rank issues
// them). The training thread only queues a call and gets a Work; wait() blocks on the Work, so a DDP
// bucket's all-reduce progresses on the worker while backward computes the next gradients. The
// worker polls MPI_Test (yielding, then sleeping 50 us between polls after the first thousand), which
// is what lets it give up at the deadline: no MPI call it makes can block.
//
// Note [Arrival handshake]: before the data of collective number s moves, each rank sends every peer
// a fingerprint (s, the collective, dtype, element count, reduce op, root) on a duplicate
// communicator and receives theirs. Two things follow. (1) A mismatch (a rank that skipped a
// collective, called another one, or passed other sizes or dtypes) is an error naming what each rank
// called, raised before MPI reads a buffer with the wrong length. (2) A timeout knows which ranks
// never arrived: those whose fingerprint did not come. The cost is 2 (size - 1) small messages per
// collective; a collective that times out after everyone arrived says so (a rank died inside it).
#include <mpi.h>

#include <climits>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "distributed/default_group.h"
#include "distributed/mpi/mpi_dtypes.h"

namespace tessera::distributed::detail {
namespace {

using Clock = std::chrono::steady_clock;
using ::tessera::detail::str_cat;

class MpiWork final : public Work {
 public:
  bool is_completed() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_;
  }
  bool is_success() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_ && !error_;
  }
  void wait() override {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return done_; });
    if (error_) std::rethrow_exception(error_);
  }
  void finish(std::exception_ptr error) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
      error_ = std::move(error);
    }
    cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

// What one rank says it is calling (Note [Arrival handshake]).
struct Fingerprint {
  int64_t seq, kind, dtype, numel, op, root;
  bool operator==(const Fingerprint&) const = default;
};

class MpiProcessGroup final : public ProcessGroup {
 public:
  MpiProcessGroup(int rank, int size, int local_rank, std::chrono::milliseconds timeout, MPI_Comm data,
                  MPI_Comm ctrl)
      : ProcessGroup("mpi", rank, size, local_rank, timeout), data_(data), ctrl_(ctrl) {
    worker_ = std::thread([this] { loop(); });
  }

  ~MpiProcessGroup() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
    ops_.reset();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && !is_aborted()) {  // an aborted group's communicators end with the job
      MPI_Comm_free(&data_);
      MPI_Comm_free(&ctrl_);
    }
  }

  Device device() const override { return kCPU; }

 protected:
  WorkPtr run(Call call) override {
    auto work = std::make_shared<MpiWork>();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back({std::move(call), work});
    }
    cv_.notify_all();
    return work;
  }

  void on_abort() override {
    mark_aborted_exit();
    cv_.notify_all();
  }

 private:
  struct Item {
    Call call;
    std::shared_ptr<MpiWork> work;
  };

  void loop() {
    for (;;) {
      Item item;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        item = std::move(queue_.front());
        queue_.pop_front();
      }
      std::exception_ptr error;
      if (is_aborted()) {
        error = std::make_exception_ptr(DistributedError(str_cat(
            describe(item.call), ": the process group (mpi, rank ", rank_, ") was aborted: ", abort_reason())));
      } else {
        try {
          execute(item.call);
        } catch (const DistributedError& e) {
          error = std::current_exception();
          // MPI may still hold requests on these tensors' memory (a timed-out collective is never
          // completed): they stay alive until the process ends.
          abandoned_.push_back(item.call);
          abort(e.what());  // a timeout or a mismatch leaves the ranks out of step: nothing after it can run
        } catch (...) {
          error = std::current_exception();
        }
      }
      // The tensors are released here, on the worker, before the Work says done.
      item.call = Call{};
      item.work->finish(error);
    }
  }

  static std::string describe(const Call& c) {
    if (c.kind == Kind::Send) return str_cat("send to rank ", c.peer, " (tag ", c.tag, ")");
    if (c.kind == Kind::Recv) return str_cat("recv from rank ", c.peer, " (tag ", c.tag, ")");
    return str_cat(kind_name(c.kind), " (sequence number ", c.seq, ")");
  }

  static std::string describe(const Fingerprint& f) {
    const auto kind = static_cast<Kind>(f.kind);
    std::string s = kind_name(kind);
    if (kind == Kind::Barrier) return s;
    s += str_cat(" on ", f.numel, " elements of ", dtype_name(static_cast<DType>(f.dtype)));
    if (kind == Kind::AllReduce || kind == Kind::ReduceScatter) s += str_cat(" (", reduce_op_name(static_cast<ReduceOp>(f.op)), ")");
    if (kind == Kind::Broadcast) s += str_cat(" from rank ", f.root);
    return s;
  }

  // Polls until every request is complete or the deadline passes; returns whether they all completed.
  // `done[i]` tells which did.
  bool poll(std::vector<MPI_Request>& reqs, std::vector<int>& done, Clock::time_point deadline,
            MPI_Status* status = nullptr) {
    done.assign(reqs.size(), 0);
    size_t remaining = reqs.size();
    for (int spins = 0; remaining > 0; ++spins) {
      for (size_t i = 0; i < reqs.size(); ++i) {
        if (done[i]) continue;
        int flag = 0;
        int rc = MPI_Test(&reqs[i], &flag, status ? status : MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
          char text[MPI_MAX_ERROR_STRING];
          int len = 0;
          MPI_Error_string(rc, text, &len);
          TS_THROW(distributed::DistributedError, "mpi backend: MPI_Test failed: ", std::string(text, len));
        }
        if (flag) {
          done[i] = 1;
          --remaining;
        }
      }
      if (remaining == 0) break;
      if (is_aborted()) return false;
      if (Clock::now() >= deadline) return false;
      if (spins < 1000) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return true;
  }

  [[noreturn]] void throw_timeout(const std::string& what, const std::string& detail) {
    if (is_aborted()) TS_THROW(distributed::DistributedError, what, ": the process group was aborted: ", abort_reason());
    TS_THROW(distributed::DistributedTimeoutError, what, " timed out after ", timeout().count(), " ms on rank ", rank_, " of ",
             size_, ": ", detail);
  }

  void handshake(const Call& c, Clock::time_point deadline) {
    Fingerprint& mine = send_fp_;  // members: MPI may hold them past a timeout (Note [MPI worker])
    mine = Fingerprint{static_cast<int64_t>(c.seq), static_cast<int64_t>(c.kind),
                           c.input.defined() ? static_cast<int64_t>(c.input.dtype()) : -1,
                           c.input.defined() ? c.input.numel() : 0,
                           (c.kind == Kind::AllReduce || c.kind == Kind::ReduceScatter) ? static_cast<int64_t>(c.op) : -1,
                           c.kind == Kind::Broadcast ? c.peer : -1};
    std::vector<Fingerprint>& theirs = recv_fp_;
    theirs.assign(size_, Fingerprint{});
    std::vector<MPI_Request> reqs;
    std::vector<int> peer_of;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      MPI_Request r;
      MPI_Irecv(&theirs[p], 6, MPI_INT64_T, p, 1, ctrl_, &r);
      reqs.push_back(r);
      peer_of.push_back(p);
    }
    std::vector<MPI_Request> sends;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      MPI_Request r;
      MPI_Isend(&mine, 6, MPI_INT64_T, p, 1, ctrl_, &r);
      sends.push_back(r);
    }
    std::vector<int> done;
    const bool all = poll(reqs, done, deadline);
    if (!all) {
      std::vector<int> missing;
      for (size_t i = 0; i < reqs.size(); ++i)
        if (!done[i]) missing.push_back(peer_of[i]);
      throw_timeout(describe(c), str_cat("ranks ", missing, " did not arrive"));
    }
    std::vector<int> sdone;
    if (!poll(sends, sdone, deadline)) throw_timeout(describe(c), "a peer did not take this rank's arrival message");
    theirs[rank_] = mine;
    for (int p = 0; p < size_; ++p) {
      if (theirs[p] == mine) continue;
      std::string all_calls;
      for (int q = 0; q < size_; ++q) {
        all_calls += str_cat(q ? "; " : "", "rank ", q, " called ", describe(theirs[q]), " as its collective number ",
                             theirs[q].seq);
      }
      TS_THROW(distributed::DistributedError, describe(c), ": the ranks do not agree on the collective: ", all_calls);
    }
  }

  static int count_of(const Tensor& t, const char* what) {
    TS_CHECK(t.numel() <= INT_MAX, NotImplementedError, what, ": the mpi backend moves at most ", INT_MAX,
             " elements in one call, got ", t.numel());
    return static_cast<int>(t.numel());
  }

  void execute(const Call& c) {
    const Clock::time_point deadline = Clock::now() + timeout();
    const std::string what = describe(c);
    const bool collective = c.kind != Kind::Send && c.kind != Kind::Recv;
    if (collective && size_ > 1) handshake(c, deadline);
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_SUCCESS;
    switch (c.kind) {
      case Kind::AllReduce: {
        if (size_ == 1) break;
        const DType dt = c.input.dtype();
        rc = MPI_Iallreduce(MPI_IN_PLACE, c.input.data_ptr(), count_of(c.input, "all_reduce"), mpi_datatype(dt),
                            ops_->op(dt, c.op), data_, &req);
        break;
      }
      case Kind::Broadcast:
        if (size_ == 1) break;
        rc = MPI_Ibcast(c.input.data_ptr(), count_of(c.input, "broadcast"), mpi_datatype(c.input.dtype()), c.peer,
                        data_, &req);
        break;
      case Kind::AllGather: {
        const int n = count_of(c.input, "all_gather");
        const MPI_Datatype t = mpi_datatype(c.input.dtype());
        rc = MPI_Iallgather(c.input.data_ptr(), n, t, c.output.data_ptr(), n, t, data_, &req);
        break;
      }
      case Kind::ReduceScatter: {
        const DType dt = c.input.dtype();
        count_of(c.input, "reduce_scatter");
        rc = MPI_Ireduce_scatter_block(c.input.data_ptr(), c.output.data_ptr(), count_of(c.output, "reduce_scatter"),
                                       mpi_datatype(dt), ops_->op(dt, c.op), data_, &req);
        break;
      }
      case Kind::Barrier:
        if (size_ == 1) break;
        rc = MPI_Ibarrier(data_, &req);
        break;
      case Kind::Send:
        rc = MPI_Isend(c.input.data_ptr(), count_of(c.input, "send"), mpi_datatype(c.input.dtype()), c.peer, c.tag,
                       data_, &req);
        break;
      case Kind::Recv: {
        rc = MPI_Irecv(c.input.data_ptr(), count_of(c.input, "recv"), mpi_datatype(c.input.dtype()), c.peer, c.tag,
                       data_, &req);
        break;
      }
    }
    TS_CHECK(rc == MPI_SUCCESS, distributed::DistributedError, what, ": MPI failed to start it (code ", rc, ")");
    if (req != MPI_REQUEST_NULL) {
      std::vector<MPI_Request> reqs{req};
      std::vector<int> done;
      MPI_Status status;
      if (!poll(reqs, done, deadline, &status)) {
        if (c.kind == Kind::Send) throw_timeout(what, str_cat("rank ", c.peer, " did not receive it"));
        if (c.kind == Kind::Recv) throw_timeout(what, str_cat("rank ", c.peer, " did not send it"));
        throw_timeout(what, "every rank arrived, but the collective did not complete (a rank may have died in it)");
      }
      if (c.kind == Kind::Recv) {
        // MPI takes a shorter message than the buffer silently (a longer one fails with MPI_ERR_TRUNCATE).
        int got = 0;
        MPI_Get_count(&status, mpi_datatype(c.input.dtype()), &got);
        TS_CHECK(got == c.input.numel(), ValueError, what, ": expected ", c.input.numel(), " elements of ",
                 dtype_name(c.input.dtype()), ", rank ", c.peer, " sent ", got);
      }
    }
    if (c.op == ReduceOp::Avg && (c.kind == Kind::AllReduce || c.kind == Kind::ReduceScatter)) {
      const Tensor& out = c.kind == Kind::AllReduce ? c.input : c.output;
      divide_in_place(out.data_ptr(), out.numel(), out.dtype(), size_);
    }
  }

  MPI_Comm data_, ctrl_;
  Fingerprint send_fp_{};
  std::vector<Fingerprint> recv_fp_;
  std::vector<Call> abandoned_;
  std::unique_ptr<MpiReduceOps> ops_ = std::make_unique<MpiReduceOps>();
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace

std::unique_ptr<ProcessGroup> make_mpi_group(const InitOptions& options) {
  ensure_mpi_initialized();
  int rank = 0, size = 1, local_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_free(&node);
  MPI_Comm data, ctrl;
  MPI_Comm_dup(MPI_COMM_WORLD, &data);
  MPI_Comm_dup(MPI_COMM_WORLD, &ctrl);
  // Errors come back as codes (a truncated message, a failed peer), raised as DistributedError.
  MPI_Comm_set_errhandler(data, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(ctrl, MPI_ERRORS_RETURN);
  return std::make_unique<MpiProcessGroup>(rank, size, local_rank, options.timeout, data, ctrl);
}

}  // namespace tessera::distributed::detail
