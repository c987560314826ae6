"""Saving and loading state dicts as .npz files (numpy arrays keyed by name).

The file is a plain numpy archive: np.load(path) reads it without cltensor, and a PyTorch
state_dict saved with np.savez(path, **{k: v.numpy() for k, v in sd.items()}) loads here.
"""
import numbers
import os
import zipfile
from collections import OrderedDict

import numpy as np

from . import dtypes as dt
from .creation import from_numpy
from .device import get_device
from .tensor import ClTensor

__all__ = ["save", "load"]


def _host_array(key, value):
    if not isinstance(key, str):
        raise TypeError(f"save: keys must be strings, got {type(key).__name__} ({key!r})")
    if isinstance(value, ClTensor):
        return value.numpy()
    if isinstance(value, (np.ndarray, numbers.Number, np.generic)):
        arr = np.asarray(value)
        if arr.dtype.kind in "biuf":
            return arr
    raise TypeError(f"save: entry {key!r} is a {type(value).__name__}; only tensors, numpy "
                    f"arrays and numbers can be saved (flatten nested dicts first)")


def save(obj, f):
    """Write a dict of name -> tensor (or numpy array, or number) to `f` as an .npz archive.

    `f` is a path (written exactly as given, no suffix added) or a binary file object.

    Example:
        cltensor.save(model.state_dict(), "model.npz")
        model.load_state_dict(cltensor.load("model.npz"))
    """
    if not hasattr(obj, "items"):
        raise TypeError(f"save: expected a dict of name -> tensor, got {type(obj).__name__}")
    arrays = [(key, _host_array(key, value)) for key, value in obj.items()]
    # NOTE: written with zipfile, not np.savez: np.savez would append ".npz" to the path and
    # reserves the key names "file" and "allow_pickle".
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for key, arr in arrays:
            with zf.open(key + ".npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, arr, allow_pickle=False)


def load(f, map_location=None, device=None):
    """Read an .npz archive into an OrderedDict of name -> ClTensor, in the saved order.

    Args:
        f: a path or a binary file object.
        map_location, device: the device for the tensors (default: the default device).

    float16 arrays (half-precision checkpoints) load as float32.

    Raises:
        FileNotFoundError for a missing path, ValueError for a file that is not an .npz
        archive, TypeError for arrays of another dtype cltensor does not support.
    """
    target = get_device(device if device is not None else map_location)
    if isinstance(f, (str, os.PathLike)) and not os.path.exists(f):
        raise FileNotFoundError(f"load: no such file: {os.fspath(f)!r}")
    try:
        archive = np.load(f, allow_pickle=False)
    except (ValueError, OSError) as e:
        raise ValueError(f"load: {f!r} is not a numpy .npz archive ({e})") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(f"load: {f!r} holds a single array, not an .npz archive of named ones")
    out = OrderedDict()
    with archive:
        for key in archive.files:
            out[key] = _to_device(key, archive[key], target)
    return out


def _to_device(key, arr, device):
    if arr.dtype not in dt.DTYPES:
        if arr.dtype.kind == "f" and arr.dtype.itemsize < 4:  # float16 checkpoints
            arr = arr.astype(np.float32)
        else:
            raise TypeError(f"load: entry {key!r} has dtype {arr.dtype}, which cltensor does "
                            f"not support ({', '.join(str(d) for d in dt.DTYPES)})")
    return from_numpy(arr, device=device)
