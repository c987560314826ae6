"""Files that cltensor keeps on disk (program binaries, tuned parameters, checkpoints), written
so that a crash, a full disk or a second process never leaves a half-written file in place.

- atomic_file(): a unique temporary file beside the target, fsynced, then renamed over it.
- file_lock(): an exclusive fcntl.flock on `<file>.lock`, for read-merge-write updates.
- private_dir(): a per-user folder created 0700 and refused (one CacheWarning, no disk cache)
  when another user owns it or others can write to it.
- read_json(): a JSON database, validated; a corrupt one is renamed `<file>.corrupt` with one
  CacheWarning, and the caller goes on with its defaults.
"""
import contextlib
import fcntl
import json
import os
import stat
import tempfile
import warnings


class CacheWarning(UserWarning):
    """A cache or database file or folder was unusable: set aside, refused or rebuilt;
    cltensor goes on without it."""


_warned = set()


def warn_once(key, message):
    """One CacheWarning per key and process."""
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, CacheWarning, stacklevel=3)


@contextlib.contextmanager
def atomic_file(path, mode=0o600):
    """A binary file object whose contents replace `path` when the block ends without error
    (written to a unique temporary file in the same folder, fsynced, renamed); on an error the
    temporary file is removed and `path` is untouched."""
    path = os.fspath(path)
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(folder)


def _fsync_dir(folder):
    # NOTE: makes the rename itself durable; some file systems refuse fsync on a folder
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_atomic(path, data, mode=0o600):
    """Replace `path` by `data` (bytes) atomically (atomic_file)."""
    with atomic_file(path, mode) as f:
        f.write(data)


@contextlib.contextmanager
def file_lock(path):
    """Hold an exclusive flock on `<path>.lock` (created 0600) for the block."""
    fd = os.open(os.fspath(path) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # NOTE: closing the descriptor releases the lock


def private_dir(path):
    """`path` (str), created 0700 if missing, or None with one CacheWarning when it cannot be
    made, is not a folder, belongs to another user, or others (group or world) can write it."""
    path = os.fspath(path)
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.stat(path)
    except OSError as e:
        warn_once(("dir", path), f"cltensor: cache folder {path} is unusable ({e}); "
                                 f"going on without a disk cache there")
        return None
    problem = None
    if not stat.S_ISDIR(st.st_mode):
        problem = "it is not a folder"
    elif st.st_uid != os.geteuid():
        problem = f"it belongs to user id {st.st_uid}, not to this user ({os.geteuid()})"
    elif st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        problem = f"others can write to it (mode {stat.S_IMODE(st.st_mode):o})"
    if problem:
        warn_once(("dir", path), f"cltensor: refusing cache folder {path}: {problem}; going on "
                                 f"without a disk cache there (chmod 700 it or remove it)")
        return None
    return path


def private_dirs(root, *parts):
    """The folder root/parts..., each level from root on checked by private_dir(); None (with
    one CacheWarning) when one is refused."""
    path = os.fspath(root)
    for part in ("",) + parts:
        path = os.path.join(path, part) if part else path
        if private_dir(path) is None:
            return None
    return path


def set_aside(path, reason):
    """Rename a corrupt file to `<path>.corrupt` (kept for inspection), with one CacheWarning."""
    path = os.fspath(path)
    with contextlib.suppress(OSError):
        os.replace(path, path + ".corrupt")
    warn_once(("corrupt", path), f"cltensor: {path} is corrupt ({reason}); set aside as "
                                 f"{os.path.basename(path)}.corrupt, using defaults")


def _parse(path, validate):
    """(data, None) from the file, ({}, None) when missing, (None, reason) when corrupt."""
    try:
        with open(path, "rb") as f:
            text = f.read()
    except FileNotFoundError:
        return {}, None
    try:
        data = json.loads(text)
        validate(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        return None, str(e).splitlines()[0][:200]
    return data, None


def read_json(path, validate):
    """The JSON database at `path` after validate(data) (which raises ValueError on bad data);
    {} when missing. A corrupt file is set aside (set_aside) and {} returned; an unreadable
    one gives one CacheWarning and {}."""
    try:
        data, reason = _parse(path, validate)
        if data is not None:
            return data
        with file_lock(path):  # NOTE: again under the lock: a writer may have just replaced it
            data, reason = _parse(path, validate)
            if data is None:
                set_aside(path, reason)
    except OSError as e:
        warn_once(("read", os.fspath(path)), f"cltensor: cannot read {os.fspath(path)} ({e}); "
                                             f"using defaults")
        return {}
    return data or {}


def update_json(path, validate, change):
    """Under the file's lock: read the database (a corrupt one set aside), apply change(data)
    (which edits it in place) and write the result atomically. Returns the data written."""
    os.makedirs(os.path.dirname(os.fspath(path)), mode=0o700, exist_ok=True)
    with file_lock(path):
        data, reason = _parse(path, validate)
        if data is None:
            set_aside(path, reason)
            data = {}
        change(data)
        validate(data)
        write_atomic(path, json.dumps(data, indent=1, sort_keys=True).encode())
    return data
