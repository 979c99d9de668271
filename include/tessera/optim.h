// Optimizers and learning-rate schedulers (torch.optim): `ts::optim::AdamW`, `ts::optim::CosineAnnealingLR`, ...
#pragma once
#include "tessera/optim/lr_scheduler.h"
#include "tessera/optim/optimizer.h"
#include "tessera/optim/optimizers.h"
