"""Run under mpirun: SGD with momentum on a small CNN with BatchNorm under DistributedDataParallel
must give the parameters of one process training on the whole batches (to 1e-6).
Usage: ddp_train.py STEPS MICRO [shm] (MICRO > 1: micro-batches accumulated under no_sync;
shm: every bucket, however small, summed through the host's shared memory)."""
import sys

import numpy as np

import cltensor as ct
import cltensor.distributed as dist
from cltensor.distributed import group as pg
from cltensor.distributed import shm
import cltensor.nn.functional as F
from cltensor import nn
from cltensor.nn.parallel import DistributedDataParallel

PER_RANK = 2  # samples per rank per micro-batch


def make_model(seed):
    ct.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.Flatten(), nn.Linear(4 * 5 * 5, 3))


def batches(steps, micro, world):
    rng = np.random.default_rng(7)
    n = PER_RANK * world
    return [[(rng.standard_normal((n, 3, 5, 5)).astype(np.float32), rng.integers(0, 3, n))
             for _ in range(micro)] for _ in range(steps)]


def shard(x, y, r):
    s = slice(r * PER_RANK, (r + 1) * PER_RANK)
    return ct.from_numpy(np.ascontiguousarray(x[s])), ct.from_numpy(y[s])


def train_ddp(data, rank, world):
    model = DistributedDataParallel(make_model(seed=rank), bucket_cap_mb=0.001)
    opt = ct.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    # buckets in flight when the first layer's gradient arrives (the last of backward)
    in_flight = []
    model.module[0].weight.register_hook(lambda g: in_flight.append(len(model._works)))
    for step in data:
        opt.zero_grad()
        for m, (x, y) in enumerate(step):
            ctx = model.no_sync() if m < len(step) - 1 else _nothing()
            with ctx:
                xr, yr = shard(x, y, rank)
                F.cross_entropy(model(xr), yr).backward()
        opt.step()
    synced = in_flight[len(data[0]) - 1::len(data[0])]
    assert synced and min(synced) >= 1, f"no bucket started during backward: {in_flight}"
    assert not any(n for i, n in enumerate(in_flight) if i % len(data[0]) != len(data[0]) - 1), \
        f"communication inside no_sync: {in_flight}"
    return model.module


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def train_reference(data, world):
    """One process: each rank's shard through the model with rank 0's buffers, the losses
    averaged; rank 0's shard last so its BatchNorm statistics are the ones kept. Also gives
    each rank's BatchNorm statistics after the last forward (rank 0's broadcast, then its own)."""
    model = make_model(seed=0)
    opt = ct.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    bn, after = model[1], {}
    for step in data:
        opt.zero_grad()
        for x, y in step:
            start = [b.detach().clone() for b in bn.buffers()]
            for r in reversed(range(world)):
                for b, s in zip(bn.buffers(), start):
                    b.data = s.detach().clone()
                xr, yr = shard(x, y, r)
                (F.cross_entropy(model(xr), yr) * (1.0 / world)).backward()
                after[r] = [b.numpy() for b in bn.buffers()]
        opt.step()
    return model, after


def main(steps, micro, through_shm):
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    data = batches(steps, micro, world)
    reducer, summed = pg.group().reducer, []
    if through_shm:
        run = reducer.all_reduce
        reducer.all_reduce = lambda host, *a: (summed.append(host.size), run(host, *a))[1]
    got = train_ddp(data, rank, world)
    if through_shm:  # every step's buckets: the parameters' gradients, once a step
        n = sum(p.numel() for p in got.parameters())
        assert sum(summed) == steps * n, f"{sum(summed)} elements summed in shared memory"
    want, buffers_after = train_reference(data, world)
    worst = 0.0
    for (name, p), q in zip(got.named_parameters(), want.parameters()):
        a, b = p.detach().numpy(), q.detach().numpy()
        err = float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))
        assert err <= 1e-6, f"rank {rank}: parameter {name} differs by {err:g}"
        worst = max(worst, err)
    for b, c in zip(got[1].buffers(), buffers_after[rank]):
        np.testing.assert_allclose(b.numpy(), c, rtol=1e-6, atol=1e-6,
                                   err_msg=f"rank {rank}: BatchNorm buffer")
    dist.destroy_process_group()
    print(f"rank {rank}: ddp matches, worst relative difference {worst:g}", flush=True)


if __name__ == "__main__":
    through_shm = sys.argv[3:] == ["shm"]
    if through_shm:
        shm.MIN_BYTES = 0
    main(int(sys.argv[1]), int(sys.argv[2]), through_shm)
