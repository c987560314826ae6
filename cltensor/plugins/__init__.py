"""Plug-ins: device-specific kernels that cltensor loads at run time, beside its portable ones.

A plug-in is a `Plugin` that says which devices it serves (vendor, device name, extensions and
a probe kernel that must build there) and what it implements: GEMM (`gemm()`, asked first by
the GEMM engine for every product on a device it serves; it may decline) and convolution
algorithms (`conv_algorithms()`, offered to conv2d's dispatcher, benchmark mode and
cltensor.conv_algorithms() beside im2col, implicit_gemm, winograd and gemm_1x1).

Plug-ins come from three places, asked in this order: the built-ins (BUILTIN), the entry points
of the "cltensor.plugins" group of installed packages (both loaded once, on first use), and
`register_plugin()`. A plug-in that fails to load, or whose probe fails to build on a device, is
skipped with a PluginWarning and never breaks the portable path. See docs/plugins.md.

NOTE: cltensor.plugins (the attribute of the cltensor package) is the function plugins();
import this module's names with `from cltensor.plugins import Plugin, register_plugin`.
"""
import importlib
import importlib.metadata
import warnings
from types import SimpleNamespace

from .. import caches, program
from ..conv import dispatch as _dispatch
from ..ops import gemm as _gemm

ENTRY_POINT_GROUP = "cltensor.plugins"
BUILTIN = ["cltensor.plugins.nvidia:NvidiaTensorCores"]
PROBE_LOG_LINES = 3  # lines of a failed probe's build log that its warning quotes

_loaded = None     # the built-ins and entry points, in order, once loaded
_registered = []   # register_plugin()'s, in order
_for_device = caches.register("plugins.for_device", {})   # device -> the plug-ins that serve it
# device -> {algorithm name: algorithm} of those plug-ins
_conv_for_device = caches.register("plugins.conv_for_device", {})
# (plugin, device) -> "" when the plug-in serves the device, else why not
_why_not = caches.register("plugins.why_not", {})


class PluginWarning(RuntimeWarning):
    """A plug-in that could not be loaded or does not build on a device (and is skipped)."""


class Plugin:
    """Base class of plug-ins: set the class attributes, override gemm() and/or conv_algorithms().

    Attributes:
        name: unique, e.g. "nvidia_tf32".
        description: one line for `python -m cltensor`.
        vendors: case-insensitive substrings of the device's vendor or platform name; () = any.
        device_names: case-insensitive substrings of the device name; () = any.
        extensions: OpenCL extensions the device must list.
        probe_file: a file under cl_kernels/ that must build on the device (None: no probe).
        probe_defines: its -D options.

    Example:
        >>> class Mine(Plugin):
        ...     name, vendors, probe_file = "mine", ("acme",), "mine_probe.cl"
        ...     def gemm(self, p, alpha, beta, has_ci, row_bias, col_bias, relu):
        ...         return False  # decline: the portable engine runs the product
        >>> cltensor.register_plugin(Mine())
    """
    name = ""
    description = ""
    vendors = ()
    device_names = ()
    extensions = ()
    probe_file = None
    probe_defines = {}

    def serves(self, device):
        """True when the device matches and the probe builds there (memoized per device)."""
        return self.why_not(device) == ""

    def matches(self, device):
        """The vendor, device name and extension test alone (no build)."""
        return self.mismatch(device) == ""

    def mismatch(self, device):
        """Why the vendor, device name or extension test fails ("" when it passes)."""
        d = device.cl_device
        where = f"{d.vendor.strip()} / {device.platform_name}"
        if self.vendors and not _any_in(self.vendors, where):
            return f"vendor {where!r} is not {_or(self.vendors)}"
        if self.device_names and not _any_in(self.device_names, device.name):
            return f"device name {device.name!r} is not {_or(self.device_names)}"
        missing = [e for e in self.extensions if e not in d.extensions.split()]
        return f"the device lacks {', '.join(missing)}" if missing else ""

    def why_not(self, device):
        """"" when the plug-in serves the device, else why not (vendor, extension, probe);
        memoized per device. Never raises: a failure is a reason."""
        key = (self, device)
        if key not in _why_not:
            _why_not[key] = self._check(device)
        return _why_not[key]

    def gemm(self, p, alpha, beta, has_ci, row_bias, col_bias, relu):
        """Run one product, or decline it.

        Args:
            p: the cltensor.ops.gemm.Problem (device, dtype, m, n, k, batch shape and the
                strided operands a, b, ci, co) of c_out = act(alpha*a@b + beta*ci + biases).
            alpha, beta: the scalars; beta applies only when has_ci.
            has_ci: whether the addend ci is read (p.ci is c_out itself when it is not).
            row_bias, col_bias: None or 1-d (M,) / (N,) tensors.
            relu: apply max(x, 0) last.

        Returns:
            True when the product is enqueued, False to leave it to the portable engine.
        """
        return False

    def conv_algorithms(self):
        """{name: algorithm} of convolution algorithms; the interface is the one of the
        modules in cltensor/conv/ plus serves(device) and prefer(p, device, pass_)."""
        return {}

    def _check(self, device):
        try:
            if not self.matches(device):
                return self.mismatch(device) or "matches() declined the device"
            return self._probe(device)
        except Exception as e:  # NOTE: a plug-in's bug must not break the portable path
            _warn(f"cltensor plug-in {self.name!r} failed to check {device}: {e!r}; skipped")
            return f"the check raised {type(e).__name__}"

    def _probe(self, device):
        if self.probe_file is None:
            return ""
        try:
            program.build_program(device, self.probe_file, dict(self.probe_defines))
        except Exception as e:  # NOTE: a missing file or a driver error fails the probe too
            _warn(f"cltensor plug-in {self.name!r}: its probe {self.probe_file} failed to "
                  f"build on {device}; the plug-in is skipped there. Build log:\n"
                  f"{_log_head(getattr(e, 'log', str(e)))}")
            return f"its probe {self.probe_file} failed to build"
        return ""

    def __repr__(self):
        return f"<cltensor plug-in {self.name!r}>"


def _any_in(needles, text):
    return any(n.lower() in text.lower() for n in needles)


def _or(names):
    return " or ".join(repr(n) for n in names)


def _log_head(log):
    """The first lines of a build log that say something (not pyopencl's preamble)."""
    lines = [s for s in log.splitlines() if s.strip() and
             not s.startswith(("clBuildProgram failed", "Build on"))]
    return "\n".join(lines[:PROBE_LOG_LINES]) or log.strip()


def _warn(message):
    warnings.warn(message, PluginWarning, stacklevel=3)


# ---- the registry -----------------------------------------------------------------------------

def plugins():
    """Every plug-in: the built-ins, the "cltensor.plugins" entry points, the registered ones.

    Example:
        >>> [p.name for p in cltensor.plugins()]
        ['nvidia_tf32']
    """
    return _builtin_and_entry_points() + _registered


def plugins_for(device):
    """The plug-ins that serve a device, in the order of plugins() (memoized)."""
    found = _for_device.get(device)
    if found is None:
        found = _for_device[device] = [pl for pl in plugins() if pl.serves(device)]
    return found


def register_plugin(plugin):
    """Add a plug-in (an instance, or a Plugin subclass to instantiate); asked after the
    built-ins and entry points. Returns its argument, so it also decorates a class.

    Example:
        >>> from cltensor.plugins import Plugin
        >>> @cltensor.register_plugin
        ... class Mine(Plugin):
        ...     name = "mine"
    """
    instance = _instance(plugin)
    if not instance.name:
        raise ValueError(f"register_plugin: {plugin!r} has no name")
    if any(pl.name == instance.name for pl in plugins()):
        raise ValueError(f"register_plugin: a plug-in named {instance.name!r} is already "
                         f"registered (unregister_plugin({instance.name!r}) first)")
    _registered.append(instance)
    _changed()
    return plugin


def unregister_plugin(name):
    """Remove the plug-in called `name`, whichever way it came (a built-in too)."""
    for group in (_registered, _builtin_and_entry_points(own=True)):
        for pl in group:
            if pl.name == name:
                group.remove(pl)
                _changed()
                return
    known = ", ".join(pl.name for pl in plugins()) or "none"
    raise ValueError(f"unregister_plugin: no plug-in named {name!r} (registered: {known})")


def _instance(plugin):
    if isinstance(plugin, type) and issubclass(plugin, Plugin):
        return plugin()
    if isinstance(plugin, Plugin):
        return plugin
    raise TypeError(f"expected a cltensor.plugins.Plugin instance or subclass, got {plugin!r}")


def _changed():
    global generation
    generation += 1
    _gemm.generation += 1
    _for_device.clear()
    _conv_for_device.clear()


generation = 0  # counts the changes to the set of plug-ins (keys of replayed launches)


def _builtin_and_entry_points(own=False):
    """The built-ins and the entry points' plug-ins, loaded on the first call; `own` returns
    the stored list itself (for unregister_plugin) rather than a copy."""
    global _loaded
    if _loaded is None:
        _loaded = []
        sources = [(spec, spec, _load_spec) for spec in BUILTIN]
        sources += [(ep.name, ep.value, lambda s, ep=ep: ep.load()) for ep in _entry_points()]
        for label, spec, load in sources:
            _add_loaded(label, spec, load)
    return _loaded if own else list(_loaded)


def _entry_points():
    try:
        return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
    except Exception as e:
        _warn(f"cltensor: could not list the {ENTRY_POINT_GROUP!r} entry points: {e!r}")
        return []


def _load_spec(spec):
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


def _add_loaded(label, spec, load):
    """Load one built-in or entry point into _loaded; a failure warns and skips it."""
    try:
        instance = _instance(load(spec))
    except Exception as e:
        _warn(f"cltensor: plug-in {label!r} ({spec}) could not be loaded and is skipped: {e!r}")
        return
    if not instance.name or any(pl.name == instance.name for pl in _loaded):
        _warn(f"cltensor: plug-in {label!r} ({spec}) has an empty or duplicate name "
              f"{instance.name!r} and is skipped")
        return
    _loaded.append(instance)


# ---- convolution algorithms -------------------------------------------------------------------

def conv_algorithms_for(device):
    """{name: algorithm} of the plug-ins that serve a device, the algorithms whose own
    serves(device) is True (memoized). A name taken by a portable algorithm or an earlier
    plug-in is skipped with a warning."""
    found = _conv_for_device.get(device)
    if found is None:
        found = _conv_for_device[device] = _collect_conv(device)
    return found


def _collect_conv(device):
    found = {}
    for pl in plugins_for(device):
        for name, algo in pl.conv_algorithms().items():
            if name in _dispatch.ALGORITHMS or name in found or name == "auto":
                _warn(f"cltensor plug-in {pl.name!r}: conv algorithm name {name!r} is taken; "
                      f"skipped")
            elif algo.serves(device):
                found[name] = algo
    return found


def conv_algorithm_owner(name):
    """The plug-in that offers conv algorithm `name` (on any device), or None."""
    for pl in plugins():
        if name in pl.conv_algorithms():
            return pl
    return None


# the GEMM engine and conv2d's dispatcher ask the plug-ins that serve a device
_gemm.PROVIDERS.append(plugins_for)
_dispatch.PROVIDERS.append(SimpleNamespace(algorithms_for=conv_algorithms_for,
                                           owner_of=conv_algorithm_owner))
