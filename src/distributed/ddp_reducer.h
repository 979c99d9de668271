// DistributedDataParallel's reducer: the gradient buckets, the hooks that fill them, and the
// end-of-backward wait (Note [DDP buckets], Note [Gradient as bucket view], Note [DDP unused
// parameters] in tessera/distributed/ddp.h). Internal to the distributed layer.
//
// Invariants between iterations: no bucket has a reduction in flight, every slot is not ready, and
// every bucket's pending count is its number of slots.
#pragma once
#include <string>
#include <vector>

#include "tessera/distributed/ddp.h"

namespace tessera::nn {

struct DistributedDataParallel::Reducer {
  struct Slot {
    Tensor param;
    std::string name;
    size_t bucket = 0;
    Tensor view;            // the slot in its bucket, shaped as the parameter
    uint64_t hook = 0;
    bool ready = false;     // its gradient is in the bucket for this iteration
    bool used = false;      // it got a gradient from backward this iteration (not a filled-in zero)
  };
  struct Bucket {
    Tensor buffer;          // flat, one dtype and device
    std::vector<size_t> slots;
    size_t pending = 0;
    distributed::WorkPtr work;
  };

  Reducer(distributed::ProcessGroup& group, const DistributedDataParallelOptions& options, const bool& require_sync,
          const std::vector<std::pair<std::string, Tensor>>& named_params);
  ~Reducer();

  // A parameter's gradient has been accumulated (its post-accumulate-grad hook).
  void on_grad_ready(size_t slot);
  // The end-of-backward callback.
  void finalize();
  // Called by forward: raises when the previous iteration's reductions were left unfinished.
  void check_finished_previous();

  distributed::ProcessGroup& group;
  DistributedDataParallelOptions options;
  const bool& require_sync;
  std::vector<Slot> slots;
  std::vector<Bucket> buckets;
  size_t next_bucket = 0;        // buckets start in order (Note [DDP buckets])
  bool in_iteration = false;     // a hook ran and the end-of-backward callback is queued
  size_t started_in_backward = 0;
  size_t last_started_in_backward = 0;

 private:
  void start_ready_buckets(bool from_hook);
  void wait_started();
  void reset();
  // Copies `grad` (or zeros) into the slot; adopt: .grad becomes the slot (Note [Gradient as bucket view]).
  void fill_slot(Slot& s, const Tensor& grad, bool adopt);
};

}  // namespace tessera::nn
