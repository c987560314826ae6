"""`mpirun -n N python -m convnet_benchmarks --distributed`: every rank trains on its own batch
under DistributedDataParallel; rank 0 reports each rank's and the aggregate images/s, and the
scaling efficiency against one process alone on the same device (timed first, the other ranks
waiting).

It also splits the step: compute (the process alone), and the two parts of exchanging one
step's gradients, each timed by itself in DDP's buckets: host staging (every bucket copied to
the host and back, the queue drained first) and the all-reduce of host arrays of the buckets'
sizes (MPI's, or through the host's shared memory where DDP's take that path). From those it
predicts the efficiency by docs/distributed.md's model (the buckets but the last hidden under
the backward pass) beside the measured one."""
import datetime
import json
import time

import numpy as np

from . import bench
from .models import INPUTS, MODELS

SETUP_TIMEOUT_S = 3600  # the single-process baseline keeps the other ranks waiting at a barrier


def _step(model, x, g, device, iterations, label):
    """bench.time_steps' Result of training steps of model on x with output gradient g."""
    def backward(out):
        model.zero_grad(set_to_none=True)
        out.backward(g)

    return bench.time_steps(lambda: model(x), backward, device.synchronize, iterations, label)


def _median_ms(fn, rounds):
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def exchange_split(params, device, rounds=5):
    """(host staging ms, all-reduce ms, buckets, gradient bytes) of one step's gradient
    exchange in DDP's buckets (default cap), each part timed alone, medians of `rounds`:
    staging copies every bucket's gradients to the host and back (Staged, the queue drained
    first); the all-reduce sums host arrays of the buckets' sizes between barriers, as DDP's
    do (MPI, or the host's shared memory: cltensor.distributed.shm)."""
    import cltensor as ct
    import cltensor.distributed as dist
    from cltensor.distributed.collectives import all_reduce_host
    from cltensor.distributed.staging import Staged
    from cltensor.nn.parallel.distributed import MB, make_buckets
    # NOTE: a parameter without a gradient contributes zeros, as in DDP's buckets
    buckets = [[ct.zeros_like(params[i]) if params[i].grad is None else params[i].grad
                for i in b] for b in make_buckets(params, 25 * MB)]

    def stage():
        device.synchronize()
        for grads in buckets:
            s = Staged(grads)
            s.wait()
            s.finish()

    arrays = [np.zeros(sum(t.numel() for t in b), dtype=b[0].dtype) for b in buckets]

    def reduce():  # by DDP's buckets' own path (the host's shared memory, or MPI)
        for a in arrays:
            all_reduce_host(a, name="exchange_split").Wait()

    stage()  # the staging buffers made
    staging = _median_ms(stage, rounds)
    dist.barrier()
    reduced = _median_ms(lambda: (dist.barrier(), reduce()), rounds)
    nbytes = sum(a.nbytes for a in arrays)
    return staging, reduced, len(buckets), nbytes


def predicted_efficiency(step_ms, backward_ms, exchange_ms, buckets):
    """docs/distributed.md's model: T / (T + exposed), exposed = max(T_comm / B,
    T_comm - T_bwd (1 - 1/B)) with DDP's overlap."""
    if buckets == 0:
        return 1.0
    exposed = max(exchange_ms / buckets, exchange_ms - backward_ms * (1 - 1 / buckets))
    return step_ms / (step_ms + exposed)


def _gathered(value, device):
    """Every rank's float `value`, in rank order."""
    import cltensor as ct
    import cltensor.distributed as dist
    mine = ct.tensor([value], dtype="float64", device=device)
    out = ct.zeros(dist.get_world_size(), dtype="float64", device=device)
    dist.all_gather_into_tensor(out, mine)
    return out.numpy().tolist()


def run_model(name, args, device):
    import cltensor as ct
    import cltensor.distributed as dist
    from cltensor.nn.parallel import DistributedDataParallel
    rank, world = dist.get_rank(), dist.get_world_size()
    _, _, gpu_batch, cpu_batch = INPUTS[name]
    batch = args.batch_size or (gpu_batch if device.is_gpu else cpu_batch)
    model = bench.build_cltensor(name, device, args.dtype)
    rng = np.random.default_rng(rank)
    x = ct.from_numpy(rng.standard_normal(bench.input_shape(name, batch)).astype(args.dtype),
                      device=device)
    g = ct.from_numpy(rng.standard_normal((batch,) + tuple(model(x[:1]).shape[1:]))
                      .astype(args.dtype), device=device)
    alone = _step(model, x, g, device, args.iterations, f"{name} alone") if rank == 0 else None
    single, single_bwd = (alone["total"]["median"], alone["backward"]["median"]) if alone \
        else (0.0, 0.0)
    dist.barrier()
    ddp = DistributedDataParallel(model)
    ms = _step(ddp, x, g, device, args.iterations, f"{name} rank {rank}")["total"]["median"]
    params = [p for p in model.parameters() if p.requires_grad]  # DDP's, in its order
    staging, reduce_ms, buckets, nbytes = exchange_split(params, device)
    rank_ms = _gathered(ms, device)
    single, single_bwd = _gathered(single, device)[0], _gathered(single_bwd, device)[0]
    rank_img_s = [batch / t * 1e3 for t in rank_ms]
    aggregate = sum(rank_img_s)
    return {"model": name, "batch_per_rank": batch, "world_size": world, "single_ms": single,
            "single_backward_ms": single_bwd, "rank_ms": rank_ms, "rank_img_s": rank_img_s,
            "aggregate_img_s": aggregate,
            "efficiency": aggregate / (world * batch / single * 1e3),
            "exposed_ms": float(np.mean(rank_ms)) - single, "staging_ms": staging,
            "all_reduce_ms": reduce_ms, "buckets": buckets, "gradient_bytes": nbytes,
            "predicted_efficiency": predicted_efficiency(single, single_bwd,
                                                         staging + reduce_ms, buckets)}


def staging_rates(device, nbytes=64 * 2**20, rounds=3):
    """GB/s of the collectives' host staging (device to host, host to device: two tensors, so
    the copying path even on a CPU device) and of an all_reduce of nbytes / 2, staging included;
    best of `rounds`."""
    import cltensor as ct
    import cltensor.distributed as dist
    from cltensor.distributed.staging import Staged
    parts = [ct.zeros(nbytes // 8, device=device) for _ in range(2)]
    down, up, reduce = [], [], []
    for _ in range(rounds):
        device.synchronize()
        t0 = time.perf_counter()
        staged = Staged(parts)
        staged.wait()  # NOTE: Staged only enqueues the copies to the host
        t1 = time.perf_counter()
        staged.finish()
        t2 = time.perf_counter()
        dist.barrier()
        t3 = time.perf_counter()
        dist.all_reduce(parts[0])
        reduce.append(time.perf_counter() - t3)
        down.append(t1 - t0)
        up.append(t2 - t1)
    gb = nbytes / 1e9
    return {"bytes": nbytes, "device_to_host_gbs": gb / min(down),
            "host_to_device_gbs": gb / min(up), "all_reduce_gbs": gb / 2 / min(reduce)}


def table(rows):
    lines = ["| model | ranks | batch/rank | alone img/s | per-rank img/s | aggregate img/s | "
             "efficiency |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        per = ", ".join(f"{v:.1f}" for v in r["rank_img_s"])
        alone = r["batch_per_rank"] / r["single_ms"] * 1e3
        lines.append(f"| {r['model']} | {r['world_size']} | {r['batch_per_rank']} | {alone:.1f} | "
                     f"{per} | {r['aggregate_img_s']:.1f} | {r['efficiency']:.0%} |")
    return "\n".join(lines)


def split_table(rows):
    """Each step's time split: compute (the process alone, its backward in brackets), the DDP
    step's time over it, the exchange's two parts timed alone, and the model's efficiency."""
    lines = ["| model | compute ms (backward) | DDP step ms | exposed ms | gradients MB (buckets) | "
             "staging ms | all-reduce ms | efficiency: measured / model |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        step = float(np.mean(r["rank_ms"]))
        lines.append(f"| {r['model']} | {r['single_ms']:.2f} ({r['single_backward_ms']:.2f}) | "
                     f"{step:.2f} | {r['exposed_ms']:.2f} | {r['gradient_bytes'] / 1e6:.1f} "
                     f"({r['buckets']}) | {r['staging_ms']:.2f} | {r['all_reduce_ms']:.2f} | "
                     f"{r['efficiency']:.0%} / {r['predicted_efficiency']:.0%} |")
    return "\n".join(lines)


def main(args):
    import cltensor as ct
    import cltensor.distributed as dist
    dist.init_process_group("mpi", timeout=SETUP_TIMEOUT_S)
    device = ct.get_device(args.device)
    names = sorted(MODELS) if args.model == "all" else [args.model]
    rows = [run_model(n, args, device) for n in names]
    rates = staging_rates(device)
    if dist.get_rank() == 0:
        print(f"convnet benchmarks, data parallel over {dist.get_world_size()} ranks on "
              f"{device} ({device.platform_name}), {args.dtype}, {args.iterations} iterations")
        print(table(rows))
        print(split_table(rows))
        print("host staging, GB/s: device to host {device_to_host_gbs:.1f}, host to device "
              "{host_to_device_gbs:.1f}; all_reduce of 32 MiB {all_reduce_gbs:.1f}"
              .format(**rates))
        meta = {"date": datetime.date.today().isoformat(), "device": device.name,
                "platform": device.platform_name, "distributed": rows, "staging": rates}
        with open(args.json, "w") as f:
            json.dump(meta, f, indent=1, default=float)
    dist.destroy_process_group()
    return 0
