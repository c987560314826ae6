"""default_collate and default_convert, as torch's: a batch (list of samples) becomes tensors
of the same structure. Each has a host form, used in worker processes (which must not touch
the device): it builds numpy arrays, and to_device then copies them in the main process."""
import collections.abc
import numbers

import numpy as np

from ...autograd.namespace import from_numpy, stack
from ...tensor import ClTensor

__all__ = ["default_collate", "default_convert"]

_COLLATE_ERR = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or "
                "lists; found {}")


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _numeric(arr):
    if arr.dtype.kind not in "biuf":
        raise TypeError(_COLLATE_ERR.format(arr.dtype))
    return arr


def _stack_arrays(batch):
    arrays = [np.asarray(b) for b in batch]
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        raise RuntimeError(f"default_collate: stack expects each array to be equal size, but "
                           f"got shapes {sorted(shapes)}")
    return _numeric(np.stack(arrays))


def _collate_leaf(batch, host):
    """The batch as one array (host) or tensor; None when the samples are not leaves."""
    elem = batch[0]
    if isinstance(elem, ClTensor):
        if host:
            return _stack_arrays([t.numpy() for t in batch])
        return stack(batch, 0)
    if isinstance(elem, (np.ndarray, np.generic)):
        arr = _stack_arrays(batch)
    elif isinstance(elem, bool):
        arr = np.array(batch, dtype=np.bool_)
    elif isinstance(elem, numbers.Integral):
        arr = np.array(batch, dtype=np.int64)       # torch: Python ints collate to int64
    elif isinstance(elem, numbers.Real):
        arr = np.array(batch, dtype=np.float64)     # torch: Python floats collate to float64
    else:
        return None
    return arr if host else from_numpy(arr)


def collate(batch, host=False):
    """default_collate's recursion; host=True builds numpy arrays instead of tensors."""
    if not isinstance(batch, collections.abc.Sequence) or not len(batch):
        raise TypeError(f"default_collate: expected a non-empty list of samples, got {batch!r}")
    elem = batch[0]
    leaf = _collate_leaf(batch, host)
    if leaf is not None:
        return leaf
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        out = {k: collate([d[k] for d in batch], host) for k in elem}
        return _rebuild_mapping(elem, out)
    if _is_namedtuple(elem):
        return type(elem)(*(collate(list(s), host) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(s) != len(elem) for s in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        columns = [collate(list(s), host) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return columns
        try:
            return type(elem)(columns)
        except TypeError:
            return columns
    raise TypeError(_COLLATE_ERR.format(type(elem)))


def _rebuild_mapping(elem, out):
    try:
        return type(elem)(out)
    except TypeError:
        return out


def convert(data, host=False):
    """default_convert's recursion: numpy arrays and scalars become tensors (host: arrays)."""
    if isinstance(data, (np.ndarray, np.generic)) and data.dtype.kind in "biuf":
        arr = np.asarray(data)
        return arr if host else from_numpy(arr)
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, {k: convert(v, host) for k, v in data.items()})
    if _is_namedtuple(data):
        return type(data)(*(convert(d, host) for d in data))
    if isinstance(data, tuple):
        return [convert(d, host) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([convert(d, host) for d in data])
        except TypeError:
            return [convert(d, host) for d in data]
    return data


def default_collate(batch):
    """A list of samples as a batch: tensors stacked (a new first dim), numpy arrays and
    numbers made tensors (Python floats float64, ints int64, as torch), strings kept as a list,
    and dicts, namedtuples, tuples and lists collated field by field.

    Example:
        default_collate([(1.0, 2), (3.0, 4)])   # [tensor([1., 3.], float64), tensor([2, 4])]
    """
    return collate(batch)


def default_convert(data):
    """numpy arrays (inside dicts, tuples, lists too) as tensors; other data unchanged. The
    DataLoader's collate_fn when batch_size=None."""
    return convert(data)


def to_device(data):
    """The main process's half of a host collate or convert: numpy arrays become tensors."""
    if isinstance(data, np.ndarray) and data.dtype.kind in "biuf":
        return from_numpy(data)
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, {k: to_device(v) for k, v in data.items()})
    if _is_namedtuple(data):
        return type(data)(*(to_device(d) for d in data))
    if isinstance(data, (list, tuple)):
        return type(data)(to_device(d) for d in data)
    return data
