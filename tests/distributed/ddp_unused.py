"""Run under mpirun: find_unused_parameters. Layer `a` is used everywhere, `b` on rank 1 only,
`c` nowhere: a and b get the gradients averaged over ranks, c none; without
find_unused_parameters the next forward says that a reduction did not finish."""
import numpy as np

import cltensor as ct
import cltensor.distributed as dist
from cltensor import nn
from cltensor.nn.parallel import DistributedDataParallel


class Net(nn.Module):
    def __init__(self, use_b):
        super().__init__()
        ct.manual_seed(0)
        self.a, self.b, self.c = nn.Linear(4, 3), nn.Linear(4, 3), nn.Linear(4, 3)
        self.use_b = use_b

    def forward(self, x):
        return self.a(x) + self.b(x) if self.use_b else self.a(x)


def inputs(r):
    return ct.from_numpy(np.random.default_rng(r).standard_normal((2, 4)).astype(np.float32))


def reference(world):
    grads = {}
    for r in range(world):
        net = Net(use_b=r == 1)
        net(inputs(r)).sum().backward()
        for name, p in net.named_parameters():
            if p.grad is not None:
                grads[name] = grads.get(name, 0) + p.grad.numpy() / world
    return grads


def main():
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    model = DistributedDataParallel(Net(use_b=rank == 1), find_unused_parameters=True)
    model(inputs(rank)).sum().backward()
    want = reference(world)
    for name, p in model.module.named_parameters():
        if name.startswith("c."):
            assert p.grad is None, f"rank {rank}: {name} got a gradient"
        else:
            np.testing.assert_allclose(p.grad.numpy(), want[name], rtol=1e-6, atol=1e-7,
                                       err_msg=f"rank {rank}: {name}")
    strict = DistributedDataParallel(Net(use_b=True))
    strict(inputs(rank)).sum().backward()
    try:
        strict(inputs(rank))
    except RuntimeError as e:
        assert "find_unused_parameters=True" in str(e), str(e)
    else:
        raise AssertionError("a forward after an unfinished reduction did not raise")
    print(f"rank {rank}: unused parameters ok", flush=True)


if __name__ == "__main__":
    main()
