// Training checkpoints: a directory holding model.safetensors (the module's state_dict under
// PyTorch's names, so torch's safetensors loader and load_state_dict take it as is),
// optimizer.safetensors (PyTorch's optimizer state_dict layout, param_groups as metadata) and
// checkpoint.json (step, scheduler state, the default generator's seed and offset).
//
// Note [Atomic checkpoint]: the directory is written under a temporary name, every file and the
// directory fsynced, then renamed into place (a previous checkpoint of the same name is moved aside
// first and removed after). A crash at any point leaves either the old checkpoint, the new one, or
// no directory of that name — never a loadable but partial one.
#pragma once
#include <cstdint>
#include <string>

#include "tessera/nn.h"
#include "tessera/optim.h"

namespace tessera {

void save_checkpoint(const std::string& dir, const nn::Module& model, const optim::Optimizer* optimizer = nullptr,
                     const optim::LRScheduler* scheduler = nullptr, int64_t step = 0);
// Restores what save_checkpoint wrote (strict state_dict loading) and the default CPU generator's
// state; returns the step. IOError for a missing or malformed checkpoint.
int64_t load_checkpoint(const std::string& dir, nn::Module& model, optim::Optimizer* optimizer = nullptr,
                        optim::LRScheduler* scheduler = nullptr);

}  // namespace tessera
