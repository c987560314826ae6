"""A convolution pass's launches replayed: the first pass of a key (conv/function.py: the
pass, its problem, the algorithms chosen, every tensor's layout, the flags and the GEMM's
tuning entry) is recorded; the next with that key enqueues the same launches with its own
tensors and fresh outputs and scratch, skipping the host work that decided them (the
algorithms' views, products and launch arguments).

A weight transform the pass reads (Winograd's filters, implicit GEMM's packed panels: cached
per weight version, common.per_weight) is looked up again by each replay for its own weight
and made first where the cache lacks it (an optimizer changed the weight), so that the
replay reads it as the pass would. Passes that write a tensor they did not allocate, other
than the pass's own tensors (a given output: the replay bumps its version as the pass did),
or transform a tensor that is not one of them, are not replayed (program.Replay.make), nor
any pass in benchmark mode (the choices are timed), inside a graph capture (its conditional
weight transforms) or by a plug-in's algorithm, unless it declares REPLAYABLE (its passes are
their launches; keyed by its replay_anchor() too: the NVIDIA plug-in's implicit GEMM), as
its Python may do more than its launches show.
"""
from .. import backends, caches, program
from ..device import capturing
from ..ops import gemm
from ..ops.gemm.engine import tensor_layouts
from ..program import Replay, remember
from ..tensor import ClTensor
from . import common

# key -> (GEMM tuning entry, _Plan or None: the pass cannot be replayed)
_plans = caches.register("conv.plans", {})


class _Plan:
    """A recorded pass: its Replay and the layouts of the tensors it returns (None for an
    absent one), each over the Replay's scratch output it stands in."""

    def __init__(self, replay, results, bumps, derived):
        self.replay = replay
        self.results = results  # (scratch index, shape, strides, offset, dtype) or None
        self.bumps = bumps  # (index in the pass's tensors, versions its recording bumped)
        self.derived = derived  # _derived_roles: how to look up each weight transform

    @classmethod
    def make(cls, launches, bufs, results, tensors, versions):
        """versions: the tensors' storages' versions before the recorded pass."""
        outputs = [r.storage for r in results if r is not None]
        writes = [t.storage for t in tensors if t is not None]
        found = _derived_roles(launches.derived, tensors)
        if found is None:
            return None
        derived, values, since = found
        roles = dict(enumerate([*bufs, *[v.storage.buf for v in values]]))
        replay = Replay.make(launches, roles, outputs, writes,
                             {len(bufs) + j: at for j, at in enumerate(since)})
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
                                 for r in results), tuple(bumps), derived)

    def __call__(self, device, bufs, tensors):
        keep = self.replay.outputs
        if self.derived:
            values = []
            for (kind, i), view, key, make in self.derived:
                source = tensors[i] if kind == "tensor" else values[i]
                w = ClTensor(source.storage, *view)
                values.append(common.per_weight(w, key, make))
            bufs = [*bufs, *[v.storage.buf for v in values]]
        storages = dict(zip(keep, self.replay(device, bufs, keep)))  # bufs[role]: roles index it
        for i, n in self.bumps:
            tensors[i].storage.version += n
        return tuple([None if r is None else ClTensor(storages[r[0]], *r[1:])
                      for r in self.results])


def _derived_roles(derived, tensors):
    """((source, (shape, strides, offset, dtype), key, make) per weight transform the pass
    read, its source ("tensor", i): the view of tensors[i]'s storage, or ("derived", j): of
    the j-th transform's; their values; the index of the launch each was first read before),
    or None where a source is neither."""
    sources = {id(t.storage): ("tensor", i) for i, t in reversed(list(enumerate(tensors)))
               if t is not None}
    out, values, since = [], [], []
    for storage, view, key, make, value, at in derived:
        source = sources.get(id(storage))
        if source is None:
            return None
        if id(value.storage) not in sources:  # NOTE: a transform read twice is looked up once
            sources[id(value.storage)] = ("derived", len(out))
            out.append((source, view, key, make))
            values.append(value)
            since.append(at)
    return tuple(out), values, since


def run(key, tensors, dtype, decide, extra=(), replay=True, anchor=None):
    """decide() (a tuple of new tensors or Nones, the pass's results), or its launches for the
    last pass with this key, the same layouts of `tensors` and the same GEMM tuning entry (of
    the tensors' dtype, gemm.entry_for) replayed (see the module);
    `extra`: other buffers the pass reads, passed in their places as the tensors are; replay
    False: decide() always; anchor: an object the recorded launches were chosen from (a
    plug-in's parameter sets), which must be the same object for a replay."""
    if not replay or backends.benchmark or capturing.graph is not None:
        return decide()
    layouts, bufs = tensor_layouts(tensors)
    bufs += extra
    device = tensors[0].device
    full = (key, layouts, device, backends.allow_tf32, backends.conv_precision,
            backends.conv_workspace_limit, gemm.FORCE_FAMILY, gemm.generation, id(anchor))
    entry = gemm.entry_for(device, dtype)
    hit = _plans.get(full)
    if hit is not None and hit[0] is entry and hit[2] is anchor:
        return decide() if hit[1] is None else hit[1](device, bufs, tensors)
    versions = [None if t is None else t.storage.version for t in tensors]
    with program.record() as launches:
        results = decide()
    remember(_plans, full, (entry, _Plan.make(launches, bufs, results, tensors, versions),
                            anchor))
    return results


def clear():
    _plans.clear()
