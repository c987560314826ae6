"""The .npz checkpoint form (numpy arrays keyed by name), written for paths ending in .npz.

The file is a plain numpy archive: np.load(path) reads it without cltensor, and a PyTorch
state_dict saved with np.savez(path, **{k: v.numpy() for k, v in sd.items()}) loads here.

A dict of name -> tensor is stored flat, one `<name>.npy` member per entry. Anything else (an
optimizer's state_dict, nested dicts, lists, tuples, numbers, strings, None) is stored as its
tensors, `tensors/<i>.npy`, and a JSON member `cltensor_tree.json` that holds the structure
with each tensor replaced by {"tensor": i}.
"""
import json
import numbers
import zipfile
from collections import OrderedDict

import numpy as np

from .. import dtypes as dt
from ..creation import from_numpy
from ..tensor import ClTensor

TREE = "cltensor_tree.json"  # the member that marks and describes the nested form
TREE_FORMAT = {"format": "cltensor-tree", "version": 1}


def _array_of(value):
    """The numpy array of a tensor, array or number, or None when value is none of those."""
    if isinstance(value, ClTensor):
        return value.numpy()
    if isinstance(value, (np.ndarray, numbers.Number, np.generic)):
        arr = np.asarray(value)
        if arr.dtype.kind in "biuf":
            return arr
    return None


def _is_flat(obj):
    """A dict of str -> tensor (or array, or number): saved as one .npy member per entry."""
    return isinstance(obj, dict) and all(
        isinstance(k, str) and _array_of(v) is not None for k, v in obj.items())


def _encode(obj, arrays, where):
    """The JSON node of obj, its tensors and arrays appended to `arrays`."""
    if isinstance(obj, (ClTensor, np.ndarray)):
        arr = _array_of(obj)
        if arr is None:
            raise TypeError(f"save: {where} is an array of dtype {obj.dtype}, which cannot be "
                            f"saved")
        arrays.append(arr)
        return {"tensor": len(arrays) - 1}
    if obj is None or isinstance(obj, (bool, str, np.bool_)):
        return {"value": obj if not isinstance(obj, np.bool_) else bool(obj)}
    if isinstance(obj, numbers.Integral):
        return {"int": int(obj)}
    if isinstance(obj, numbers.Real):
        return {"float": repr(float(obj))}  # NOTE: a string keeps inf and nan in plain JSON
    if isinstance(obj, dict):
        return {"dict": [[_encode(k, arrays, f"a key of {where}"),
                          _encode(v, arrays, f"{where}[{k!r}]")] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        kind = "list" if isinstance(obj, list) else "tuple"
        return {kind: [_encode(v, arrays, f"{where}[{i}]") for i, v in enumerate(obj)]}
    raise TypeError(f"save: {where} is a {type(obj).__name__}; only tensors, numpy arrays, "
                    f"numbers, strings, None and dicts, lists and tuples of them can be saved")


def _members(obj):
    """[(member name, array or JSON bytes)] of the archive that stores obj."""
    if _is_flat(obj):
        return [(key + ".npy", _array_of(value)) for key, value in obj.items()]
    arrays = []
    tree = dict(TREE_FORMAT, root=_encode(obj, arrays, "the object"))
    return ([(f"tensors/{i}.npy", arr) for i, arr in enumerate(arrays)] +
            [(TREE, json.dumps(tree).encode())])


def _write_zip(f, members):
    # NOTE: written with zipfile, not np.savez: np.savez would append ".npz" to the path and
    # reserves the key names "file" and "allow_pickle".
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, data in members:
            if isinstance(data, bytes):
                zf.writestr(name, data)
                continue
            with zf.open(name, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, data, allow_pickle=False)


def write(obj, f):
    """Write obj to the binary file object f as an .npz archive."""
    _write_zip(f, _members(obj))


def read(zf, name, device):
    """The object an .npz archive (open as zf) holds, its tensors on `device`."""
    try:
        return _read_archive(zf, device)
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError, RecursionError,
            UnicodeDecodeError) as e:
        raise not_an_archive(name, e) from None


def not_an_archive(name, e):
    return ValueError(f"load: {name} is not a numpy .npz archive or PyTorch checkpoint that "
                      f"cltensor reads (truncated or corrupt?): {type(e).__name__}: {e}")


def _read_array(zf, member):
    with zf.open(member) as m:
        return np.lib.format.read_array(m, allow_pickle=False)


def _read_archive(zf, device):
    names = zf.namelist()
    if TREE in names:
        tree = json.loads(zf.read(TREE))
        if not isinstance(tree, dict) or \
                {k: tree.get(k) for k in TREE_FORMAT} != TREE_FORMAT or "root" not in tree:
            raise ValueError(f"{TREE} is not a cltensor-tree version 1 structure")
        return _decode(tree["root"], lambda i: _to_device(
            f"tensor {i}", _read_array(zf, f"tensors/{i}.npy"), device))
    out = OrderedDict()
    for member in names:
        if not member.endswith(".npy"):
            raise ValueError(f"unexpected member {member!r}")
        key = member[:-4]
        out[key] = _to_device(key, _read_array(zf, member), device)
    return out


def _decode(node, tensor):
    """The object a JSON node (from _encode) stands for; tensor(i) loads the i-th array."""
    if not isinstance(node, dict) or len(node) != 1:
        raise ValueError(f"malformed node {node!r:.80} in {TREE}")
    (kind, value), = node.items()
    if kind == "tensor" and type(value) is int:
        return tensor(value)
    if kind == "value" and (value is None or isinstance(value, (bool, str))):
        return value
    if kind == "int" and type(value) is int:
        return value
    if kind == "float" and isinstance(value, str):
        return float(value)
    if kind in ("list", "tuple") and isinstance(value, list):
        items = [_decode(v, tensor) for v in value]
        return items if kind == "list" else tuple(items)
    if kind == "dict" and isinstance(value, list) and \
            all(isinstance(p, list) and len(p) == 2 for p in value):
        try:
            return {_decode(k, tensor): _decode(v, tensor) for k, v in value}
        except TypeError:  # an unhashable key
            raise ValueError(f"malformed dict node in {TREE}: a key is a list or dict") from None
    raise ValueError(f"malformed node {node!r:.80} in {TREE}")


def _to_device(key, arr, device):
    if arr.dtype not in dt.DTYPES:
        if arr.dtype.kind == "f" and arr.dtype.itemsize < 4:  # float16 checkpoints
            arr = arr.astype(np.float32)
        else:
            raise TypeError(f"load: entry {key!r} has dtype {arr.dtype}, which cltensor does "
                            f"not support ({', '.join(str(d) for d in dt.DTYPES)})")
    return from_numpy(arr, device=device)
