// ProcessGroup's public calls: the checks every backend shares (an aborted group, a tensor on the wrong
// device, not contiguous, sizes that cannot fit), the sequence numbers, and torch.distributed's free
// functions on the default group. The backends (process_group_mpi.cpp, cuda/process_group_nccl.cpp)
// receive calls that passed these checks.
#include "distributed/default_group.h"

#include "tessera/functions.h"

namespace tessera::distributed {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "SUM";
    case ReduceOp::Avg: return "AVG";
    case ReduceOp::Max: return "MAX";
    case ReduceOp::Min: return "MIN";
  }
  return "?";
}

const char* ProcessGroup::kind_name(Kind k) {
  switch (k) {
    case Kind::AllReduce: return "all_reduce";
    case Kind::Broadcast: return "broadcast";
    case Kind::AllGather: return "all_gather";
    case Kind::ReduceScatter: return "reduce_scatter";
    case Kind::Barrier: return "barrier";
    case Kind::Send: return "send";
    case Kind::Recv: return "recv";
  }
  return "?";
}

void ProcessGroup::set_timeout(std::chrono::milliseconds timeout) {
  TS_CHECK(timeout.count() > 0, ValueError, "ProcessGroup.set_timeout: the timeout must be positive, got ",
           timeout.count(), " ms");
  timeout_ = timeout;
}

void ProcessGroup::check_usable(const char* what) const {
  TS_CHECK(!aborted_.load(), distributed::DistributedError, what, ": the process group (", backend_, ", rank ", rank_,
           ") was aborted: ", abort_reason());
}

void ProcessGroup::check_tensor(const char* what, const char* role, const Tensor& t) const {
  TS_CHECK(t.defined(), ValueError, what, ": the ", role, " tensor is undefined");
  const Device want = device();
  TS_CHECK(t.device() == want, DeviceError, what, ": the ", backend_, " backend works on ", want.str(),
           " tensors, but the ", role, " tensor is on ", t.device().str());
  TS_CHECK(t.is_contiguous(), ValueError, what, ": Tensors must be contiguous (the ", role,
           " tensor has sizes ", t.sizes(), " and strides ", t.strides(), ")");
}

WorkPtr ProcessGroup::all_reduce(const Tensor& tensor, ReduceOp op) {
  check_usable("all_reduce");
  check_tensor("all_reduce", "input", tensor);
  TS_CHECK(op != ReduceOp::Avg || is_floating_point(tensor.dtype()), DTypeError,
           "all_reduce: ReduceOp.AVG needs a floating-point tensor, got ", dtype_name(tensor.dtype()));
  return run({Kind::AllReduce, seq_++, tensor, tensor, op});
}

WorkPtr ProcessGroup::broadcast(const Tensor& tensor, int src) {
  check_usable("broadcast");
  check_tensor("broadcast", "input", tensor);
  TS_CHECK(src >= 0 && src < size_, ValueError, "broadcast: src rank ", src, " is out of range for a group of size ",
           size_);
  Call c{Kind::Broadcast, seq_++, tensor, tensor};
  c.peer = src;
  return run(std::move(c));
}

WorkPtr ProcessGroup::all_gather(const Tensor& output, const Tensor& input) {
  check_usable("all_gather");
  check_tensor("all_gather", "input", input);
  check_tensor("all_gather", "output", output);
  TS_CHECK(output.dtype() == input.dtype(), DTypeError, "all_gather: the output tensor's dtype (",
           dtype_name(output.dtype()), ") must match the input's (", dtype_name(input.dtype()), ")");
  TS_CHECK(output.numel() == input.numel() * size_, ShapeError,
           "all_gather: output tensor size must be equal to world_size times input tensor size (world size ", size_,
           ", input ", input.numel(), " elements, output ", output.numel(), ")");
  return run({Kind::AllGather, seq_++, input, output});
}

namespace {
// A Work that completes when `inner` does, then runs `finish` (the copies out of a staging tensor).
class ThenWork final : public Work {
 public:
  ThenWork(WorkPtr inner, std::function<void()> finish) : inner_(std::move(inner)), finish_(std::move(finish)) {}
  bool is_completed() override { return inner_->is_completed(); }
  bool is_success() override { return inner_->is_success(); }
  void wait() override {
    inner_->wait();
    std::call_once(once_, finish_);
  }

 private:
  WorkPtr inner_;
  std::function<void()> finish_;
  std::once_flag once_;
};
}  // namespace

WorkPtr ProcessGroup::all_gather(const std::vector<Tensor>& outputs, const Tensor& input) {
  TS_CHECK(static_cast<int>(outputs.size()) == size_, ValueError, "all_gather: expected ", size_,
           " output tensors (one per rank), got ", outputs.size());
  for (const Tensor& o : outputs) {
    TS_CHECK(o.defined() && o.numel() == input.numel() && o.dtype() == input.dtype(), ShapeError,
             "all_gather: every output tensor must have the input's dtype (", dtype_name(input.dtype()),
             ") and number of elements (", input.numel(), ")");
  }
  Tensor flat = empty({static_cast<int64_t>(size_) * input.numel()}, TensorOptions(input.dtype(), input.device()));
  WorkPtr w = all_gather(flat, input);
  return std::make_shared<ThenWork>(w, [flat, outputs, n = input.numel()] {
    for (size_t r = 0; r < outputs.size(); ++r) {
      Tensor out = outputs[r];  // a handle: copy_ writes the caller's storage
      out.copy_(flat.narrow(0, static_cast<int64_t>(r) * n, n).view(out.sizes()));
    }
  });
}

WorkPtr ProcessGroup::reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) {
  check_usable("reduce_scatter");
  check_tensor("reduce_scatter", "input", input);
  check_tensor("reduce_scatter", "output", output);
  TS_CHECK(output.dtype() == input.dtype(), DTypeError, "reduce_scatter: the output tensor's dtype (",
           dtype_name(output.dtype()), ") must match the input's (", dtype_name(input.dtype()), ")");
  TS_CHECK(input.numel() == output.numel() * size_, ShapeError,
           "reduce_scatter: input tensor size must be equal to world_size times output tensor size (world size ",
           size_, ", input ", input.numel(), " elements, output ", output.numel(), ")");
  TS_CHECK(op != ReduceOp::Avg || is_floating_point(input.dtype()), DTypeError,
           "reduce_scatter: ReduceOp.AVG needs a floating-point tensor, got ", dtype_name(input.dtype()));
  Call c{Kind::ReduceScatter, seq_++, input, output, op};
  return run(std::move(c));
}

WorkPtr ProcessGroup::barrier() {
  check_usable("barrier");
  return run({Kind::Barrier, seq_++, Tensor(), Tensor()});
}

WorkPtr ProcessGroup::send(const Tensor& tensor, int dst, int tag) {
  check_usable("send");
  check_tensor("send", "input", tensor);
  TS_CHECK(dst >= 0 && dst < size_ && dst != rank_, ValueError, "send: the destination rank ", dst,
           " must be another rank of the group (rank ", rank_, " of ", size_, ")");
  TS_CHECK(tag >= 0 && tag < (1 << 15), ValueError, "send: the tag must be in [0, 32768), got ", tag);
  Call c{Kind::Send, 0, tensor, tensor};
  c.peer = dst;
  c.tag = tag;
  return run(std::move(c));
}

WorkPtr ProcessGroup::recv(const Tensor& tensor, int src, int tag) {
  check_usable("recv");
  check_tensor("recv", "output", tensor);
  TS_CHECK(src >= 0 && src < size_ && src != rank_, ValueError, "recv: the source rank ", src,
           " must be another rank of the group (rank ", rank_, " of ", size_, ")");
  TS_CHECK(tag >= 0 && tag < (1 << 15), ValueError, "recv: the tag must be in [0, 32768), got ", tag);
  Call c{Kind::Recv, 0, tensor, tensor};
  c.peer = src;
  c.tag = tag;
  return run(std::move(c));
}

void ProcessGroup::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(abort_mutex_);
    if (aborted_.load()) return;
    abort_reason_ = reason;
    aborted_.store(true);
  }
  on_abort();
}

std::string ProcessGroup::abort_reason() const {
  std::lock_guard<std::mutex> lock(abort_mutex_);
  return abort_reason_;
}

// ---- the default group and the free functions ---------------------------------------------------

namespace {
ProcessGroup& group_or_default(ProcessGroup* g) { return g ? *g : default_group(); }
WorkPtr finish(WorkPtr w, bool async_op) {
  if (!async_op) w->wait();
  return w;
}
}  // namespace

ProcessGroup& default_group() {
  ProcessGroup* g = detail::default_group_ptr();
  TS_CHECK(g != nullptr, distributed::DistributedError,
           "Default process group has not been initialized, please make sure to call init_process_group.");
  return *g;
}
bool is_initialized() { return detail::default_group_ptr() != nullptr; }
int get_rank() { return default_group().rank(); }
int get_world_size() { return default_group().size(); }
int get_local_rank() { return default_group().local_rank(); }

WorkPtr all_reduce(const Tensor& tensor, ReduceOp op, bool async_op, ProcessGroup* group) {
  return finish(group_or_default(group).all_reduce(tensor, op), async_op);
}
WorkPtr broadcast(const Tensor& tensor, int src, bool async_op, ProcessGroup* group) {
  return finish(group_or_default(group).broadcast(tensor, src), async_op);
}
WorkPtr all_gather_into_tensor(const Tensor& output, const Tensor& input, bool async_op, ProcessGroup* group) {
  return finish(group_or_default(group).all_gather(output, input), async_op);
}
WorkPtr all_gather(const std::vector<Tensor>& outputs, const Tensor& input, bool async_op, ProcessGroup* group) {
  return finish(group_or_default(group).all_gather(outputs, input), async_op);
}
WorkPtr reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op, bool async_op,
                              ProcessGroup* group) {
  return finish(group_or_default(group).reduce_scatter(output, input, op), async_op);
}
WorkPtr barrier(bool async_op, ProcessGroup* group) { return finish(group_or_default(group).barrier(), async_op); }
WorkPtr send(const Tensor& tensor, int dst, int tag, ProcessGroup* group) {
  return finish(group_or_default(group).send(tensor, dst, tag), false);
}
WorkPtr recv(const Tensor& tensor, int src, int tag, ProcessGroup* group) {
  return finish(group_or_default(group).recv(tensor, src, tag), false);
}
WorkPtr isend(const Tensor& tensor, int dst, int tag, ProcessGroup* group) {
  return group_or_default(group).send(tensor, dst, tag);
}
WorkPtr irecv(const Tensor& tensor, int src, int tag, ProcessGroup* group) {
  return group_or_default(group).recv(tensor, src, tag);
}

}  // namespace tessera::distributed
