"""DataLoader worker processes. A worker never touches the OpenCL device: it fetches samples
and collates them on the host (numpy); the main process copies the batch to the device. What
crosses a process boundary is pickled here with a guard that rejects ClTensors, so a dataset
or a batch holding device data fails with a clear error instead of a hang."""
import functools
import io
import multiprocessing
import pickle
import queue
import random
import traceback
from dataclasses import dataclass

import numpy as np

from ... import random as ct_random
from ...tensor import ClTensor
from . import collate as _collate
from .dataset import batch_gatherer

__all__ = ["WorkerInfo", "get_worker_info"]

POLL_S = 0.1  # how often a waiting worker checks that its parent is alive
_worker_info = None


@dataclass(frozen=True)
class WorkerInfo:
    """What get_worker_info() returns inside a worker process."""
    id: int
    num_workers: int
    seed: int
    dataset: object


def get_worker_info():
    """Inside a DataLoader worker: its WorkerInfo (id, num_workers, seed, dataset: this
    worker's copy). In the main process: None.

    Example (sharding an IterableDataset):
        info = get_worker_info()
        rows = range(start, end) if info is None else range(start + info.id, end, info.num_workers)
    """
    return _worker_info


class DeviceDataError(TypeError):
    """Device tensors met on their way to or from a worker process."""


class _HostPickler(pickle.Pickler):
    def reducer_override(self, obj):
        if isinstance(obj, ClTensor):
            raise DeviceDataError("found a ClTensor")
        return NotImplemented


def host_dumps(obj, what):
    """pickle.dumps(obj), with a clear error for device tensors or unpicklable parts."""
    buf = io.BytesIO()
    try:
        _HostPickler(buf, pickle.HIGHEST_PROTOCOL).dump(obj)
    except DeviceDataError:
        raise DeviceDataError(
            f"DataLoader: {what} holds device tensors (ClTensor), which worker processes cannot "
            f"use (an OpenCL context does not cross processes); use num_workers=0, or keep the "
            f"data on the host (numpy arrays) and let the DataLoader copy each batch") from None
    except (pickle.PicklingError, TypeError, AttributeError) as e:
        raise TypeError(f"DataLoader: {what} must be picklable to reach worker processes "
                        f"(they are not forked: define classes and functions at module top "
                        f"level, no lambdas): {e}") from e
    return buf.getvalue()


class ExceptionWrapper:
    """An exception raised in a worker, with its traceback text, to re-raise in the main
    process."""

    def __init__(self, exc, worker_id):
        self.exc_type = type(exc)
        try:
            pickle.dumps(self.exc_type)
        except Exception:  # noqa: BLE001  (a class the main process could not unpickle)
            self.exc_type = RuntimeError
        self.text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self.worker_id = worker_id

    def reraise(self):
        msg = (f"Caught {self.exc_type.__name__} in DataLoader worker process "
               f"{self.worker_id}.\nOriginal {self.text}")
        try:
            exc = self.exc_type(msg)
        except Exception:
            exc = RuntimeError(msg)
        raise exc


def _seed_worker(seed, worker_id):
    """torch's per-worker seeding: Python's, numpy's and cltensor's RNGs from base_seed + id."""
    random.seed(seed)
    ct_random.manual_seed(seed)
    np.random.seed(np.random.SeedSequence([worker_id, seed]).generate_state(4))


class Fetcher:
    """Turns a task (a list of indices, an index, or None for a stream) into a batch: the
    samples fetched, then passed through collate_fn. Used in the main process and in workers."""

    def __init__(self, dataset, iterable, auto_collation, batch_size, drop_last, collate_fn,
                 gather=None):
        self.dataset, self.auto_collation, self.collate_fn = dataset, auto_collation, collate_fn
        self.batch_size, self.drop_last = batch_size, drop_last
        self.stream = iter(dataset) if iterable else None
        # gather(indices): the collated batch in one step, or None (then sample by sample)
        self.gather = gather if auto_collation and not iterable else None

    def _samples(self, index):
        if self.stream is None:
            ds = self.dataset
            if not self.auto_collation:
                return ds[index]
            many = getattr(ds, "__getitems__", None)   # torch's protocol for batched fetching
            return many(index) if many else [ds[i] for i in index]
        if not self.auto_collation:
            return next(self.stream)
        batch = [x for _, x in zip(range(self.batch_size), self.stream)]
        if not batch or (self.drop_last and len(batch) < self.batch_size):
            raise StopIteration
        return batch

    def fetch(self, index):
        batch = None if self.gather is None else self.gather(index)
        return self.collate_fn(self._samples(index)) if batch is None else batch


def _host_fetcher(spec):
    """A worker's Fetcher: default_collate and default_convert in their host forms."""
    collate, gather = spec["collate"], None
    if collate == "default_collate":
        collate = functools.partial(_collate.collate, host=True)
        gather = batch_gatherer(spec["dataset"], host=True)
    elif collate == "default_convert":
        collate = functools.partial(_collate.convert, host=True)
    return Fetcher(spec["dataset"], spec["iterable"], spec["auto_collation"],
                   spec["batch_size"], spec["drop_last"], collate, gather)


def _answer(fetcher, task, worker_id, init_error):
    """(kind, payload) for one task: ("ok", pickled batch), ("stop", None) or ("error", ...)."""
    if init_error is not None:
        return "error", init_error
    try:
        return "ok", host_dumps(fetcher.fetch(task), "a batch from collate_fn")
    except StopIteration:
        return "stop", None
    except Exception as e:  # noqa: BLE001  (any error in user code goes to the main process)
        return "error", ExceptionWrapper(e, worker_id)


def worker_loop(spec_bytes, index_queue, result_queue, done_event, worker_id, num_workers,
                seed):
    """A worker's main: answer (task id, indices) from index_queue until None or done_event."""
    global _worker_info
    parent = multiprocessing.parent_process()
    result_queue.cancel_join_thread()   # exit at once even if the main process stopped reading
    spec = pickle.loads(spec_bytes)
    _seed_worker(seed, worker_id)
    _worker_info = WorkerInfo(worker_id, num_workers, seed, spec["dataset"])
    init_error, fetcher = None, None
    try:
        if spec["worker_init_fn"] is not None:
            spec["worker_init_fn"](worker_id)
        fetcher = _host_fetcher(spec)
    except Exception as e:  # noqa: BLE001
        init_error = ExceptionWrapper(e, worker_id)
    while not done_event.is_set() and parent.is_alive():
        try:
            task = index_queue.get(timeout=POLL_S)
        except queue.Empty:
            continue
        if task is None:
            break
        task_id, indices = task
        if task_id == "resume":
            fetcher = _host_fetcher(spec) if init_error is None else None
            result_queue.put(("resume", worker_id, None))
            continue
        result_queue.put((task_id, *_answer(fetcher, indices, worker_id, init_error)))
