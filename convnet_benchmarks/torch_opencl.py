"""The four networks written in torch.nn, run by PyTorch on cltensor's "opencl" device
(cltensor.torch), timed by the same protocol as cltensor native and torch on CUDA/CPU."""
from . import bench


def register():
    """Register the device (before the runs, so that its import is not timed)."""
    import cltensor.torch  # noqa: F401


def run(name, state_dict, x_np, g_np, device, dtype, iterations):
    """torch on "opencl" with `device` as opencl:0: the Result, with the output and the
    operators that fell back to the CPU during the run."""
    import torch

    import cltensor
    import cltensor.torch  # noqa: F401  (registers the device)

    fell_back = set(cltensor.torch.fallback_ops())
    previous = cltensor.default_device()
    cltensor.set_default_device(device)
    try:
        tdev = torch.device("opencl")
        model = bench.build_torch(name, state_dict, tdev, dtype)
        x = torch.from_numpy(x_np).to(tdev)
        g = torch.from_numpy(g_np).to(tdev)

        def backward(out):
            model.zero_grad(set_to_none=True)
            out.backward(g)

        torch.opencl.reset_peak_memory_stats()
        res = bench.time_steps(lambda: model(x), backward, torch.opencl.synchronize, iterations,
                               f"torch-opencl {name}")
        res["peak_memory_mb"] = torch.opencl.max_memory_allocated() / 2**20
        res["fallback_ops"] = sorted(set(cltensor.torch.fallback_ops()) - fell_back)
        with torch.no_grad():
            res["output"] = model(x).cpu().numpy()
        return res
    finally:
        cltensor.set_default_device(previous)
