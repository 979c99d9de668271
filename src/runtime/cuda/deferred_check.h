// Deferred device checks: errors a kernel finds in the data (an index out of range) reach the host
// without a synchronization per op.
//
// Note [Deferred device checks]: a kernel that validates data it reads (gather, scatter, index,
// embedding and its backward's index_add, index_put with accumulate, cross-entropy targets) records the first bad position in device status words (Note [Bad
// index flag] in kernels/cuda/index_common.cuh). Its entry then calls defer_status_check, which queues
// on the op's stream a copy of the two words into a slot of pinned host memory and an event after it,
// and keeps the op's `raise` closure (holding the tensors its message needs). The op returns at once:
// nothing waits for the device. poll_deferred_checks() resolves, oldest first, every pending check
// whose event has completed: a zero word releases it; a non-zero word runs its closure, which throws
// the op's IndexError (the one error raised, the rest stays queued). Polls run at every synchronization
// tessera makes or offers (synchronize(), Stream/Event synchronize, copies to the host such as item()
// and cpu()) and at the next checked op (never for its own check), so a bad index raises at the latest
// at the next point where the host waits for the device: asynchronously, as CUDA errors are in
// PyTorch, naming the op that found it. The closure may read the bad value back from the device (a small synchronous copy:
// the error path only).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>

namespace tessera::cuda {

// Runs with the two status words once they are on the host; throws when they report an error.
using DeferredRaise = std::function<void(uint64_t word0, uint64_t word1)>;

// Queues the check of the two 64-bit words at `device_words` (device memory that stays valid in the
// stream's order, e.g. a workspace block released after this call) on `stream`. Resolves the
// earlier checks that have landed; an error of theirs raises here, after this check is queued.
void defer_status_check(cudaStream_t stream, const void* device_words, DeferredRaise raise);

// Resolves the pending checks that have completed; raises the first failure found.
void poll_deferred_checks();

// The number of checks not yet resolved (tests).
int64_t pending_deferred_checks();

}  // namespace tessera::cuda
