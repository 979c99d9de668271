// tessera's neural-network layer: modules, containers, functional API, losses, initializers,
// gradient clipping and DataParallel, in the names of torch.nn. `namespace nn = tessera::nn;` and
// `namespace F = tessera::nn::functional;` read like PyTorch.
#pragma once
#include "tessera/nn/attention.h"
#include "tessera/nn/containers.h"
#include "tessera/nn/conv.h"
#include "tessera/nn/data_parallel.h"
#include "tessera/nn/functional.h"
#include "tessera/nn/init.h"
#include "tessera/nn/layers.h"
#include "tessera/nn/loss.h"
#include "tessera/nn/module.h"
#include "tessera/nn/normalization.h"
#include "tessera/nn/utils.h"
