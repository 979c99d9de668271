// nn::DistributedDataParallel, as torch.nn.parallel.DistributedDataParallel: one process per device,
// each with a replica of the model and its own part of the batch; gradients are averaged across the
// ranks during backward, so that every replica takes the same optimizer step.
//
//   ts::distributed::init_process_group("mpi");          // or "nccl", under mpirun / srun / torchrun
//   Net net;
//   ts::nn::DistributedDataParallel ddp(net);            // broadcasts rank 0's parameters and buffers
//   ts::optim::AdamW opt(ddp.parameters());
//   for (...) { opt.zero_grad(); loss(ddp(x), y).backward(); opt.step(); }
//
// Note [DDP buckets]: the parameters that require grad are laid out, in reverse order of
// parameters() (roughly the order backward produces their gradients), into flat buckets of one dtype
// and device each: the first holds up to first_bucket_cap_mb (1 MiB), the others bucket_cap_mb (25 MiB);
// a bucket is closed once it reaches its cap (so one large parameter makes a bucket of its own), as
// PyTorch's compute_bucket_assignment_by_size. Each parameter has a post-accumulate-grad hook: it copies
// the gradient into its slot of the bucket (unless .grad already is that slot) and marks it ready. A
// bucket whose parameters are all ready is all-reduced (Avg) asynchronously while backward computes the
// rest, and buckets start strictly in order (bucket i only after bucket i-1), so every rank issues the
// same collectives in the same order even when their gradients arrive in different orders. At the end
// of backward (a callback queued on the autograd engine by the first hook of the iteration) the
// reductions are waited for.
//
// Note [Gradient as bucket view]: with gradient_as_bucket_view (the default here, PyTorch's option),
// each parameter's .grad becomes a view of its bucket slot: the reduced gradient lands in .grad with
// no copy back, and a gradient zeroed in place (`p.grad().zero_()`) accumulates straight into the
// bucket on the next backward. When zero_grad replaces .grad between steps (set to none, the default,
// or a new zero tensor with set_to_none=false) the hook copies the new gradient into the slot once and
// makes .grad the view again. Without the option, the reduced values are copied back into each .grad.
//
// Note [DDP unused parameters]: a parameter that gets no gradient leaves its bucket incomplete. By
// default that is an error at the end of backward (after the started reductions have completed,
// so that the ranks stay in step), naming the parameters, as PyTorch's "Expected to have finished
// reduction..." does (PyTorch raises it at the next forward; here the step that would use unreduced
// gradients cannot happen). With find_unused_parameters the missing slots count as zero gradients at
// the end of backward, the remaining buckets are reduced, and a MAX all-reduce of a used-map tells
// which parameters no rank used: their .grad is left as it was (undefined after zero_grad), as in
// PyTorch. Others (used on another rank) get the average.
//
// no_sync(): within the guard backward accumulates into .grad locally and reduces nothing; the first
// backward after it reduces the accumulated sums. broadcast_buffers: every forward first broadcasts
// rank 0's buffers (BatchNorm's running statistics) to the other ranks.
//
// CUDA graphs: a whole step (forward, backward, optimizer step) of a DDP model on the nccl backend can
// be captured by cuda::make_graphed, as PyTorch's DDP under torch.cuda.graph: the hooks run during the
// capture as in an eager step and the bucket all-reduces are captured with the kernels (Note [NCCL
// under CUDA graph capture] in src/distributed/cuda/process_group_nccl.cpp); each replay reduces
// again. find_unused_parameters reads its used-map on the host and cannot be captured.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/distributed.h"
#include "tessera/nn/module.h"

namespace tessera::nn {

struct DistributedDataParallelOptions {
  double bucket_cap_mb = 25.0;        // MiB, as PyTorch's bucket_cap_mb
  double first_bucket_cap_mb = 1.0;   // PyTorch's dist._DEFAULT_FIRST_BUCKET_BYTES
  bool broadcast_buffers = true;
  bool find_unused_parameters = false;
  bool gradient_as_bucket_view = true;
  distributed::ProcessGroup* process_group = nullptr;  // default: the default group
};

class DistributedDataParallel : public Module {
 public:
  // Wraps `module` (not owned: it must outlive the wrapper), registered as the child "module", so that
  // state_dict() names are PyTorch's ("module.fc1.weight"). Broadcasts rank 0's parameters and buffers.
  explicit DistributedDataParallel(Module& module, DistributedDataParallelOptions options = {});
  ~DistributedDataParallel() override;
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  Tensor forward(Tensor input) override;
  Module& module() { return *module_; }
  const Module& module() const { return *module_; }
  std::string name() const override { return "DistributedDataParallel"; }

  // Within the guard's lifetime backward reduces nothing (gradient accumulation).
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp) : ddp_(ddp), prev_(ddp.require_sync_) { ddp.require_sync_ = false; }
    ~NoSyncGuard() { ddp_.require_sync_ = prev_; }
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool prev_;
  };
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  // ---- the bucket layout and the last backward, for tests and tuning -------------------------------
  size_t num_buckets() const;
  // The dotted names of bucket i's parameters (relative to the wrapped module), in slot order.
  std::vector<std::string> bucket_parameter_names(size_t bucket) const;
  size_t bucket_bytes(size_t bucket) const;
  // How many buckets the last synchronized backward started from gradient hooks, before its end
  // (the rest were started by the end-of-backward callback): the overlap with backward.
  size_t buckets_started_in_backward() const;

  struct Reducer;  // src/distributed/ddp_reducer.cpp

 private:
  Module* module_;
  DistributedDataParallelOptions options_;
  distributed::ProcessGroup* group_;
  bool require_sync_ = true;
  std::unique_ptr<Reducer> reducer_;
};

}  // namespace tessera::nn
