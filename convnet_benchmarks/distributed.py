"""`mpirun -n N python -m convnet_benchmarks --distributed`: every rank trains on its own batch
under DistributedDataParallel; rank 0 reports each rank's and the aggregate images/s, and the
scaling efficiency against one process alone on the same device (timed first, the other ranks
waiting)."""
import datetime
import json
import time

import numpy as np

from . import bench
from .models import INPUTS, MODELS

SETUP_TIMEOUT_S = 3600  # the single-process baseline keeps the other ranks waiting at a barrier


def _step_ms(model, x, g, device, iterations, label):
    def backward(out):
        model.zero_grad(set_to_none=True)
        out.backward(g)

    res = bench.time_steps(lambda: model(x), backward, device.synchronize, iterations, label)
    return res["total"]["median"]


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
    single = _step_ms(model, x, g, device, args.iterations, f"{name} alone") if rank == 0 else 0.0
    dist.barrier()
    ddp = DistributedDataParallel(model)
    ms = _step_ms(ddp, x, g, device, args.iterations, f"{name} rank {rank}")
    rank_ms, single = _gathered(ms, device), _gathered(single, device)[0]
    rank_img_s = [batch / t * 1e3 for t in rank_ms]
    aggregate = sum(rank_img_s)
    return {"model": name, "batch_per_rank": batch, "world_size": world, "single_ms": single,
            "rank_ms": rank_ms, "rank_img_s": rank_img_s, "aggregate_img_s": aggregate,
            "efficiency": aggregate / (world * batch / single * 1e3)}


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
        t0 = time.perf_counter()
        staged = Staged(parts)
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
        print("host staging, GB/s: device to host {device_to_host_gbs:.1f}, host to device "
              "{host_to_device_gbs:.1f}; all_reduce of 32 MiB {all_reduce_gbs:.1f}"
              .format(**rates))
        meta = {"date": datetime.date.today().isoformat(), "device": device.name,
                "platform": device.platform_name, "distributed": rows, "staging": rates}
        with open(args.json, "w") as f:
            json.dump(meta, f, indent=1, default=float)
    dist.destroy_process_group()
    return 0
