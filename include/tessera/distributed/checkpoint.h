// Checkpoints of data-parallel training. The model (a DistributedDataParallel is unwrapped, so that
// the names are the plain module's and a single process loads them), a plain optimizer, the
// scheduler and the generators are written by rank 0 alone through save_checkpoint (Note [Atomic
// checkpoint] in tessera/checkpoint.h); a ZeroRedundancyOptimizer's state is written by every rank,
// one shard file each, into the same directory once rank 0's write has landed. Every rank of the
// group calls these functions.
//
// Loading reads the model (and the rest) on every rank; a ZeRO state saved by any number of ranks is
// resharded for this run's (Note [ZeRO resharding]), so a 2-rank run resumes on 1 rank and back.
// The shard files are written after the model's atomic swap: a process killed in between leaves a
// checkpoint whose shard files are missing or those of the previous save, which load_checkpoint
// reports (a missing shard is an IOError; stale ones carry a step of their own, checked below).
#pragma once
#include <cstdint>
#include <string>

#include "tessera/checkpoint.h"
#include "tessera/distributed/zero.h"

namespace tessera::distributed {

void save_checkpoint(const std::string& dir, const nn::Module& model, const optim::Optimizer* optimizer = nullptr,
                     const optim::LRScheduler* scheduler = nullptr, int64_t step = 0,
                     const NamedGenerators& generators = {});
void save_checkpoint(const std::string& dir, const nn::Module& model, const optim::ZeroRedundancyOptimizerBase& zero,
                     const optim::LRScheduler* scheduler = nullptr, int64_t step = 0,
                     const NamedGenerators& generators = {});
int64_t load_checkpoint(const std::string& dir, nn::Module& model, optim::Optimizer* optimizer = nullptr,
                        optim::LRScheduler* scheduler = nullptr, const NamedGenerators& generators = {});
int64_t load_checkpoint(const std::string& dir, nn::Module& model, optim::ZeroRedundancyOptimizerBase& zero,
                        optim::LRScheduler* scheduler = nullptr, const NamedGenerators& generators = {});

}  // namespace tessera::distributed
