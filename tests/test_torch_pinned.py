"""Pinned host memory with the opencl device registered: tensor.pin_memory() and
DataLoader(pin_memory=True), which torch routes to the current accelerator's pinned-memory
allocator (a PrivateUse1 backend from Python has none), give plain CPU copies."""
import pytest

torch = pytest.importorskip("torch", reason="cltensor.torch needs torch (pip install 'cltensor[torch]')")
import cltensor.torch  # noqa: E402,F401


def test_pin_memory_copies_for_opencl():
    x = torch.randn(3, 4).t()
    y = x.pin_memory()
    assert y.device.type == "cpu" and torch.equal(x, y) and y.stride() == x.stride()
    assert y.data_ptr() != x.data_ptr()  # a copy, as torch's pinned result is
    with pytest.raises(RuntimeError):  # pinning for a non-accelerator stays torch's error
        x.pin_memory(device="cpu")


@pytest.mark.parametrize("workers", [0, 1])
def test_dataloader_pins_and_trains_on_opencl(workers):
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(12, 3), torch.randint(0, 2, (12,)))
    loader = torch.utils.data.DataLoader(data, batch_size=4, pin_memory=True,
                                         num_workers=workers)
    net = torch.nn.Linear(3, 2).to("opencl")
    seen = 0
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(net(x.to("opencl", non_blocking=True)),
                                                 y.to("opencl"))
        loss.backward()
        assert torch.isfinite(loss).item()
        seen += len(x)
    assert seen == 12 and net.weight.grad is not None
