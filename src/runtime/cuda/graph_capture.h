// The internal side of CUDA graph capture (the public side is tessera/cuda_graph.h): the capture checks
// that synchronizing calls make, the caching allocator's private pools seen from the CUDA layer, and
// the hook through which the random kernels' family writes a graph's Philox words before a replay.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/allocator.h"
#include "runtime/block_pool.h"

namespace tessera::cuda {

// Whether `stream` is being captured (active, or invalidated and not yet ended).
bool stream_is_captured(cudaStream_t stream);
// Raises Error "<op>: cannot synchronize the device while a CUDA graph is being captured (...)" when
// `stream` is being captured. A synchronizing call checks before it synchronizes: synchronizing a
// capturing stream would invalidate the capture with a less helpful CUDA error.
void check_not_capturing(const char* op, cudaStream_t stream);
// The same for the current stream of the current device (declared in tessera/cuda_graph.h too).
void check_not_capturing(const char* op);

// The caching allocator of `device` (Note [Graph private pools], runtime/block_pool.h).
void begin_allocate_to_pool(int device, alloc::MempoolId id, alloc::StreamFilter filter);
void end_allocate_to_pool(int device, alloc::MempoolId id);
void release_pool(int device, alloc::MempoolId id);
void release_freeable_pools(int device);

// A captured copy from page-locked host memory reads that memory again at every replay: the graph
// capturing `stream` keeps the block `host` until it is reset, then hands it back to the pinned cache
// once the replays queued by then have run. Raises when no cuda::Graph is capturing `stream`.
void keep_for_graph(cudaStream_t stream, DataPtr host);

// Writes {seed, offset} into dst[0..1] (device memory) on `stream`, stream-ordered, reading no host
// memory at run time (a kernel whose arguments are the values). Registered by the random family.
using PhiloxStateWriter = void (*)(uint64_t* dst, uint64_t seed, uint64_t offset, cudaStream_t stream);
void set_philox_state_writer(PhiloxStateWriter writer);

}  // namespace tessera::cuda
