"""A convolution pass's launches replayed: the first pass of a key (conv/function.py: the
pass, its problem, the algorithms chosen, every tensor's layout, the flags and the GEMM's
tuning entry) is recorded; the next with that key enqueues the same launches with its own
tensors and fresh outputs and scratch, skipping the host work that decided them (the
algorithms' views, products and launch arguments).

Passes that fill a per-weight cache (Winograd's and implicit GEMM's weight transforms) or write
a tensor they did not allocate, other than the pass's own tensors (a given output: the replay
bumps its version as the pass did), are not replayed (program.Replay.make), nor any pass in
benchmark mode (the choices are timed), inside a graph capture (its conditional weight
transforms) or by a plug-in's algorithm (its Python may do more than its launches show).
"""
from .. import backends, caches, program
from ..device import capturing
from ..ops import gemm
from ..ops.gemm.engine import tensor_layouts
from ..program import Replay, remember
from ..tensor import ClTensor

# key -> (GEMM tuning entry, _Plan or None: the pass cannot be replayed)
_plans = caches.register("conv.plans", {})


class _Plan:
    """A recorded pass: its Replay and the layouts of the tensors it returns (None for an
    absent one), each over the Replay's scratch output it stands in."""

    def __init__(self, replay, results, bumps):
        self.replay = replay
        self.results = results  # (scratch index, shape, strides, offset, dtype) or None
        self.bumps = bumps  # (index in the pass's tensors, versions its recording bumped)

    @classmethod
    def make(cls, launches, bufs, results, tensors, versions):
        """versions: the tensors' storages' versions before the recorded pass."""
        outputs = [r.storage for r in results if r is not None]
        writes = [t.storage for t in tensors if t is not None]
        replay = Replay.make(launches, dict(enumerate(bufs)), outputs, writes)
        if replay is None or None in replay.outputs:
            return None  # NOTE: a result that is not the pass's own new tensor (a view of an input)
        index = iter(replay.outputs)
        bumps, seen = [], set()
        for i, (t, v) in enumerate(zip(tensors, versions)):
            if t is None or id(t.storage) in seen:
                continue  # NOTE: a storage two tensors share is bumped once
            seen.add(id(t.storage))
            if t.storage.version != v:
                bumps.append((i, t.storage.version - v))
        return cls(replay, tuple(None if r is None else
                                 (next(index), r.shape, r.strides, r.offset, r.dtype)
                                 for r in results), tuple(bumps))

    def __call__(self, device, bufs, tensors):
        keep = self.replay.outputs
        storages = dict(zip(keep, self.replay(device, bufs, keep)))  # bufs[role]: roles index it
        for i, n in self.bumps:
            tensors[i].storage.version += n
        return tuple([None if r is None else ClTensor(storages[r[0]], *r[1:])
                      for r in self.results])


def run(key, tensors, dtype, decide, extra=(), replay=True):
    """decide() (a tuple of new tensors or Nones, the pass's results), or its launches for the
    last pass with this key, the same layouts of `tensors` and the same GEMM tuning entry (of
    the tensors' dtype, gemm.entry_for) replayed (see the module);
    `extra`: other buffers the pass reads, passed in their places as the tensors are; replay
    False: decide() always."""
    if not replay or backends.benchmark or capturing.graph is not None:
        return decide()
    layouts, bufs = tensor_layouts(tensors)
    bufs += extra
    device = tensors[0].device
    full = (key, layouts, device, backends.allow_tf32, backends.conv_precision,
            backends.conv_workspace_limit, gemm.FORCE_FAMILY, gemm.generation)
    entry = gemm.entry_for(device, dtype)
    hit = _plans.get(full)
    if hit is not None and hit[0] is entry:
        return decide() if hit[1] is None else hit[1](device, bufs, tensors)
    versions = [None if t is None else t.storage.version for t in tensors]
    with program.record() as launches:
        results = decide()
    remember(_plans, full, (entry, _Plan.make(launches, bufs, results, tensors, versions)))
    return results


def clear():
    _plans.clear()
