"""torch.nn models written here (AlexNet, VGG-A, GoogLeNet, ResNet-18, a Transformer encoder,
at tiny widths) train on the "opencl" device with torch.optim through a DataLoader, every
operator on the device, and match the same training on CPU torch step by step."""
import numpy as np
import pytest

# torch (skipping when it is missing or too old) and the fixture making `device` opencl:0
from test_torch_device import ct, ocl, torch  # noqa: F401
from torch import nn  # noqa: E402

pytestmark = pytest.mark.usefixtures("ocl")
OCL = "opencl"


def alexnet():
    return nn.Sequential(
        nn.Conv2d(3, 8, 5, stride=2, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        nn.Conv2d(8, 12, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        nn.Conv2d(12, 16, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d((2, 2)), nn.Flatten(),
        nn.Linear(64, 32), nn.ReLU(inplace=True), nn.Linear(32, 10))


def vgg_a():
    layers, cin = [], 3
    for v in (8, "M", 16, "M", 16, 16, "M", 32, 32, "M"):
        if v == "M":
            layers.append(nn.MaxPool2d(2))
        else:
            layers += [nn.Conv2d(cin, v, 3, padding=1), nn.ReLU(inplace=True)]
            cin = v
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(32, 24), nn.ReLU(), nn.Linear(24, 10))


class Inception(nn.Module):
    """GoogLeNet's block: 1x1, 1x1-3x3, 1x1-5x5 and pool-1x1 branches joined on channels."""

    def __init__(self, cin, c1, c3r, c3, c5r, c5, cp):
        super().__init__()
        relu = lambda: nn.ReLU(inplace=True)
        self.b1 = nn.Sequential(nn.Conv2d(cin, c1, 1), relu())
        self.b3 = nn.Sequential(nn.Conv2d(cin, c3r, 1), relu(), nn.Conv2d(c3r, c3, 3, padding=1), relu())
        self.b5 = nn.Sequential(nn.Conv2d(cin, c5r, 1), relu(), nn.Conv2d(c5r, c5, 5, padding=2), relu())
        self.bp = nn.Sequential(nn.MaxPool2d(3, 1, padding=1), nn.Conv2d(cin, cp, 1), relu())

    def forward(self, x):
        return torch.cat([self.b1(x), self.b3(x), self.b5(x), self.bp(x)], 1)


def googlenet():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, ceil_mode=True),
        Inception(8, 4, 4, 8, 2, 4, 4), Inception(20, 6, 4, 8, 2, 4, 4),
        nn.AvgPool2d(3, 2, padding=1), Inception(22, 8, 4, 8, 2, 4, 4),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.0), nn.Linear(24, 10))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
        self.skip = nn.Identity() if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return torch.relu(self.body(x) + self.skip(x))


def resnet18():
    widths, blocks, cin = (4, 8, 12, 16), [], 4
    for i, w in enumerate(widths):
        blocks += [BasicBlock(cin, w, 1 if i == 0 else 2), BasicBlock(w, w, 1)]
        cin = w
    return nn.Sequential(nn.Conv2d(3, 4, 3, 1, 1, bias=False), nn.BatchNorm2d(4), nn.ReLU(inplace=True),
                         nn.MaxPool2d(3, 2, 1), *blocks, nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(),
                         nn.Linear(16, 10))


class Encoder(nn.Module):
    """Token embedding, learned positions, a two-layer nn.TransformerEncoder, mean pooling."""

    def __init__(self, vocab=20, width=16, length=6):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.pos = nn.Parameter(torch.randn(length, width) * 0.1)
        layer = nn.TransformerEncoderLayer(width, nhead=2, dim_feedforward=32, dropout=0.0,
                                           activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, 10)

    def forward(self, tokens):
        h = self.encoder(self.embed(tokens) + self.pos)
        return self.head(self.norm(h).mean(dim=1))


class Data(torch.utils.data.Dataset):
    """Fixed random samples (images or token rows) with class labels."""

    def __init__(self, sample_shape, tokens, n=8):
        gen = torch.Generator().manual_seed(7)
        self.x = (torch.randint(0, 20, (n, *sample_shape), generator=gen) if tokens
                  else torch.randn(n, *sample_shape, generator=gen))
        self.y = torch.randint(0, 10, (n,), generator=gen)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


MODELS = {"alexnet": (alexnet, (3, 32, 32)), "vgg_a": (vgg_a, (3, 16, 16)),
          "googlenet": (googlenet, (3, 16, 16)), "resnet18": (resnet18, (3, 32, 32)),
          "transformer": (Encoder, (6,))}
# foreach (torch's default on the device: _foreach_* ops) and fused=True (_fused_sgd_/_adamw_)
OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-4),
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-3, weight_decay=0.01),
    "sgd_fused": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True,
                                           weight_decay=1e-4, fused=True),
    "adamw_fused": lambda p: torch.optim.AdamW(p, lr=1e-3, weight_decay=0.01, amsgrad=True,
                                               fused=True)}


def train(name, opt_name, dev, dtype=torch.float32, steps=3):
    """Per-step losses and final parameters of `steps` steps of model `name` on `dev`."""
    build, shape = MODELS[name]
    torch.manual_seed(0)
    model = build().to(dtype).to(dev)
    opt = OPTIMIZERS[opt_name](model.parameters())
    data = Data(shape, tokens=name == "transformer")
    loader = torch.utils.data.DataLoader(data, batch_size=4, shuffle=False)
    losses = []
    for _, (x, y) in zip(range(steps), iter(_cycle(loader))):
        opt.zero_grad()
        x = x.to(dev) if name == "transformer" else x.to(dtype).to(dev)
        loss = nn.functional.cross_entropy(model(x), y.to(dev))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().cpu() for p in model.parameters()]


def _cycle(loader):
    while True:
        yield from loader


@pytest.mark.parametrize("name, opt_name", [(m, o) for m in MODELS for o in ("sgd", "adamw")]
                         + [("resnet18", "sgd_fused"), ("transformer", "adamw_fused")])
def test_model_trains_like_cpu(name, opt_name, monkeypatch):
    """float32: the losses agree step by step to float32 rounding; so do the parameters after
    SGD. Adam moves a parameter whose gradient is zero in exact arithmetic (an attention key's
    bias, a dead ReLU's weights, a convolution's bias-like directions under batch norm) by a
    full step lr in the direction of its rounding noise, so after Adam the parameters agree to
    2 lr per step and the next loss to 1e-3 (test_model_float64_adamw checks them tightly)."""
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")  # every op of the step on the device
    (got_losses, got), (want_losses, want) = train(name, opt_name, OCL), train(name, opt_name, "cpu")
    adam = "adam" in opt_name
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-3 if adam else 1e-4, atol=1e-5)
    atol = 2 * 1e-3 * len(got_losses) if adam else 1e-4
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-3, atol=atol)


@pytest.mark.parametrize("name, opt_name", [("vgg_a", "adamw"), ("resnet18", "adamw"),
                                            ("transformer", "adamw_fused")])
def test_model_float64_adamw(device, name, opt_name, monkeypatch):
    if not device.has_fp64:
        pytest.skip(f"{device.name} has no float64")
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    got_losses, got = train(name, opt_name, OCL, torch.float64)
    want_losses, want = train(name, opt_name, "cpu", torch.float64)
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-10)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-7, atol=1e-9)
