// The options of `tessera train` on a CLI11 command (shared by the command and its tests).
#pragma once
#include <CLI/CLI.hpp>

#include "train.h"

namespace tessera::app {

void add_train_options(CLI::App& train, TrainOptions& t);

}  // namespace tessera::app
