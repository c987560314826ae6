"""Tuned kernel parameters: the shipped database and a per-user cache (the tuner, which writes
the cache, is cltensor/tune/).

Parameters are data. The database (cltensor/tuning/<name>.json, one file per kernel family) is
keyed kernel -> vendor -> device, each level with a `default`:

    {"gemm_float32": {"default": {...},
                      "vendors": {"pocl": {"default": {...},
                                           "devices": {"pthread-skylake-avx512": {...}}}}}}

A lookup merges, key by key, the global default, the defaults the device's description implies
(cltensor/defaults.py: any CPU the CPU kernels, any GPU the GPU ones), the vendor's default
(when its family suits the device's kind), the device's entry (the best key for the device's
normalized name, platform and driver: _key_rank) and last the user cache, which the tuner writes:
~/.cache/cltensor/tuning/<device>-<driver>.json ($CLTENSOR_CACHE_DIR, else $XDG_CACHE_HOME/cltensor,
replaces ~/.cache/cltensor), keyed by device name and driver version so a driver update starts
from the shipped entries again.

Every entry is checked against GEMM_ENTRY (each tunable's type and range; unknown keys
refused), since its values become -D build options. A user file that fails the check is set
aside as *.corrupt with one CacheWarning; store() merges with the file under a lock and
replaces it atomically (cltensor/diskfiles.py). docs/tuning.md explains the shipped entries.

"""
import json
import os
import math
import re
from pathlib import Path

from . import caches, defaults
from .diskfiles import private_dirs, read_json, update_json
from .program import cache_root, device_key

DB_DIR = Path(__file__).resolve().parent / "tuning"
# first_use(family, kernel, device) before a device's first lookup: set by cltensor.tune
# (tuning on first use, CLTENSOR_AUTOTUNE); the database layer cannot import the tuner
first_use = None
_db_files = caches.register("tune.db_files", {})
_merged = caches.register("tune.merged", {})
# (family, kernel, device index) -> current()'s entry
_current = caches.register("tune.current", {})


# ---- tuning on first use (the tuner, tune/, sets first_use; conv's dispatch times its
# problems itself) ------------------------------------------------------------------------------

AUTOTUNE_ENV = "CLTENSOR_AUTOTUNE"


class TuningWarning(UserWarning):
    """Tuning on first use (CLTENSOR_AUTOTUNE=1) ran, or failed, for a device."""


def autotune_enabled():
    """Whether CLTENSOR_AUTOTUNE asks for tuning on first use: off unless 1, true, yes or on."""
    return os.environ.get(AUTOTUNE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


# ---- the database -----------------------------------------------------------------------------

def vendor_of(device):
    """The database's vendor key of a device: 'pocl' for PoCL (its compiler decides speed),
    else the driver vendor's short name ('nvidia', 'amd', 'intel', 'apple', ...)."""
    return vendor_key(device.cl_device.vendor, device.platform_name)


def vendor_key(vendor, platform=""):
    """The short vendor key of a driver's vendor and platform strings: 'Intel(R) Corporation'
    and 'Intel' are both 'intel'."""
    if "portable computing language" in platform.lower():
        return "pocl"
    vendor = vendor.lower()
    for key, names in (("nvidia", ("nvidia",)), ("amd", ("advanced micro", "amd")),
                       ("intel", ("intel",)), ("apple", ("apple",)), ("arm", ("arm",))):
        if any(n in vendor for n in names):
            return key
    return re.sub(r"[^a-z0-9]+", "_", vendor).strip("_") or "unknown"


def normalize_name(text):
    """A platform or device name as lowercase words, without (R), (TM) and punctuation, so
    that "Intel(R) OpenCL" and "intel opencl" match."""
    text = re.sub(r"\((r|tm|c)\)", " ", text.lower())
    return " ".join(re.findall(r"[a-z0-9]+", text))


def _version(text):
    return tuple(int(n) for n in re.findall(r"\d+", text))


# ---- the schema ---------------------------------------------------------------------------------
# Every value of the database becomes a -D build option or a size the engine computes with, so
# each is checked against its tunable's type and range; unknown keys are refused.

_BIG = 2 ** 62
_VW = ("in", (1, 2, 4, 8, 16))
_BIT = ("in", (0, 1))
_RATE = ("num", 1e-9)


def _int(lo, hi):
    return ("int", lo, hi)


def _dict(fields, required=()):
    return ("dict", fields, tuple(required))


_DIRECT = _dict({"TM": _int(1, 64), "TN": _int(1, 256), "VW": _VW}, ("TM", "TN", "VW"))
_TILED = _dict({k: _int(1, 256) for k in ("TSM", "TSN", "TSK", "WPTM", "WPTN")},
               ("TSM", "TSN", "TSK", "WPTM", "WPTN"))
_ROWDOT = _dict({"VW": _VW, "NB": _int(1, 64), "LX": _int(1, 1024)})
_ROWAXPY = _dict({"VW": _VW, "LX": _int(1, 1024), "KS": _int(1, 1024), "KB": _int(1, _BIG)})
_PACKED = _dict({"MR": _int(1, 64), "NR": _int(1, 256), "VW": _VW, "ORDER": _BIT,
                 "WALK_M_FROM_K": _int(0, _BIG), "B_IN_PLACE_MIN_N": _int(0, _BIG),
                 "B_IN_PLACE_MAX_K": _int(0, _BIG), "B_IN_PLACE_MAX_M": _int(0, _BIG),
                 "A_IN_PLACE": _BIT, "KB": _int(0, 65536), "KC": _int(0, 65536),
                 "BM": _int(1, 1024), "BN": _int(1, 1024), "SLAB_MIN_K": _int(0, _BIG),
                 "SLAB_MIN_MN": _int(0, _BIG), "SLAB_MIN_N": _int(0, _BIG), "SLAB_WALK_N": _BIT,
                 "SLAB_MIN_M": _int(0, _BIG), "SLAB_B_IN_PLACE": _BIT,
                 "SLAB_B_IN_PLACE_MAX_M": _int(0, _BIG),
                 "PF": _int(0, 65536),
                 "PACK_LX": _int(1, 1024), "NT_PACK_MIN_BYTES": _int(0, _BIG), "WIDE_MAX_M": _int(0, _BIG),
                 "WIDE_MIN_N": _int(0, _BIG), "TPI": _int(1, 64)}, ("MR", "NR", "VW"))
_XGEMM_CORE = ("MWG", "NWG", "KWG", "MDIMC", "NDIMC", "VWM", "VWN", "STRM", "STRN", "PADA",
               "PADB", "NBUF")
_XGEMM_SET = _dict({"MWG": _int(1, 1024), "NWG": _int(1, 1024), "KWG": _int(1, 256),
                    "MDIMC": _int(1, 1024), "NDIMC": _int(1, 1024), "VWM": _VW, "VWN": _VW,
                    "STRM": _BIT, "STRN": _BIT, "PADA": _int(0, 64), "PADB": _int(0, 64),
                    "NBUF": ("in", (1, 2)), "GROUP_M": _int(1, 1024), "max_m": _int(1, _BIG),
                    "groups_per_cu": _int(1, 1024), "rate": _RATE,
                    "layout_factors": _dict({k: _RATE for k in ("MN", "KK", "MK")})},
                   _XGEMM_CORE)
GEMM_ENTRY = _dict({
    "family": ("in", ("direct", "tiled", "packed", "xgemm")), "small": ("in", ("direct", "tiled")),
    "min_work": _int(0, _BIG), "min_dim": _int(0, _BIG), "min_m": _int(0, _BIG),
    "rowdot_max_m": _int(0, 1024), "rowdot_wg": _BIT, "rowaxpy_max_m": _int(0, 64),
    "rowaxpy_wg": _BIT, "rowaxpy": _ROWAXPY,
    "split_cost_us": ("num", 0.0), "bandwidth_gbs": _RATE, "arch": ("str",),
    "threads_per_cu": _int(1, 65536), "compute_units": _int(1, 65536), "split_k": ("bool",),
    "direct": _DIRECT, "tiled": _TILED, "rowdot": _ROWDOT, "packed": _PACKED,
    "xgemm": ("list", _XGEMM_SET), "cx_sets": ("list", _XGEMM_SET),
    "cx_conv": ("list", _XGEMM_SET), "cx_wgrad": ("list", _XGEMM_SET)})
# family -> its database's kernels
FAMILIES = {"gemm": ("gemm_float32", "gemm_float64", "gemm_float16", "gemm_bfloat16")}
KERNELS = dict.fromkeys(FAMILIES["gemm"], GEMM_ENTRY)
# kernels whose lookups start from another's merged entry: products of 16-bit tensors sum in
# float32 and take gemm_float32's parameters wherever they have no entry of their own
BASE_KERNEL = {"gemm_float16": "gemm_float32", "gemm_bfloat16": "gemm_float32"}


def _scalar_ok(value, spec):
    kind = spec[0]
    if kind == "bool":
        return type(value) is bool
    if kind == "int":
        return type(value) is int and spec[1] <= value <= spec[2]
    if kind == "num":
        return type(value) in (int, float) and math.isfinite(value) and value >= spec[1]
    if kind == "str":
        return type(value) is str and bool(value)
    return type(value) in (int, str) and value in spec[1]  # "in"


def _describe(spec):
    kind = spec[0]
    if kind == "int":
        return f"an integer in [{spec[1]}, {spec[2]}]"
    if kind == "num":
        return f"a finite number >= {spec[1]}"
    if kind == "str":
        return "a non-empty string"
    return f"one of {list(spec[1])}" if kind == "in" else "true or false"


def check_value(value, spec, where):
    """Raise ValueError naming `where` unless value fits spec (see GEMM_ENTRY)."""
    kind = spec[0]
    if kind == "dict":
        _check_fields(value, spec[1], spec[2], where)
    elif kind == "list":
        if not isinstance(value, list) or not value:
            raise ValueError(f"{where}: expected a non-empty list, got {value!r:.80}")
        for i, item in enumerate(value):
            check_value(item, spec[1], f"{where}[{i}]")
    elif not _scalar_ok(value, spec):
        raise ValueError(f"{where}: {value!r:.80} is not {_describe(spec)}")


def _check_fields(value, fields, required, where):
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected an object, got {type(value).__name__}")
    for key, item in value.items():
        if key not in fields:
            raise ValueError(f"{where}: unknown key {key!r:.60}")
        check_value(item, fields[key], f"{where}.{key}")
    missing = [k for k in required if k not in value]
    if missing:
        raise ValueError(f"{where}: missing {', '.join(missing)}")


def _check_levels(value, keys, where):
    """value is an object whose keys are among `keys` (any keys when None)."""
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected an object, got {type(value).__name__}")
    unknown = [k for k in value if keys is not None and k not in keys]
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r:.60}")


def validate_database(data, family="gemm"):
    """Raise ValueError unless `data` is a valid shipped database of `family` (kernel ->
    default / vendors -> default / devices, each entry checked against its kernel's schema)."""
    _check_levels(data, FAMILIES[family], family)
    for kernel, table in data.items():
        spec = KERNELS[kernel]
        _check_levels(table, ("default", "vendors"), kernel)
        check_value(table.get("default", {}), spec, f"{kernel}.default")
        _check_levels(table.get("vendors", {}), None, f"{kernel}.vendors")
        for vendor, level in table.get("vendors", {}).items():
            where = f"{kernel}.vendors.{vendor}"
            _check_levels(level, ("default", "devices"), where)
            check_value(level.get("default", {}), spec, f"{where}.default")
            devices = level.get("devices", {})
            _check_levels(devices, None, f"{where}.devices")
            for name, entry in devices.items():
                check_value(entry, spec, f"{where}.devices.{name}")


def validate_user(data):
    """Raise ValueError unless `data` is a valid per-user file: kernel -> entry."""
    _check_levels(data, KERNELS, "tuning cache")
    for kernel, entry in data.items():
        check_value(entry, KERNELS[kernel], kernel)


# ---- the database -----------------------------------------------------------------------------

def user_cache_path(device):
    """The tuner's file for one device: <cache root>/tuning/<device>-<driver>-<platform>.json."""
    return Path(cache_root()) / "tuning" / f"{device_key(device)}.json"


def _user_entries(device):
    """The device's per-user file, validated ({} when missing, refused or set aside)."""
    if private_dirs(cache_root(), "tuning") is None:
        return {}
    return read_json(user_cache_path(device), validate_user)


def database(family):
    """The shipped database of a kernel family (cltensor/tuning/<family>.json), read once."""
    if family not in FAMILIES:
        raise ValueError(f"tune: unknown kernel family {family!r} (known: {', '.join(FAMILIES)})")
    if family not in _db_files:
        path = DB_DIR / f"{family}.json"
        try:
            data = json.loads(path.read_text())
            validate_database(data, family)
        except (OSError, ValueError) as e:
            raise RuntimeError(f"tune: the shipped database {path} is unusable: {e}") from None
        _db_files[family] = data
    return _db_files[family]


_DRIVER_TAG = re.compile(r"\s*\[driver ([^\]]*)\]\s*$")


def _key_rank(key, desc):
    """How well a database device key fits a Description, or None when it does not. A key is
    "[platform / ]device[ [driver D]]": the device part (and the platform part) contained in
    the device's (platform's) name, both normalized; a driver tag matches drivers of the same
    major version. Longer names rank first, then a driver tag, the nearest version at or
    below the device's before the nearest above."""
    m = _DRIVER_TAG.search(key)
    names = (key[:m.start()] if m else key).split(" / ", 1)
    dev_part, plat_part = normalize_name(names[-1]), normalize_name(names[0] if names[1:] else "")
    if dev_part not in normalize_name(desc.name) or plat_part not in normalize_name(desc.platform):
        return None
    if not m:
        return (len(dev_part) + len(plat_part), False, (False, ()))
    tagged, have = _version(m.group(1)), _version(desc.driver)
    if not tagged or not have or tagged[0] != have[0]:
        return None
    below = tagged <= have
    return (len(dev_part) + len(plat_part), True,
            (below, tagged if below else tuple(-n for n in tagged)))


def _device_entry(devices, desc):
    """The entry of the best-ranked key (_key_rank) among the vendor's devices; else, for a
    device no key names, the entry of a sibling of the same GPU architecture (its "arch": an
    H100 takes the H200's sm_90 parameters, the same SMs); else {}."""
    ranked = [(r, k) for k in devices if (r := _key_rank(k, desc)) is not None]
    if ranked:
        return devices[max(ranked)[1]]
    siblings = sorted(k for k, e in devices.items() if desc.arch and e.get("arch") == desc.arch)
    return devices[siblings[0]] if siblings else {}


def _fits_kind(entry, desc):
    """False for a vendor default whose family is the other device kind's (a PoCL GPU does
    not take PoCL's CPU default)."""
    family = entry.get("family")
    return family not in ("packed", "xgemm") or (family == "packed") == desc.is_cpu


def derived_defaults(kernel, desc):
    """The entry a Description alone implies for a kernel of the database (cltensor/defaults.py)."""
    if kernel in ("gemm_float32", "gemm_float64"):
        return defaults.gemm_defaults(desc, 4 if kernel == "gemm_float32" else 8)
    return {}


def lookup(family, kernel, device):
    """The merged parameters of `kernel` (a key of `family`'s database) on `device`.

    Example:
        >>> tune.lookup("gemm", "gemm_float32", cltensor.default_device())["family"]
        'packed'
    """
    # NOTE: keyed by the cache root (the environment may move it), not the full path, which
    # costs more to build than the rest of a cached lookup
    key = (family, kernel, device.index, cache_root())
    if key not in _merged:
        merged = {}
        for level in _levels(family, kernel, device):
            merged.update(level)
        _merged[key] = merged
    return dict(_merged[key])


def _levels(family, kernel, device):
    """The entries a lookup merges, in order: its base kernel's (BASE_KERNEL), then its own
    shipped ones (_shipped_levels) and the user's ({} where absent)."""
    return (*_base_levels(family, kernel, device), *_own_levels(family, kernel, device))


def _base_levels(family, kernel, device):
    base = BASE_KERNEL.get(kernel)
    return _levels(family, base, device) if base else ()


def _own_levels(family, kernel, device):
    return (*_shipped_levels(family, kernel, device.description()),
            _user_entries(device).get(kernel, {}))


def _shipped_levels(family, kernel, desc):
    """The global default, the defaults the Description implies, the vendor's default (where
    it suits the device's kind) and the device's shipped entry ({} where absent)."""
    table = database(family).get(kernel, {})
    vendor = table.get("vendors", {}).get(vendor_key(desc.vendor, desc.platform), {})
    vendor_default = vendor.get("default", {})
    return (table.get("default", {}), derived_defaults(kernel, desc),
            vendor_default if _fits_kind(vendor_default, desc) else {},
            _device_entry(vendor.get("devices", {}), desc))


def database_entry(family, kernel, desc):
    """The shipped database's merged entry for a device Description (lookup() less the user
    cache)."""
    base = BASE_KERNEL.get(kernel)
    merged = database_entry(family, base, desc) if base else {}
    for level in _shipped_levels(family, kernel, desc):
        merged.update(level)
    return merged


def is_tuned(family, kernel, device):
    """Whether the device has its own entry for `kernel`: shipped or in the user cache (a
    16-bit kernel's own, not the float32 entry it starts from)."""
    return any(_own_levels(family, kernel, device)[3:])


def store(kernel, device, params):
    """Write `params` for `kernel` into the device's user cache, merged under a file lock with
    the entries on disk (other kernels' entries stay), atomically. Raises ValueError for
    params outside the schema, OSError when the cache folder is refused or unwritable."""
    if kernel not in KERNELS:
        raise ValueError(f"tune.store: unknown kernel {kernel!r} (known: {', '.join(KERNELS)})")
    check_value(params, KERNELS[kernel], kernel)
    if private_dirs(cache_root(), "tuning") is None:
        raise PermissionError(f"tune.store: the cache folder under {cache_root()} is refused "
                              f"(see the warning); {kernel} not stored")
    path = user_cache_path(device)
    update_json(path, validate_user, lambda entries: entries.__setitem__(kernel, params))
    clear()
    return path


def current(family, kernel, device):
    """lookup()'s entry, shared (callers must not change it) and kept without reading the
    environment again until clear() (which store() and the tests that move the cache folder
    call). GEMM asks on every product, and the environment's variables cost microseconds."""
    key = (family, kernel, device.index)
    entry = _current.get(key)
    if entry is None:
        if first_use is not None:  # tuning on first use (tune/ installs it)
            first_use(family, kernel, device)
        entry = _current[key] = lookup(family, kernel, device)
    return entry


def clear():
    """Forget the merged lookups (and the database files) read so far."""
    _merged.clear()
    _current.clear()
    _db_files.clear()
