"""PoCL's own kernel cache, kept under cltensor's checked cache root and guarded against the
truncated entries on which PoCL aborts the process (an assertion in pocl_llvm_build_program on
a cut program.bc, a failed dlopen on a cut kernel .so: exit status 134).

setup() (at import, before any platform is opened) points POCL_CACHE_DIR at <cache root>/pocl
unless the user set it, or turns PoCL's cache off (POCL_KERNEL_CACHE=0) when that folder is
refused. guard() (before the first build on a PoCL device) checks the entries: every one in a
top-level folder changed since the last check, and all of them after a process that built
kernels died without exiting (a stale live-marker: a crash, SIGKILL or power loss mid-write).
An entry with a cut file is removed, with one CacheWarning, and PoCL builds it again. (PoCL
writes each file to a temporary name and renames it, so a live writer's files are whole.)
"""
import atexit
import contextlib
import os
import shutil
import struct
import time

from .diskfiles import private_dirs, warn_once

STAMP = "cltensor-checked"  # its mtime: when the last check began
LIVE = "cltensor-live"  # one marker per process that may be writing entries

_own_dir = None  # the folder setup() chose, or None when the user chose PoCL's folder
_guarded = False


def setup(root):
    """Point PoCL at <root>/pocl (checked 0700) unless POCL_CACHE_DIR is set already."""
    global _own_dir
    if "POCL_CACHE_DIR" in os.environ:
        return
    folder = private_dirs(root, "pocl")
    if folder is None:
        os.environ.setdefault("POCL_KERNEL_CACHE", "0")
        return
    os.environ["POCL_CACHE_DIR"] = _own_dir = folder


def guard():
    """Check the entries of cltensor's PoCL folder once per process (see the module doc)."""
    global _guarded
    if _guarded or _own_dir is None:
        return
    _guarded = True
    began = time.time()
    live = os.path.join(_own_dir, LIVE)
    stale = _stale_markers(live)
    try:
        since = 0 if stale else os.stat(os.path.join(_own_dir, STAMP)).st_mtime
    except FileNotFoundError:
        since = 0
    for top in _changed_tops(_own_dir, since):
        for entry in _subdirs(top):
            bad = _first_cut_file(entry)
            if bad:
                shutil.rmtree(entry, ignore_errors=True)
                warn_once(("pocl", entry), f"cltensor: PoCL cache entry {entry} is corrupt "
                                           f"({bad} is cut short); removed, to be built again")
    for marker in stale:
        with contextlib.suppress(OSError):
            os.unlink(marker)
    _mark_live(live)
    stamp = os.path.join(_own_dir, STAMP)
    with contextlib.suppress(OSError):
        with open(stamp, "a"):
            pass
        os.utime(stamp, (began, began))


def _stale_markers(live):
    """The live-markers of processes that no longer run."""
    out = []
    with contextlib.suppress(OSError):
        for name in os.listdir(live):
            try:
                os.kill(int(name), 0)
            except ProcessLookupError:
                out.append(os.path.join(live, name))
            except (ValueError, PermissionError):
                pass
    return out


def _mark_live(live):
    with contextlib.suppress(OSError):
        os.makedirs(live, mode=0o700, exist_ok=True)
        marker = os.path.join(live, str(os.getpid()))
        open(marker, "w").close()
        atexit.register(_unlink_quietly, marker)


def _unlink_quietly(path):
    with contextlib.suppress(OSError):
        os.unlink(path)


def _changed_tops(folder, since):
    """PoCL's top-level folders (two-letter hash prefixes) modified at or after `since`."""
    with contextlib.suppress(OSError):
        return [e.path for e in os.scandir(folder) if len(e.name) == 2 and e.is_dir() and
                e.stat().st_mtime >= since]
    return []


def _subdirs(folder):
    with contextlib.suppress(OSError):
        return [e.path for e in os.scandir(folder) if e.is_dir()]
    return []


def _first_cut_file(entry):
    """The first program.bc or kernel .so under an entry that is cut short, or None."""
    for folder, _, files in os.walk(entry):
        for name in files:
            check = _bitcode_whole if name == "program.bc" else \
                _elf_whole if name.endswith(".so") else None
            path = os.path.join(folder, name)
            if check is not None and not _file_whole(path, check):
                return os.path.relpath(path, entry)
    return None


def _file_whole(path, check):
    try:
        with open(path, "rb") as f:
            return check(f, os.fstat(f.fileno()).st_size)
    except OSError:
        return False


def _elf_whole(f, size):
    """An ELF file whose program and section header tables lie inside it."""
    head = f.read(64)
    if len(head) < 64 or head[:4] != b"\x7fELF":
        return False
    if head[4:6] != b"\x02\x01":
        return True  # NOTE: only 64-bit little-endian objects are checked (PoCL's CPU output)
    phoff, shoff = struct.unpack_from("<QQ", head, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", head, 0x36)
    if phoff + phentsize * phnum > size or shoff + shentsize * shnum > size or shentsize < 40:
        return False
    f.seek(shoff)
    table = f.read(shentsize * shnum)
    for i in range(shnum):  # every section's contents inside the file (NOBITS has none)
        kind, = struct.unpack_from("<I", table, i * shentsize + 4)
        offset, length = struct.unpack_from("<QQ", table, i * shentsize + 24)
        if kind != 8 and offset + length > size:
            return False
    return True


def _bitcode_whole(f, size):
    """LLVM bitcode whose top-level blocks (each an ENTER_SUBBLOCK with its length in 32-bit
    words, abbreviation width 2) all end inside the file."""
    head = f.read(4)
    if head == b"\xde\xc0\x17\x0b":  # the wrapper header: magic, version, offset, size
        rest = f.read(16)
        if len(rest) < 16:
            return False
        offset, length = struct.unpack_from("<II", rest, 4)
        return offset + length <= size
    if head != b"BC\xc0\xde":
        return False
    pos = 4
    while pos < size:
        f.seek(pos)
        block = f.read(16)
        if not block.strip(b"\0"):
            return True  # zero padding to the end
        length = _block_words(block)
        if length is None:
            return False
        pos += length
    return pos == size


def _block_words(block):
    """Bytes from a top-level block's start to its end, or None when it is not a block."""
    bits = int.from_bytes(block, "little")
    if bits & 3 != 1:  # ENTER_SUBBLOCK
        return None
    at = 2
    for width in (8, 4):  # the block id (vbr8) and its abbreviation width (vbr4)
        while True:
            chunk = (bits >> at) & ((1 << width) - 1)
            at += width
            if not chunk >> (width - 1):
                break
            if at > 96:
                return None
    at = -(-at // 32) * 32
    if at + 32 > len(block) * 8:
        return None
    words = (bits >> at) & 0xFFFFFFFF
    return at // 8 + 4 + 4 * words
