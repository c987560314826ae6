"""The DataLoader's iterator over worker processes: tasks (batches of indices) go round-robin
to the workers, answers come back on one queue and are delivered in task order."""
import itertools
import pickle
import queue
import time

from . import collate as _collate
from . import worker as _worker
from .sampler import draw_seed

SHUTDOWN_JOIN_S = 1.0  # how long a stopping worker may take before it is terminated


def _spec(loader):
    """What a worker needs, pickled (with the guard against device tensors)."""
    collate = loader.collate_fn
    if collate is _collate.default_collate:
        collate = "default_collate"
    elif collate is _collate.default_convert:
        collate = "default_convert"
    spec = {"dataset": loader.dataset, "iterable": loader._iterable,
            "auto_collation": loader._auto_collation, "batch_size": loader.batch_size,
            "drop_last": loader.drop_last, "collate": collate,
            "worker_init_fn": loader.worker_init_fn}
    return _worker.host_dumps(spec, "the dataset (or collate_fn, worker_init_fn)")


def holds_device_tensors(loader):
    """Whether what the workers would need (the dataset, collate_fn) holds device tensors."""
    try:
        _spec(loader)
    except _worker.DeviceDataError:
        return True
    except Exception:  # noqa: BLE001 (other pickling faults are reported by the workers' start)
        return False
    return False


class MultiProcessIter:
    """Batches loaded by `loader.num_workers` worker processes."""
    shut = True  # until the workers start: nothing to shut down

    def __init__(self, loader):
        # NOTE: no reference to the loader, whose persistent iterator this may be: without a
        # cycle, deleting the loader stops the workers at once
        self.index_sampler = loader._index_sampler
        self.length = len(loader) if _sized(loader) else None
        self.timeout, self.persistent = loader.timeout, loader.persistent_workers
        self.prefetch = loader.prefetch_factor
        self.num_workers = n = loader.num_workers
        self.to_device = loader.collate_fn in (_collate.default_collate, _collate.default_convert)
        spec_bytes = _spec(loader)
        ctx = loader.multiprocessing_context
        base_seed = draw_seed(loader.generator) >> 1
        self.results, self.done = ctx.Queue(), ctx.Event()
        self.index_queues = [ctx.Queue() for _ in range(n)]
        self.workers = [ctx.Process(target=_worker.worker_loop, daemon=True,
                                    args=(spec_bytes, self.index_queues[w], self.results,
                                          self.done, w, n, base_seed + w)) for w in range(n)]
        for w in self.workers:
            w.start()
        self.shut = False
        self._start_epoch()

    def _start_epoch(self):
        self.indices = iter(self.index_sampler)
        self.send_idx = self.rcvd_idx = 0
        self.owner, self.buffer = {}, {}
        self.active = [True] * self.num_workers
        self.next_worker = itertools.cycle(range(self.num_workers))
        for _ in range(self.prefetch * self.num_workers):
            self._put_task()

    def reset(self):
        """A new epoch on the same (persistent) workers."""
        for q in self.index_queues:
            q.put(("resume", None))
        acks = 0
        while acks < self.num_workers:
            acks += self._get()[0] == "resume"
        self._start_epoch()

    def __iter__(self):
        return self

    def __len__(self):
        if self.length is None:
            raise TypeError("this DataLoader's dataset has no len()")
        return self.length

    def _put_task(self):
        """Send the next batch of indices to the next worker still running."""
        for _ in range(self.num_workers):
            w = next(self.next_worker)
            if self.active[w]:
                break
        else:
            return
        try:
            indices = next(self.indices)
        except StopIteration:
            return
        self.index_queues[w].put((self.send_idx, indices))
        self.owner[self.send_idx] = w
        self.send_idx += 1

    def _get(self):
        """One answer (task id, kind, payload), raising on timeout or a dead worker."""
        timeout = self.timeout
        start = time.monotonic()
        while True:
            try:
                return self.results.get(timeout=min(timeout or _worker.POLL_S, _worker.POLL_S))
            except queue.Empty:
                pass
            dead = [w for w in self.workers if not w.is_alive()]
            if dead:
                self._shutdown()
                codes = ", ".join(f"pid {w.pid} exit code {w.exitcode}" for w in dead)
                raise RuntimeError(f"DataLoader worker(s) exited unexpectedly ({codes})")
            if timeout and time.monotonic() - start > timeout:
                self._shutdown()
                raise RuntimeError(f"DataLoader timed out after {timeout} seconds")

    def _skip_lost(self):
        """Pass over tasks that a finished stream's worker will never answer."""
        while (self.rcvd_idx < self.send_idx and self.rcvd_idx not in self.buffer
               and not self.active[self.owner[self.rcvd_idx]]):
            del self.owner[self.rcvd_idx]
            self.rcvd_idx += 1

    def __next__(self):
        while True:
            self._skip_lost()
            if self.rcvd_idx >= self.send_idx:
                if not self.persistent:
                    self._shutdown()
                raise StopIteration
            if self.rcvd_idx in self.buffer:
                kind, payload = self.buffer.pop(self.rcvd_idx)
                del self.owner[self.rcvd_idx]
                self.rcvd_idx += 1
                if kind != "stop":
                    self._put_task()
                    return self._deliver(kind, payload)
                continue
            task_id, kind, payload = self._get()
            if task_id == "resume":
                continue
            if kind == "stop":
                self.active[self.owner[task_id]] = False
            self.buffer[task_id] = (kind, payload)

    def _deliver(self, kind, payload):
        if kind == "error":
            payload.reraise()
        data = pickle.loads(payload)
        return _collate.to_device(data) if self.to_device else data

    def _shutdown(self):
        if self.shut:
            return
        self.shut = True
        self.done.set()
        for q in self.index_queues:
            q.put(None)
        for w in self.workers:
            w.join(SHUTDOWN_JOIN_S)
            if w.is_alive():
                w.terminate()
                w.join()
        for q in (*self.index_queues, self.results):
            q.cancel_join_thread()
            q.close()

    def __del__(self):
        self._shutdown()


def _sized(loader):
    try:
        len(loader)
    except TypeError:
        return False
    return True
