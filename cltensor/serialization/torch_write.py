"""Writing PyTorch's checkpoint format (what torch.save writes) without torch.

The file is a zip archive, stored uncompressed, with every member under `archive/`:
  data.pkl      a protocol-2 pickle of the object; a tensor is
                torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad,
                OrderedDict()) and its storage the persistent id
                ('storage', torch.<Type>Storage, key, "cpu", numel)
  data/<key>    the little-endian bytes of storage <key>, starting on a 64-byte boundary
  .format_version, .storage_alignment, byteorder, version, .data/serialization_id
Views of one device buffer share one data/<key> member, offsets and strides kept, as in torch.
The pickle is written opcode by opcode so that the torch globals are named, never imported.
"""
import io
import numbers
import os
import struct
import zipfile
from collections import OrderedDict

import numpy as np

from .. import dtypes as dt
from ..size import Size
from ..tensor import ClTensor

ARCHIVE = "archive"
ALIGN = 64
# numpy dtype -> torch's storage class; shared with the reader
STORAGE_OF = {np.dtype(np.float32): "FloatStorage", np.dtype(np.float64): "DoubleStorage",
              np.dtype(np.int64): "LongStorage", np.dtype(np.int32): "IntStorage",
              np.dtype(np.int16): "ShortStorage", np.dtype(np.int8): "CharStorage",
              np.dtype(np.uint8): "ByteStorage", np.dtype(np.bool_): "BoolStorage",
              np.dtype(np.float16): "HalfStorage"}

_PROTO, _STOP, _MARK, _REDUCE, _BINPERSID = b"\x80\x02", b".", b"(", b"R", b"Q"
_ORDERED_DICT = b"ccollections\nOrderedDict\n)R"  # OrderedDict() by name
_REBUILD = b"ctorch._utils\n_rebuild_tensor_v2\n"
_SIZE = b"ctorch\nSize\n"


def _str(s):
    data = s.encode("utf-8", "surrogatepass")
    return b"X" + struct.pack("<I", len(data)) + data


def _int(n):
    if 0 <= n < 256:
        return b"K" + bytes([n])
    if -(1 << 31) <= n < (1 << 31):
        return b"J" + struct.pack("<i", n)
    data = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    if len(data) > 255:
        raise TypeError(f"save: the integer {n:.3e} is too large to save")
    return b"\x8a" + bytes([len(data)]) + data


def _tuple(parts):
    return b")" if not parts else _MARK + b"".join(parts) + b"t"


class _Storages:
    """The storages of the tensors met while pickling: one key per device buffer (or array)."""

    def __init__(self):
        self.keys = {}    # id of the buffer -> key
        self.items = []   # (dtype, numel, source): source a ClTensor over the whole buffer or an array

    def key_of(self, ident, dtype, numel, source):
        if ident not in self.keys:
            self.keys[ident] = str(len(self.items))
            self.items.append((dtype, numel, source))
        key = self.keys[ident]
        if self.items[int(key)][0] != dtype:
            raise TypeError("save: two tensors view one buffer as different dtypes")
        return key

    def host_arrays(self):
        for key, (dtype, _, source) in enumerate(self.items):
            arr = source.numpy() if isinstance(source, ClTensor) else source
            if dtype is dt.bfloat16:  # numpy() gave float32: back to the stored bits
                arr, dtype = dt.bf16_bits(arr), np.dtype(np.uint16)
            yield str(key), np.ascontiguousarray(arr, dtype=dtype.newbyteorder("<")).reshape(-1)


class _Pickler:
    """The protocol-2 pickle of nested containers of tensors, arrays, numbers and strings."""

    def __init__(self):
        self.storages = _Storages()
        self._open = set()  # ids of the containers being written, to refuse cycles

    def dumps(self, obj):
        return _PROTO + self._save(obj, "the object") + _STOP

    def _save(self, obj, where):
        if obj is None:
            return b"N"
        if isinstance(obj, (bool, np.bool_)):
            return b"\x88" if obj else b"\x89"
        if isinstance(obj, str):
            return _str(obj)
        if isinstance(obj, numbers.Integral):
            return _int(int(obj))
        if isinstance(obj, numbers.Real):
            return b"G" + struct.pack(">d", float(obj))
        if isinstance(obj, ClTensor):
            return self._tensor(obj, where)
        if isinstance(obj, np.ndarray):
            return self._array(obj, where)
        if isinstance(obj, (dict, list, tuple)):
            return self._container(obj, where)
        raise TypeError(f"save: {where} is a {type(obj).__name__}; only tensors, numpy arrays, "
                        f"numbers, strings, None and dicts, lists and tuples of them can be saved")

    def _container(self, obj, where):
        if id(obj) in self._open:
            raise TypeError(f"save: {where} contains itself")
        self._open.add(id(obj))
        try:
            if isinstance(obj, Size):  # torch.Size((2, 3))
                return _SIZE + _tuple([_tuple([_int(int(n)) for n in obj])]) + _REDUCE
            if isinstance(obj, tuple):
                return _tuple([self._save(v, f"{where}[{i}]") for i, v in enumerate(obj)])
            if isinstance(obj, list):
                items = b"".join(self._save(v, f"{where}[{i}]") for i, v in enumerate(obj))
                return b"]" + (_MARK + items + b"e" if obj else b"")
            items = b"".join(self._save(k, f"a key of {where}") + self._save(v, f"{where}[{k!r}]")
                             for k, v in obj.items())
            head = _ORDERED_DICT if isinstance(obj, OrderedDict) else b"}"
            return head + (_MARK + items + b"u" if obj else b"")
        finally:
            self._open.discard(id(obj))

    def _storage_type(self, dtype, where):
        if dtype is dt.bfloat16:
            return b"ctorch\nBFloat16Storage\n"
        if dtype not in STORAGE_OF:
            raise TypeError(f"save: {where} has dtype {dtype}, which cannot be saved "
                            f"({', '.join(str(d) for d in STORAGE_OF)})")
        return f"ctorch\n{STORAGE_OF[dtype]}\n".encode()

    def _tensor(self, t, where):
        stype = self._storage_type(t.dtype, where)
        numel = t.storage.nbytes // t.dtype.itemsize
        whole = ClTensor(t.storage, (numel,), (1,), 0, t.dtype)
        key = self.storages.key_of(id(t.storage), t.dtype, numel, whole)
        return self._rebuild(stype, key, numel, t.offset, t.shape, t.strides,
                             bool(t.requires_grad))

    def _array(self, arr, where):
        stype = self._storage_type(arr.dtype, where)
        arr = np.ascontiguousarray(arr)
        key = self.storages.key_of(id(arr), arr.dtype, arr.size, arr)
        strides = tuple(s // arr.itemsize for s in arr.strides)
        return self._rebuild(stype, key, arr.size, 0, arr.shape, strides, False)

    def _rebuild(self, stype, key, numel, offset, shape, strides, requires_grad):
        pid = _tuple([_str("storage"), stype, _str(key), _str("cpu"), _int(numel)]) + _BINPERSID
        args = [pid, _int(offset), _tuple([_int(n) for n in shape]),
                _tuple([_int(s) for s in strides]), b"\x88" if requires_grad else b"\x89",
                _ORDERED_DICT]
        return _REBUILD + _tuple(args) + _REDUCE


def _record(zf, f, name, data, aligned=False):
    """Write one stored member; an aligned one gets a padding extra field (id "FB", as torch's
    writer uses) so that its data starts on an ALIGN-byte boundary of the file."""
    info = zipfile.ZipInfo(f"{ARCHIVE}/{name}", date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    info.file_size = len(data)
    if aligned:
        zip64 = 20 if info.file_size * 1.05 > zipfile.ZIP64_LIMIT else 0  # as zipfile decides
        start = f.tell() + 30 + len(info.filename.encode()) + 4 + zip64
        info.extra = b"FB" + struct.pack("<H", -start % ALIGN) + b"Z" * (-start % ALIGN)
    with zf.open(info, "w") as member:
        member.write(data)


def write(obj, f):
    """Write obj to the binary file object f in torch's zip format."""
    if not f.seekable():
        buf = io.BytesIO()
        write(obj, buf)
        f.write(buf.getvalue())
        return
    pickler = _Pickler()
    pickled = pickler.dumps(obj)
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        _record(zf, f, "data.pkl", pickled)
        _record(zf, f, ".format_version", b"1")
        _record(zf, f, ".storage_alignment", str(ALIGN).encode())
        _record(zf, f, "byteorder", b"little")
        for key, arr in pickler.storages.host_arrays():
            _record(zf, f, f"data/{key}", memoryview(arr.view(np.uint8)), aligned=True)
        _record(zf, f, "version", b"3\n")
        _record(zf, f, ".data/serialization_id", os.urandom(20).hex().encode())
