"""cltensor.clear_cache() empties every in-memory cache, and every cache is in its registry."""
import functools
import importlib
import pkgutil
import subprocess
import sys
import weakref

import numpy as np
import pytest

import cltensor as ct
import cltensor.nn.functional as F
from cltensor import caches
from conftest import ROOT, subprocess_env

# module-level mutable state that grows during work and is not a cache: (module, name) -> why
NOT_CACHES = {
    ("cltensor.autograd.engine", "RAW"): "the ops before autograd wrapped them, set at import",
    ("cltensor.composed.inplace", "IN_PLACE"): "in-place twins of composed ops, set at import",
}


def _modules():
    found = [ct]
    for info in pkgutil.walk_packages(ct.__path__, "cltensor."):
        if info.name.endswith("__main__") or info.name in ("cltensor.demo",):
            continue
        found.append(importlib.import_module(info.name))
    return found


def _containers():
    """{(module, name): object} of the module-level dicts, weak dicts and lru caches."""
    kinds = (dict, weakref.WeakKeyDictionary, weakref.WeakValueDictionary,
             functools._lru_cache_wrapper)
    return {(m.__name__, name): obj for m in _modules() for name, obj in vars(m).items()
            if isinstance(obj, kinds) and not name.startswith("__")}


def _size(obj):
    return obj.cache_info().currsize if hasattr(obj, "cache_info") else len(obj)


def _work(device, rng):
    """A little of everything that memoizes: elementwise, reductions, GEMM, every conv
    algorithm forward and backward, pooling, norms, softmax, random numbers, indexing."""
    x = ct.from_numpy(rng.standard_normal((2, 3, 10, 10)).astype(np.float32), device=device)
    w = ct.from_numpy(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), device=device)
    x.requires_grad_(True)
    w.requires_grad_(True)
    for algo in ("im2col", "implicit_gemm", "winograd", "winograd_4x4", "auto"):
        y = F.conv2d(x, w, padding=1, algo=algo)
        y = F.batch_norm(F.max_pool2d(y.relu(), 2), None, None, training=True)
        F.log_softmax(y.flatten(1), dim=1).sum().backward()
    a = ct.randn(5, 7, device=device)
    (a @ a.T).exp()[ct.tensor([0, 2], device=device)].mean().item()


def test_clear_cache_empties_every_registered_cache(device, rng):
    _work(device, rng)
    held = {name: n for name, n in caches.sizes().items() if n}
    assert len(held) > 20, held  # the work above filled the registry's caches
    ct.clear_cache()
    assert {name: n for name, n in caches.sizes().items() if n} == {}
    _work(device, rng)  # and everything works again from empty caches


def test_every_cache_that_fills_is_registered(device):
    """In a fresh process, module-level dicts and lru caches that grow during work are
    registered caches (or named in NOT_CACHES with the reason they are not)."""
    code = ("import sys; sys.path.insert(0, 'tests'); import numpy as np, test_caches as t; "
            f"print(t.unregistered_caches({device.index!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=subprocess_env(), cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def unregistered_caches(device_index):
    """The module-level containers that grew during _work and are not registered caches."""
    device = ct.get_device(device_index)
    before = {key: _size(obj) for key, obj in _containers().items()}
    _work(device, np.random.default_rng(0))
    # NOTE: after the work: modules imported on first use (plug-ins) register theirs then
    registered = {id(clear.__self__) for clear, _ in caches._registered.values()}
    grown = [key for key, obj in _containers().items()
             if _size(obj) > before.get(key, 0) and id(obj) not in registered
             and key not in NOT_CACHES]
    lru = [key for key, obj in _containers().items()
           if isinstance(obj, functools._lru_cache_wrapper) and id(obj) not in registered]
    return grown + lru


def test_register_refuses_a_second_cache_of_the_same_name():
    name = next(iter(caches.sizes()))
    with pytest.raises(ValueError, match=name):
        caches.register(name, {})
