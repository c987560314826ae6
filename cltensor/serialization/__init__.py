"""cltensor.save / cltensor.load: checkpoints in PyTorch's own format, or as .npz archives.

save() writes torch's zip format (torch_write.py), so torch.load(path) reads it; a path ending
in ".npz" gets the numpy archive instead (npz.py). load() reads both, telling them apart by
their contents, and reads torch.save's files without torch, through an unpickler that accepts
only tensors and plain data (torch_read.py).
"""
import os
import pickle
import zipfile

import numpy as np

from ..device import Device, TorchDevice, get_device, is_torch_device
from ..diskfiles import atomic_file
from . import npz, torch_read, torch_write
from .allowlist import add_safe_globals, clear_safe_globals, get_safe_globals, safe_globals
from .npz import TREE, TREE_FORMAT  # noqa: F401

__all__ = ["add_safe_globals", "clear_safe_globals", "get_safe_globals", "load", "safe_globals",
           "save"]

def _new_file_mode(path):
    """The mode a plain open() would give the file: its present mode, else 0666 less umask."""
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False):
    """Write `obj` to `f` in PyTorch's checkpoint format (torch.load reads it).

    Args:
        obj: tensors, numpy arrays, numbers, strings, None, and dicts (OrderedDicts stay
            OrderedDicts), lists and tuples of them: a state_dict, an optimizer's state_dict,
            a training checkpoint. Views of one tensor are stored once and stay views.
        f: a path or a binary file object. A path is written to a temporary file in the same
            folder and renamed over the old file at the end, so a crash or a full disk while
            saving leaves the previous file whole. A path ending in ".npz" is written as a
            numpy archive instead (see load()).
        pickle_module, pickle_protocol, _disable_byteorder_record: torch's arguments; only
            their defaults are accepted. _use_new_zipfile_serialization=False (torch's legacy
            format) is refused.

    Example:
        cltensor.save(model.state_dict(), "model.pt")
        model.load_state_dict(cltensor.load("model.pt"))
    """
    if pickle_module is not None or pickle_protocol != 2 or _disable_byteorder_record:
        raise ValueError("save: pickle_module, pickle_protocol and _disable_byteorder_record "
                         "keep their defaults in cltensor (a protocol-2 pickle, byteorder kept)")
    if not _use_new_zipfile_serialization:
        raise ValueError("save: torch's legacy (non-zip) format is not written; leave "
                         "_use_new_zipfile_serialization=True")
    is_path = isinstance(f, (str, os.PathLike))
    writer = npz.write if is_path and os.fspath(f).endswith(".npz") else torch_write.write
    if not is_path:
        writer(obj, f)
        return
    with atomic_file(f, _new_file_mode(f)) as out:
        writer(obj, out)


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None,
         device=None):
    """Read a checkpoint: one that save() or torch.save wrote, or an .npz archive.

    Args:
        f: a path or a binary file object (BytesIO).
        map_location: where the tensors go, as torch names it: None (the default device), a
            device as get_device takes it ("cpu", "cuda:0", cltensor.device("cuda"), a
            Device, "0:0"); a dict {saved location: device} (other saved locations go to the
            default device); a callable (array, location) that returns a device, or None or
            its array for the default device. "cuda" with no OpenCL GPU raises DeviceError.
        weights_only: torch's argument. cltensor never runs code from a file: both True and
            False load tensors, numbers, strings and containers only, and refuse a pickled
            model (save its state_dict instead).
        device: a cltensor device for every tensor (overrides map_location).

    Tensors that shared a storage when saved share a device buffer. int8, uint8 and int16
    storages load as int32, float16 and bfloat16 as float32 (exactly). An .npz archive of
    named arrays loads as an OrderedDict of tensors, float16 arrays as float32.

    Raises:
        FileNotFoundError for a missing path; ValueError naming the file for one that is not
        a checkpoint (garbage, truncated) or that needs a global outside the allowlist;
        TypeError for a dtype cltensor has no form for (complex).
    """
    if pickle_module is not None or mmap:
        raise ValueError("load: pickle_module and mmap are not supported; leave them unset")
    if weights_only not in (None, True, False):
        raise TypeError(f"load: weights_only must be a bool, got {weights_only!r}")
    place = _placer(device if device is not None else map_location)
    if not isinstance(f, (str, os.PathLike)):
        return _load_from(f, repr(getattr(f, "name", f)), place)
    name = repr(os.fspath(f))
    if not os.path.exists(f):
        raise FileNotFoundError(f"load: no such file: {name}")
    with open(f, "rb") as fh:
        return _load_from(fh, name, place)


def _resolve(spec):
    if not isinstance(spec, (int, float, bool)):  # NOTE: torch's int names a GPU; not here
        try:
            return get_device(spec)
        except TypeError:
            pass
    raise TypeError(f"load: map_location gave {spec!r}; expected a Device, a device such as "
                    f"cltensor.device('cpu'), or a device name ('cuda:0', 'cpu', '0:0')")


class _Placement(Exception):
    """An error of the user's map_location, raised as it is rather than as a corrupt file."""

    def __init__(self, error):
        super().__init__(str(error))
        self.error = error


class _Storage(np.ndarray):
    """The array a map_location callable gets; torch's storage.cuda(i), .cpu() and .to(d)
    on it give the device they name, so torch's idioms for the callable work."""

    def cuda(self, device=None, non_blocking=False):
        return TorchDevice("cuda", device) if isinstance(device, int) else device or "cuda"

    def cpu(self):
        return "cpu"

    def to(self, device, *args, **kwargs):
        return device


def _placer(map_location):
    """place(array, saved location) -> the Device for that storage."""
    if map_location is None or isinstance(map_location, (str, Device, TorchDevice)) or \
            is_torch_device(map_location):
        target = _resolve(map_location)
        return lambda arr, location: target
    if isinstance(map_location, dict):
        for spec in map_location.values():
            _resolve(spec)
        # NOTE: a saved location never names an OpenCL device: unmapped ones get the default
        return lambda arr, location: _resolve(map_location.get(location))
    if callable(map_location):
        def place(arr, location):
            storage = None if arr is None else arr.view(_Storage)
            try:
                got = map_location(storage, location)
                return _resolve(None if got is storage else got)
            except Exception as e:  # noqa: BLE001 - the user's function: any error is theirs
                raise _Placement(e) from None
        return place
    raise TypeError(f"load: map_location must be None, a device, a string, a dict or a "
                    f"callable, got {type(map_location).__name__}")



def _refuse_bare_forms(fh, name):
    """A lone .npy array or torch's legacy form (a bare pickle) gets its own message."""
    start = fh.tell()
    head = fh.read(6)
    fh.seek(start)
    if head == b"\x93NUMPY":
        raise ValueError(f"load: {name} holds a single array, not an .npz archive of named ones")
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        raise ValueError(f"load: {name} is a bare pickle (torch's legacy format, before torch "
                         f"1.6), which cltensor does not read; re-save it with a newer torch")


def _load_from(fh, name, place):
    _refuse_bare_forms(fh, name)
    try:
        zf = zipfile.ZipFile(fh)
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as e:
        raise npz.not_an_archive(name, e) from None
    with zf:
        prefix = torch_read.archive_prefix(zf.namelist())
        if prefix is not None:
            return _read_torch(zf, prefix, name, place)
        try:
            device = place(None, "cpu")  # an .npz archive records no location
        except _Placement as e:
            raise e.error from None
        return npz.read(zf, name, device)


def _read_torch(zf, prefix, name, place):
    try:
        return torch_read.read(zf, prefix, place)
    except torch_read.RefusedGlobal as e:
        raise ValueError(f"load: {name} needs the {e}, which cltensor does not load: only "
                         f"tensors, numbers, strings and containers are read (torch's "
                         f"weights_only rules), never code. A pickled model cannot be loaded; "
                         f"save its state_dict() instead. A class you trust can be allowed "
                         f"with cltensor.serialization.add_safe_globals([cls])") from None
    except torch_read.UnsupportedDtype as e:
        raise TypeError(f"load: {name} holds {e}") from None
    except _Placement as e:
        raise e.error from None
    except (pickle.UnpicklingError, zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError,
            TypeError, IndexError, AttributeError, RecursionError, UnicodeDecodeError,
            OverflowError, MemoryError) as e:
        raise ValueError(f"load: {name} is not a PyTorch checkpoint that cltensor reads "
                         f"(truncated or corrupt?): {type(e).__name__}: {e}") from None
