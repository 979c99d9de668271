// The non-reentrant form of activation checkpointing (checkpoint_non_reentrant.cpp), called by
// utils::checkpoint (checkpoint.cpp) for use_reentrant = false.
#pragma once
#include <vector>

#include "tessera/utils/checkpoint.h"

namespace tessera::utils::detail {

std::vector<Tensor> checkpoint_non_reentrant(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                                             const CheckpointOptions& options);

}  // namespace tessera::utils::detail
