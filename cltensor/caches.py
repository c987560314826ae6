"""One registry of cltensor's in-memory caches.

Every memoized program, kernel, launch plan, algorithm choice and per-weight transform is a
cache registered here, so that `cltensor.clear_cache()` empties all of them at once. A module
declares its caches where it defines them:

    _plans = caches.register("gemm.plans", {})        # any object with clear()
    @caches.lru_cache(maxsize=4096)                    # functools.lru_cache, registered
    def _shape_struct(sizes): ...

The on-disk caches (built binaries, the tuning database, benchmark-mode choices) are not
touched: they are checked before use instead (cltensor/program.py, tunedb.py, conv/dispatch.py).
"""
import functools

_registered = {}  # name -> (clear(), size())


def register(name, cache, size=None):
    """Register `cache` (anything with clear(); its len() is its size unless `size` is given)
    under a unique name; returns the cache itself."""
    if name in _registered:
        raise ValueError(f"caches.register: a cache named {name!r} is registered already")
    _registered[name] = (cache.clear, size or (lambda: len(cache)))
    return cache


def lru_cache(maxsize=128):
    """functools.lru_cache(maxsize), registered under the function's module and name."""
    def wrap(fn):
        cached = functools.lru_cache(maxsize=maxsize)(fn)
        name = f"{fn.__module__.removeprefix('cltensor.')}.{fn.__qualname__}"
        _registered[name] = (cached.cache_clear, lambda: cached.cache_info().currsize)
        return cached
    return wrap


def clear_cache():
    """Empty every registered in-memory cache (the on-disk ones stay)."""
    for clear, _ in list(_registered.values()):
        clear()


def sizes():
    """{name: entries held now} of every registered cache."""
    return {name: size() for name, (_, size) in sorted(_registered.items())}
