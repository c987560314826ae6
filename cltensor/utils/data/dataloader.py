"""DataLoader: batches from a dataset, in the main process or in worker processes."""
import itertools
import math
import multiprocessing
import warnings

from . import collate as _collate
from .collate import default_collate, default_convert  # noqa: F401  (torch's names here)
from .dataset import IterableDataset, batch_gatherer
from .multiprocess import MultiProcessIter as _MultiProcessIter
from .multiprocess import holds_device_tensors
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler, draw_seed
from .worker import Fetcher

__all__ = ["DataLoader"]

# NOTE: fork is unsafe once OpenCL is initialised. A forkserver (its server imports the worker
# module but never OpenCL) starts workers in ~0.02 s once running, spawn in ~1 s each time.
DEFAULT_START_METHOD = ("forkserver" if "forkserver" in multiprocessing.get_all_start_methods()
                        else "spawn")
WORKER_MODULE = "cltensor.utils.data.worker"
_FIXED_AFTER_INIT = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
                     "persistent_workers")


class _InfiniteConstantSampler(Sampler):
    """The sampler of an IterableDataset: None forever (the dataset decides when to stop)."""

    def __iter__(self):
        return itertools.repeat(None)


def _check_options(dataset, batch_size, shuffle, sampler, batch_sampler, drop_last):
    """torch's errors for options that exclude each other."""
    if isinstance(dataset, IterableDataset):
        for name, value in (("shuffle", shuffle), ("sampler", sampler),
                            ("batch_sampler", batch_sampler)):
            if value not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified {name} "
                                 f"option, but got {name}={value}")
    if sampler is not None and shuffle:
        raise ValueError("sampler option is mutually exclusive with shuffle")
    if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None
                                      or drop_last):
        raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, "
                         "sampler, and drop_last")
    if batch_sampler is None and batch_size is None and drop_last:
        raise ValueError("batch_size=None option disables auto-batching and is mutually "
                         "exclusive with drop_last")


def _check_worker_options(num_workers, timeout, prefetch_factor, persistent_workers):
    if num_workers < 0:
        raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                         "disable multiprocessing.")
    if timeout < 0:
        raise ValueError("timeout option should be non-negative")
    if num_workers == 0 and prefetch_factor is not None:
        raise ValueError("prefetch_factor option could only be specified in multiprocessing. "
                         "Let num_workers > 0 to enable multiprocessing, otherwise set "
                         "prefetch_factor to None.")
    if prefetch_factor is not None and prefetch_factor < 1:
        raise ValueError(f"prefetch_factor option should be a positive int, got "
                         f"{prefetch_factor}")
    if persistent_workers and num_workers == 0:
        raise ValueError("persistent_workers option needs num_workers > 0")


def _mp_context(context):
    """The multiprocessing context for workers: forkserver (or spawn) by default; fork refused."""
    named = context is None or isinstance(context, str)
    if named:
        context = multiprocessing.get_context(context or DEFAULT_START_METHOD)
    method = context.get_start_method()
    if method == "fork":
        raise ValueError("DataLoader: the 'fork' start method is unsafe once OpenCL is "
                         "initialised; use 'forkserver' or 'spawn'")
    if named and method == "forkserver":
        # takes effect if this process has not started its forkserver yet
        context.set_forkserver_preload([WORKER_MODULE])
    return context


class DataLoader:
    """Batches of a dataset, as torch.utils.data.DataLoader.

    Args:
        dataset: a map-style Dataset (anything with __getitem__ and __len__) or an
            IterableDataset.
        batch_size: samples per batch (None: no batching, samples go through default_convert).
        shuffle: a new random order each epoch (from `generator`, else the global generator).
        sampler, batch_sampler: the order of indices, or of lists of indices.
        num_workers: worker processes (started by a forkserver or spawned, never forked; they
            fetch and collate on the host, the main process copies each batch to the
            device). 0: load in the main process.
        collate_fn: list of samples -> batch (default_collate). In workers it must return host
            data (numpy, numbers); default_collate does.
        pin_memory, pin_memory_device, in_order: accepted for torch compatibility; batches
            always arrive in order.
        drop_last: drop the last incomplete batch.
        timeout: seconds to wait for a worker's batch before raising (0: no limit; a dead
            worker raises either way).
        worker_init_fn: called with the worker id in each worker, after seeding.
        multiprocessing_context: 'forkserver' (the default where it exists), 'spawn' or a
            context; 'fork' is refused.
        generator: a cltensor.Generator for the shuffle order and the workers' base seed.
        prefetch_factor: batches each worker loads ahead (default 2 with workers).
        persistent_workers: keep the workers between epochs.

    Example:
        loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
        for xb, yb in loader: ...
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        _check_options(dataset, batch_size, shuffle, sampler, batch_sampler, drop_last)
        _check_worker_options(num_workers, timeout, prefetch_factor, persistent_workers)
        self._iterable = isinstance(dataset, IterableDataset)
        if sampler is None:
            if self._iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_sampler is not None:
            batch_size, drop_last = None, False
        elif batch_size is not None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.sampler, self.batch_sampler, self.generator = sampler, batch_sampler, generator
        self.num_workers, self.timeout, self.worker_init_fn = num_workers, timeout, worker_init_fn
        self.prefetch_factor = 2 if num_workers and prefetch_factor is None else prefetch_factor
        self.collate_fn = collate_fn or (_collate.default_collate if batch_sampler is not None
                                         else _collate.default_convert)
        self.pin_memory, self.pin_memory_device = pin_memory, pin_memory_device
        self.in_order = in_order
        self.multiprocessing_context = _mp_context(multiprocessing_context) if num_workers else None
        self.persistent_workers = persistent_workers
        self._iterator = None
        self._device_data = None  # whether the dataset holds device tensors, once asked
        self._initialized = True

    def __setattr__(self, name, value):
        if getattr(self, "_initialized", False) and name in _FIXED_AFTER_INIT:
            raise ValueError(f"{name} attribute should not be set after "
                             f"{type(self).__name__} is initialized")
        super().__setattr__(name, value)

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self):
        if self.num_workers == 0 or self._device_dataset():
            return _SingleProcessIter(self)
        if not self.persistent_workers:
            return _MultiProcessIter(self)
        if self._iterator is None or self._iterator.shut:   # first epoch, or after a failure
            self._iterator = _MultiProcessIter(self)
        else:
            self._iterator.reset()
        return self._iterator

    def _device_dataset(self):
        """True (with a warning, once per loader) when the dataset holds device tensors and
        no worker_init_fn is given: its batches are then made in this process, as with
        num_workers=0, since worker processes cannot use device tensors (a ported script's
        TensorDataset of torch.from_numpy arrays is one). With a worker_init_fn, which would
        be skipped, the workers' iterator raises instead."""
        if self.worker_init_fn is not None:
            return False
        if self._device_data is None:
            self._device_data = holds_device_tensors(self)
            if self._device_data:
                warnings.warn(
                    f"DataLoader: the dataset holds device tensors (ClTensor), which worker "
                    f"processes cannot use; its batches are made in this process instead of "
                    f"{self.num_workers} workers (set num_workers=0 to silence this, or keep "
                    f"the data as numpy arrays to load it in workers)", UserWarning, stacklevel=3)
        return self._device_data

    def __len__(self):
        if not self._iterable:
            return len(self._index_sampler)
        n = len(self.dataset)
        if self.batch_size is None:
            return n
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)


class _SingleProcessIter:
    """Loads each batch in the main process."""

    def __init__(self, loader):
        self.loader = loader
        self.base_seed = draw_seed(loader.generator)  # as torch: each epoch advances the RNG
        self.indices = iter(loader._index_sampler)
        gather = (batch_gatherer(loader.dataset, host=False)
                  if loader.collate_fn is _collate.default_collate else None)
        self.fetcher = Fetcher(loader.dataset, loader._iterable, loader._auto_collation,
                               loader.batch_size, loader.drop_last, loader.collate_fn, gather)

    def __iter__(self):
        return self

    def __len__(self):
        return len(self.loader)

    def __next__(self):
        return self.fetcher.fetch(next(self.indices))
