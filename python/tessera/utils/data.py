"""tessera.utils.data: datasets and DataLoader (torch.utils.data).

The C++ datasets (TensorDataset, FashionMNIST) load through the C++ DataLoader: batches are gathered
and collated in C++ (with worker threads when num_workers > 0) while the GIL is released. A dataset
written in Python, as PyTorch users write them (a Dataset subclass, or any object with __getitem__
and __len__), loads through the same DataLoader name in Python: indices in order or shuffled by a
seeded tessera Generator, batches collated by default_collate (or collate_fn), in this thread.
"""
import abc
import collections.abc
import numbers

from tessera._C import Generator, Tensor, _data, from_numpy, randperm, stack, tensor
from tessera._C._data import FashionMNIST, TensorDataset  # noqa: F401

_CxxDataset = _data.Dataset


class Dataset(abc.ABC):  # noqa: B024 (a base to subclass, as torch.utils.data.Dataset)
    """The base of map-style datasets: subclasses define __getitem__ and __len__. The C++ datasets
    count as Datasets too (isinstance holds)."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


Dataset.register(_CxxDataset)


class ConcatDataset(Dataset):
    def __init__(self, datasets):
        self.datasets = list(datasets)
        self.cumulative = []
        n = 0
        for d in self.datasets:
            n += len(d)
            self.cumulative.append(n)

    def __len__(self):
        return self.cumulative[-1] if self.cumulative else 0

    def __getitem__(self, index):
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for a ConcatDataset of {len(self)}")
        for i, end in enumerate(self.cumulative):
            if index < end:
                return self.datasets[i][index - (self.cumulative[i - 1] if i else 0)]


_CxxDataset.__add__ = Dataset.__add__  # `a + b` of C++ datasets as of Python ones


class Subset(Dataset):
    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, list(indices)

    def __len__(self):
        return len(self.indices)

    def __getitem__(self, index):
        return self.dataset[self.indices[index]]


def default_collate(batch):
    """torch's default_collate: tensors stacked, numbers and numpy arrays made tensors, and tuples,
    lists and dicts collated field by field."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(batch, 0)
    if type(elem).__module__ == "numpy" and hasattr(elem, "shape"):
        return stack([from_numpy(e) for e in batch], 0) if elem.shape else tensor([e.item() for e in batch])
    if isinstance(elem, bool) or isinstance(elem, numbers.Number):
        return tensor(batch)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        return {k: default_collate([d[k] for d in batch]) for k in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a namedtuple
        return type(elem)(*(default_collate(list(f)) for f in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(e) != len(elem) for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        return [default_collate(list(f)) for f in zip(*batch)]
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                    f"found {type(elem).__name__}")


class _PythonLoader:
    """The DataLoader of a dataset written in Python."""

    def __init__(self, dataset, batch_size, shuffle, drop_last, seed, generator, collate_fn, pin_memory):
        self.dataset, self.batch_size, self.shuffle, self.drop_last = dataset, batch_size, shuffle, drop_last
        self.collate_fn = collate_fn or default_collate
        self.pin_memory = pin_memory
        self.generator = generator  # None: the default generator (manual_seed), as PyTorch draws the order
        if self.generator is None and seed is not None:
            self.generator = Generator()
            self.generator.manual_seed(seed)

    def __len__(self):
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self):
        n = len(self.dataset)
        if not self.shuffle:
            order = range(n)
        elif self.generator is None:
            order = randperm(n).tolist()
        else:
            order = randperm(n, generator=self.generator).tolist()
        batch = []
        for i in order:
            batch.append(self.dataset[i])
            if len(batch) == self.batch_size:
                yield self._finish(self.collate_fn(batch))
                batch = []
        if batch and not self.drop_last:
            yield self._finish(self.collate_fn(batch))

    def _finish(self, b):
        if not self.pin_memory:
            return b
        if isinstance(b, Tensor):
            return b.pin_memory()
        if isinstance(b, (list, tuple)):
            return type(b)(self._finish(x) for x in b)
        if isinstance(b, dict):
            return {k: self._finish(v) for k, v in b.items()}
        return b


def DataLoader(dataset, batch_size=1, shuffle=False, num_workers=0, drop_last=False, pin_memory=False, seed=None,
               generator=None, collate_fn=None):
    """torch.utils.data.DataLoader: a C++ dataset loads in C++ (num_workers threads); a Python one in
    Python (num_workers must be 0). `seed` (or `generator`) fixes the shuffled order."""
    if batch_size is None or batch_size < 1:
        raise ValueError(f"DataLoader: batch_size should be a positive integer, got {batch_size}")
    if isinstance(dataset, _CxxDataset) and collate_fn is None and generator is None:
        return _data.DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, num_workers=num_workers,
                                drop_last=drop_last, pin_memory=pin_memory, seed=seed)
    if num_workers:
        raise ValueError("DataLoader: num_workers > 0 needs a C++ dataset (TensorDataset, FashionMNIST); "
                         "a dataset written in Python loads in this thread (num_workers=0)")
    return _PythonLoader(dataset, batch_size, shuffle, drop_last, seed, generator, collate_fn, pin_memory)
