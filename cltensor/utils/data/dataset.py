"""Datasets with torch.utils.data's names: map-style (`__getitem__`/`__len__`) and iterable ones,
their combinations, and random_split."""
import bisect
import functools
import itertools
import math
import numbers
import warnings

import numpy as np

from ...autograd.namespace import from_numpy, tensor
from ...dtypes import int64
from ...tensor import ClTensor
from .sampler import host_permutation

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "ChainDataset",
           "Subset", "StackDataset", "random_split"]


class Dataset:
    """A map-style dataset: subclasses define `__getitem__(index)` and usually `__len__`."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is a stream: subclasses define `__iter__`. With DataLoader workers each
    worker iterates its own copy; shard it with get_worker_info() to avoid duplicates."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Samples are tuples of rows, one row of each tensor (ClTensors or numpy arrays).

    Example:
        ds = TensorDataset(x, y)    # ds[i] == (x[i], y[i])
    """

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset: give at least one tensor")
        sizes = [len(t) for t in tensors]
        if any(s != sizes[0] for s in sizes):
            raise ValueError(f"TensorDataset: size mismatch between tensors (first dims {sizes})")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return len(self.tensors[0])

    def gather_batch(self, indices, host=False):
        """default_collate([self[i] for i in indices]) as one gather per tensor (host: numpy
        arrays), or None where the rows are not all ClTensors or numeric numpy arrays."""
        if not all(isinstance(i, numbers.Integral) and 0 <= i < len(self) for i in indices):
            return None
        out = []
        for t in self.tensors:
            if isinstance(t, ClTensor) and not host:
                out.append(t[tensor(indices, dtype=int64, device=t.device)])
            elif isinstance(t, np.ndarray) and t.dtype.kind in "biuf":
                rows = np.ascontiguousarray(t[np.asarray(indices, dtype=np.int64)])
                out.append(rows if host else from_numpy(rows))
            else:
                return None
        return out


class StackDataset(Dataset):
    """Samples of several datasets of one length side by side: a tuple (positional datasets) or
    a dict (keyword datasets)."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("StackDataset: give datasets as positional or as keyword arguments, "
                             "not both")
        if not args and not kwargs:
            raise ValueError("StackDataset: give at least one dataset")
        self.datasets = args or kwargs
        parts = args or tuple(kwargs.values())
        lengths = {len(d) for d in parts}
        if len(lengths) != 1:
            raise ValueError(f"StackDataset: the datasets differ in length ({sorted(lengths)})")
        self._length = lengths.pop()

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __len__(self):
        return self._length


class ConcatDataset(Dataset):
    """Map-style datasets one after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset does not support IterableDataset (use ChainDataset)")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        if which == len(self.datasets):
            raise IndexError(f"ConcatDataset: index {idx} is out of range for length {len(self)}")
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][idx - start]


class ChainDataset(IterableDataset):
    """Iterable datasets one after another, chained lazily."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self):
        return sum(len(d) for d in self.datasets)


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self):
        return len(self.indices)

    def gather_batch(self, indices, host=False):
        """The inner dataset's gather_batch over the mapped indices (None where it gives None)."""
        if not all(isinstance(i, numbers.Integral) and -len(self) <= i < len(self)
                   for i in indices):
            return None
        return self.dataset.gather_batch([self.indices[i] for i in indices], host)


def batch_gatherer(dataset, host):
    """gather_batch of a TensorDataset, or of Subsets of one: a whole batch as default_collate
    would give it, in one step. None for other datasets, and for subclasses with their own
    __getitem__ (which must see every sample)."""
    inner = dataset
    while isinstance(inner, Subset) and type(inner).__getitem__ is Subset.__getitem__:
        inner = inner.dataset
    if isinstance(inner, TensorDataset) and type(inner).__getitem__ is TensorDataset.__getitem__:
        return functools.partial(dataset.gather_batch, host=host)
    return None


def _fraction_lengths(n, fractions):
    """torch's rule: floor(n * f) each, then the remainder handed out one by one from the first."""
    lengths = [int(math.floor(n * f)) for f in fractions]
    for i in range(n - sum(lengths)):
        lengths[i % len(lengths)] += 1
    for i, length in enumerate(lengths):
        if length == 0:
            warnings.warn(f"Length of split at index {i} is 0. This might result in an empty "
                          f"dataset.", stacklevel=3)
    return lengths


def random_split(dataset, lengths, generator=None):
    """Split a dataset into non-overlapping random Subsets of the given lengths (ints that sum to
    len(dataset), or fractions that sum to 1). The order comes from `generator` (a
    cltensor.Generator; default: the global one, so cltensor.manual_seed fixes it).

    Example:
        train, val = random_split(ds, [0.8, 0.2], generator=cltensor.Generator().manual_seed(0))
    """
    lengths = list(lengths)
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        for i, f in enumerate(lengths):
            if not 0 <= f <= 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
        lengths = _fraction_lengths(n, lengths)
    for length in lengths:
        if not isinstance(length, numbers.Integral) or length < 0:
            raise ValueError(f"random_split: lengths must be non-negative ints or fractions that "
                             f"sum to 1, got {lengths}")
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    order = host_permutation(n, generator).tolist()
    ends = list(itertools.accumulate(lengths))
    return [Subset(dataset, order[end - length:end]) for end, length in zip(ends, lengths)]
