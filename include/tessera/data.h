// tessera::data, as torch.utils.data: datasets (Dataset, TensorDataset, MNIST, FashionMNIST,
// TextByteDataset), the IDX reader, and DataLoader (batching, seeded shuffling, worker threads).
#pragma once
#include "tessera/data/dataloader.h"
#include "tessera/data/dataset.h"
#include "tessera/data/datasets.h"
