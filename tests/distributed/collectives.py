"""Run under mpirun: every collective against numpy, for every op, dtype and uneven sizes."""
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import cltensor as ct
import cltensor.distributed as dist
from cltensor.distributed import ReduceOp, shm
from cltensor.distributed import group as pg
from cltensor.utils.data import DistributedSampler

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_]
SIZES = [0, 1, 7, 130]
NP_OPS = {ReduceOp.SUM: np.sum, ReduceOp.PRODUCT: np.prod, ReduceOp.MIN: np.min,
          ReduceOp.MAX: np.max, ReduceOp.AVG: np.mean}


def data(rank, dtype, n):
    rng = np.random.default_rng([rank, n, DTYPES.index(dtype)])
    if dtype is np.bool_:
        return rng.random(n) < 0.5
    if np.dtype(dtype).kind == "i":
        return rng.integers(-3, 4, n).astype(dtype)
    return rng.uniform(0.5, 1.5, n).astype(dtype)


def reference(op, dtype, n, world):
    stack = np.stack([data(r, dtype, n).astype(np.float64) for r in range(world)])
    out = NP_OPS[op](stack, axis=0)
    return out.astype(bool) if dtype is np.bool_ else out


def ops_for(dtype):
    return [op for op in ReduceOp if op is not ReduceOp.AVG or np.dtype(dtype).kind == "f"]


def check(got, want, what):
    tol = 1e-6 if got.dtype == np.float32 else 1e-12
    if got.dtype.kind == "f":
        ok = np.allclose(got, want, rtol=tol, atol=tol)
    else:
        ok = np.array_equal(got, want.astype(got.dtype))
    assert ok, f"{what}: got {got} want {want}"


def test_reductions(rank, world):
    for dtype in DTYPES:
        for n in SIZES:
            for op in ops_for(dtype):
                want = reference(op, dtype, n, world)
                t = ct.from_numpy(data(rank, dtype, n))
                dist.all_reduce(t, op=op)
                check(t.numpy(), want, f"all_reduce {op} {dtype.__name__} n={n}")
                t = ct.from_numpy(data(rank, dtype, n))
                dist.reduce(t, dst=world - 1, op=op)
                mine = want if rank == world - 1 else data(rank, dtype, n)
                check(t.numpy(), mine, f"reduce {op} {dtype.__name__} n={n}")
                inp = ct.from_numpy(np.concatenate([data(rank, dtype, n)] * world)
                                    if n else data(rank, dtype, 0))
                out = ct.from_numpy(data(rank, dtype, n))
                dist.reduce_scatter_tensor(out, inp, op=op)
                check(out.numpy(), want, f"reduce_scatter_tensor {op} {dtype.__name__} n={n}")


def test_moves(rank, world):
    for dtype in DTYPES:
        for n in SIZES:
            t = ct.from_numpy(data(rank, dtype, n))
            work = dist.broadcast(t, src=world - 1, async_op=True)
            work.wait()
            check(t.numpy(), data(world - 1, dtype, n), f"broadcast {dtype.__name__} n={n}")
            outs = [ct.from_numpy(np.zeros(n + r, dtype)) for r in range(world)]  # uneven
            dist.all_gather(outs, ct.from_numpy(data(rank, dtype, n + rank)))
            for r in range(world):
                check(outs[r].numpy(), data(r, dtype, n + r), f"all_gather {dtype.__name__}")
            out = ct.from_numpy(np.zeros(n * world, dtype))
            dist.all_gather_into_tensor(out, ct.from_numpy(data(rank, dtype, n)))
            want = np.concatenate([data(r, dtype, n) for r in range(world)])
            check(out.numpy(), want, f"all_gather_into_tensor {dtype.__name__} n={n}")


def test_async_waited_out_of_order(rank, world):
    """Handles waited in reverse still pair each rank's collectives in issue order."""
    sizes = [3, 1000, 17]
    tensors = [ct.from_numpy(data(rank, np.float64, n)) for n in sizes]
    works = [dist.all_reduce(t, op=ReduceOp.SUM, async_op=True) for t in tensors]
    for w in reversed(works):
        assert w.wait() and w.is_completed()
    for t, n in zip(tensors, sizes):
        check(t.numpy(), reference(ReduceOp.SUM, np.float64, n, world), f"async all_reduce n={n}")


def test_point_to_point(rank, world):
    peer = (rank + 1) % world
    t = ct.from_numpy(data(rank, np.float32, 9))
    got = ct.from_numpy(np.zeros(9, np.float32))
    recv = dist.irecv(got, src=None)
    dist.send(t, dst=peer)
    recv.wait()
    sender = (rank - 1) % world
    assert recv.result == sender, f"recv from {recv.result}, expected {sender}"
    check(got.numpy(), data(sender, np.float32, 9), "send/recv")


def test_shared_memory_all_reduce(rank, world):
    """Float sums of a host's ranks through its shared memory (cltensor.distributed.shm): every
    size and dtype against numpy, with MIN_BYTES lowered so small and uneven sizes take it
    too; the default threshold's large arrays, the window grown, several threads, async works
    waited out of order; ranks passing different sizes get an error each, and go on."""
    g = pg.group()
    assert g.reducer is not None, "the ranks share one host: the shared window applies"
    taken = []
    run = g.reducer.all_reduce
    g.reducer.all_reduce = lambda *a: (taken.append(a[0].size), run(*a))[1]
    minimum, shm.MIN_BYTES = shm.MIN_BYTES, 0
    for dtype in (np.float32, np.float64):
        for n in SIZES + [3, 2 * world + 1]:
            for op in (ReduceOp.SUM, ReduceOp.AVG):
                t = ct.from_numpy(data(rank, dtype, n))
                dist.all_reduce(t, op=op)
                check(t.numpy(), reference(op, dtype, n, world), f"shm {op} {dtype.__name__} n={n}")
    shm.MIN_BYTES = minimum
    assert len(taken) == 2 * 2 * (len(SIZES) + 1), f"{len(taken)} through the window"
    sizes = [300_000, 1_500_000, 1_200_001]  # float32 1.2 MB, then 6 MB: the window grows
    default = g.reducer.threads, g.reducer.pool
    for threads in (1, 3):  # 3 threads a rank, whatever the machine's cores: uneven pieces
        g.reducer.threads = threads
        g.reducer.pool = ThreadPoolExecutor(threads) if threads > 1 else None
        tensors = [ct.from_numpy(data(rank, np.float32, n)) for n in sizes]
        works = [dist.all_reduce(t, async_op=True) for t in tensors]
        for w in reversed(works):
            w.wait()
        for t, n in zip(tensors, sizes):
            check(t.numpy(), reference(ReduceOp.SUM, np.float32, n, world),
                  f"shm async n={n}, {threads} threads")
        assert taken[-3:] == sizes, taken[-3:]
    g.reducer.threads, g.reducer.pool = default
    try:
        dist.all_reduce(ct.zeros(300_000 + rank, dtype="float32"))
    except dist.DistributedError as e:
        assert "the ranks passed different tensors" in str(e) and "300001" in str(e), str(e)
    else:
        raise AssertionError("ranks passing different sizes were not told")
    t = ct.from_numpy(data(rank, np.float64, 400_000))
    dist.all_reduce(t, op=ReduceOp.AVG)
    check(t.numpy(), reference(ReduceOp.AVG, np.float64, 400_000, world), "shm after an error")
    # one rank without room for a larger window: every rank takes MPI for that call
    capacity, room = g.reducer.capacity, g.reducer._room
    g.reducer._room = lambda nbytes: rank != world - 1 or nbytes <= capacity
    t = ct.from_numpy(data(rank, np.float32, 3_000_000))
    dist.all_reduce(t)
    check(t.numpy(), reference(ReduceOp.SUM, np.float32, 3_000_000, world), "MPI for no room")
    assert g.reducer.capacity == capacity, "the window grew without room"
    g.reducer._room = room
    g.reducer.all_reduce = run


def init_with_env_checks():
    """torchrun's variables are accepted when they agree with MPI, refused when not."""
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    os.environ.update(RANK=str(rank), WORLD_SIZE=os.environ["OMPI_COMM_WORLD_SIZE"])
    for bad in ({"world_size": 99}, {"rank": rank + 1}):
        try:
            dist.init_process_group("mpi", **bad)
        except ValueError as e:
            assert "disagrees with the MPI launcher" in str(e), str(e)
        else:
            raise AssertionError(f"init_process_group accepted {bad}")
    dist.init_process_group("mpi", init_method="env://")


def test_bad_input(rank, world):
    t = ct.from_numpy(np.zeros((3, 4), np.float32))
    i = ct.from_numpy(np.zeros(4, np.int32))
    cases = [(lambda: dist.all_reduce(t.t()), ValueError, "contiguous"),
             (lambda: dist.all_reduce(t, op="sum"), ValueError, "ReduceOp"),
             (lambda: dist.all_reduce(i, op=ReduceOp.AVG), ValueError, "floating-point"),
             (lambda: dist.all_reduce(np.zeros(3)), TypeError, "cltensor tensor"),
             (lambda: dist.broadcast(t, src=world), ValueError, "src must be a rank"),
             (lambda: dist.reduce_scatter_tensor(t, t), ValueError, f"needs {world} x 12"),
             (lambda: dist.all_gather_into_tensor(t, t), ValueError, f"needs {world} x 12"),
             (lambda: dist.all_gather([t], t), ValueError, f"1 tensors for {world} ranks")]
    for call, kind, text in cases:
        try:
            call()
        except kind as e:
            assert text in str(e), f"{text!r} not in {e}"
        else:
            raise AssertionError(f"no {kind.__name__} for {text}")


def main():
    init_with_env_checks()
    rank, world = dist.get_rank(), dist.get_world_size()
    test_bad_input(rank, world)
    test_reductions(rank, world)
    test_moves(rank, world)
    test_async_waited_out_of_order(rank, world)
    test_point_to_point(rank, world)
    test_shared_memory_all_reduce(rank, world)
    sampler = DistributedSampler(range(5), shuffle=False)  # world and rank from the group
    assert (sampler.num_replicas, sampler.rank) == (world, rank), "sampler defaults"
    padded = [i % 5 for i in range(sampler.total_size)]
    assert list(sampler) == padded[rank::world], f"sampler gave {list(sampler)}"
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: collectives ok", flush=True)


if __name__ == "__main__":
    main()
