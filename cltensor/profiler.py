"""cltensor.profile(): record the kernel launches of the calling thread with their OpenCL
profiling-event times. Every command goes to the device's one queue, which has profiling enabled
(device.py): a profiler only reads the events of its own thread's launches, so threads that do
not profile are left as they were (docs/threads.md)."""
import json
import threading
from collections import defaultdict

from . import device as device_mod


_profiling = 0  # profilers active in all threads
_count_lock = threading.Lock()


class _ThreadState(threading.local):
    active = ()  # the profilers active in this thread, outermost first


class Profile:
    """Records this thread's kernel launches while active; times come from the queue's
    profiling events.

    Example:
        with cltensor.profile() as prof:
            y = (x * 2).sum()
        prof.print()                    # table sorted by total time
        prof.export_chrome_trace("trace.json")
    """

    def __init__(self):
        self.events = []  # (kernel name, global size, local size, pyopencl event)

    def __enter__(self):
        global _profiling
        with _count_lock:
            _profiling += 1
        _state.active = _state.active + (self,)
        return self

    def __exit__(self, *exc):
        global _profiling
        _state.active = tuple(p for p in _state.active if p is not self)
        for ev in self.events:
            ev[3].wait()
        with _count_lock:
            _profiling -= 1
            last = _profiling == 0
        if last:  # no thread profiles: the devices go back to plain queues
            device_mod.stop_profiling()
        return False

    def records(self):
        """One dict per launch: name, global and local size, start and end in ns."""
        out = []
        for name, gsize, lsize, ev in self.events:
            ev.wait()
            out.append({"name": name, "global": gsize, "local": lsize,
                        "start_ns": ev.profile.start, "end_ns": ev.profile.end})
        return out

    def table(self):
        """Rows (name, calls, total ms, mean us) sorted by total time, longest first."""
        totals = defaultdict(lambda: [0, 0])
        for r in self.records():
            t = totals[r["name"]]
            t[0] += 1
            t[1] += r["end_ns"] - r["start_ns"]
        rows = [(n, c, ns / 1e6, ns / 1e3 / c) for n, (c, ns) in totals.items()]
        return sorted(rows, key=lambda r: -r[2])

    def total_ms(self, name=None):
        return sum(r[2] for r in self.table() if name is None or r[0] == name)

    def __str__(self):
        lines = [f"{'kernel':40s} {'calls':>6s} {'total ms':>10s} {'mean us':>10s}"]
        lines += [f"{n[:40]:40s} {c:6d} {t:10.3f} {m:10.1f}" for n, c, t, m in self.table()]
        return "\n".join(lines)

    def print(self):
        print(self)

    def export_chrome_trace(self, path):
        """Write the launches as a Chrome trace (chrome://tracing, Perfetto)."""
        recs = self.records()
        t0 = min((r["start_ns"] for r in recs), default=0)
        events = [{"name": r["name"], "ph": "X", "pid": 0, "tid": 0,
                   "ts": (r["start_ns"] - t0) / 1e3, "dur": (r["end_ns"] - r["start_ns"]) / 1e3,
                   "args": {"global": list(r["global"]),
                            "local": list(r["local"]) if r["local"] else None}}
                  for r in recs]
        with open(path, "w") as f:
            json.dump({"traceEvents": events}, f)


def profile():
    return Profile()


_state = _ThreadState()


def record(kernel, global_size, local_size, event):
    """Add a launch of the calling thread to its active profilers."""
    if _state.active:
        entry = (kernel.function_name, tuple(global_size), local_size and tuple(local_size), event)
        for p in _state.active:
            p.events.append(entry)
