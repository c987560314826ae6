"""Where cltensor.torch runs torch's backward: on the calling thread (torch's engine would give
each opencl index a device thread it never counted), except for outputs on another accelerator
(CUDA), which torch runs as it would (torch 2.11 trips a stream assertion on the calling
thread there)."""
import pytest

torch = pytest.importorskip("torch", reason="cltensor.torch needs torch")
ct_torch = pytest.importorskip("cltensor.torch")


def _seen_multithreading(outputs):
    """The multithreading flag the wrapped engine call sees, for these outputs."""
    seen = []
    ct_torch._calling_thread_backward(
        lambda t_outputs, *a, **k: seen.append(torch.autograd.is_multithreading_enabled()))(
        outputs, None)
    return seen[0]


def test_cpu_and_opencl_backward_on_the_calling_thread(device):
    assert not _seen_multithreading((torch.ones(2),))
    assert not _seen_multithreading((torch.ones(2, device="opencl"),))


def test_other_accelerators_run_as_torch_runs_them():
    assert torch.autograd.is_multithreading_enabled()
    assert _seen_multithreading((torch.ones(2, device="meta"),))
    assert not _seen_multithreading((torch.ones(2), torch.ones(2, device="opencl")))


def test_backward_through_the_engine_still_runs(device):
    """A real backward through the patched engine, CPU and opencl leaves alike."""
    for dev in ("cpu", "opencl"):
        x = torch.arange(4.0).to(dev).requires_grad_()
        (x * x).sum().backward()
        assert torch.equal(x.grad.cpu(), 2 * torch.arange(4.0))
