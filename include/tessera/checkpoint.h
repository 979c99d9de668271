// Training checkpoints: a directory holding model.safetensors (the module's state_dict under
// PyTorch's names, so torch's safetensors loader and load_state_dict take it as is),
// optimizer.safetensors (PyTorch's optimizer state_dict layout, param_groups as metadata) and
// checkpoint.json (step, scheduler state, the default generator's seed and offset, and the seed and
// offset of any generator the training loop names).
//
// Note [Atomic checkpoint]: the directory is written under a temporary name, every file and the
// directory fsynced, then swapped with a previous checkpoint of the same name in one step (Linux
// renameat2 RENAME_EXCHANGE) and the previous one removed; a failed write removes the temporary and
// leaves the previous checkpoint. A process killed at any point leaves the previous checkpoint or the
// new one, never a loadable but partial one. Where the filesystem cannot exchange, the previous one is
// moved aside (`dir.old.<pid>`) before the rename, and load_checkpoint finds it there if the save
// died in between.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tessera/generator.h"
#include "tessera/nn.h"
#include "tessera/optim.h"

namespace tessera {

// Generators a training loop owns besides the default CPU one (the order of its batches, its
// evaluation windows, a GPU's dropout), by name: saved with the checkpoint and restored by
// load_checkpoint, so that a resumed run draws what the uninterrupted one would have drawn.
using NamedGenerators = std::vector<std::pair<std::string, Generator*>>;

void save_checkpoint(const std::string& dir, const nn::Module& model, const optim::Optimizer* optimizer = nullptr,
                     const optim::LRScheduler* scheduler = nullptr, int64_t step = 0,
                     const NamedGenerators& generators = {});
// Restores what save_checkpoint wrote (strict state_dict loading), the default CPU generator's state
// and that of each named generator; returns the step. IOError for a missing or malformed checkpoint,
// or one that lacks a generator asked for.
int64_t load_checkpoint(const std::string& dir, nn::Module& model, optim::Optimizer* optimizer = nullptr,
                        optim::LRScheduler* scheduler = nullptr, const NamedGenerators& generators = {});

}  // namespace tessera
