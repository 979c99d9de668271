"""tessera.utils.data: the C++ datasets and DataLoader (torch.utils.data). Batches are collated in C++
(with worker threads when num_workers > 0) while the GIL is released."""
from tessera._C._data import Dataset, TensorDataset, DataLoader, FashionMNIST  # noqa: F401
