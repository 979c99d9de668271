// Random numbers inside a captured CUDA graph (Note [Philox under graph capture]). CUDA-free: the
// CUDA graph (runtime/cuda/graph.cpp) opens and closes the capture of a Generator; the random ops
// (ops/random.cpp) ask here before reserving counters.
//
// Note [Philox under graph capture]
// A graph replays its kernels with the arguments they were captured with, so a random kernel that
// took (seed, offset) by value would draw the same numbers at every replay. As PyTorch's
// philox_cuda_state: while a thread captures a graph, the CUDA generator's reservations are made
// relative to the graph ("intragraph" offsets from 0) and the kernels get two device pointers, to the
// seed and to a base offset, which they read at run time (seed = *seed_ptr, first counter = *offset_ptr +
// offset). The graph keeps the two words in a buffer of its own; before each replay it reserves the
// capture's total count from the generator and writes (seed, first counter) there. So each replay
// draws new numbers, exactly those that running the captured work eagerly from the generator's state
// would draw, and manual_seed before a replay reproduces them. Eager launches leave the pointers null.
// Only the thread that began the capture draws from the graph; other threads reserve eagerly.
#pragma once
#include <cstdint>

#include "tessera/generator.h"

namespace tessera {

struct CapturedPhilox {
  const uint64_t* seed_ptr = nullptr;    // device memory
  const uint64_t* offset_ptr = nullptr;  // device memory
  uint64_t offset = 0;                   // relative to *offset_ptr
};

// When the calling thread is capturing `gen`: reserves `counters` within the capture and fills *out.
// False otherwise (the caller reserves from `gen` as usual).
bool philox_reserve_captured(Generator& gen, uint64_t counters, CapturedPhilox* out);

// The calling thread begins capturing `gen`, whose kernels read the seed and base offset from the two
// device words. ValueError when `gen` is being captured already.
void philox_capture_begin(Generator& gen, const uint64_t* seed_ptr, const uint64_t* offset_ptr);
// Ends it; returns the counters the capture reserved (what each replay reserves from `gen`). 0 when
// `gen` was not being captured.
uint64_t philox_capture_end(Generator& gen);

}  // namespace tessera
