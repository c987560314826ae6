"""Train a small CNN on scikit-learn's bundled 8x8 handwritten digits with cltensor.

The data ships with scikit-learn (no download). The loop is the one a PyTorch user writes, with
cltensor in place of torch: a Module, CrossEntropyLoss, Adam, a cosine learning-rate schedule,
zero_grad / backward / step, and eval() for testing. It reaches about 98-99% test accuracy.

    python examples/digits.py                   # the CNN, 12 epochs, default device
    python examples/digits.py --epochs 4 --device 0:0 --save digits.npz
    python examples/digits.py --model mlp       # a two-layer perceptron instead
    python examples/digits.py --graphs          # full batches replayed from a captured step
"""
import argparse
import time

import numpy as np

import cltensor
import cltensor.optim
from cltensor import nn


def load_data(test_fraction=0.2, seed=0):
    """(x_train, y_train, x_test, y_test): images (N, 1, 8, 8) float32 in [0, 1], int64 labels."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    n_test = int(len(y) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def build_model(kind="cnn"):
    """The CNN (two conv blocks, a linear classifier) or, with kind='mlp', a perceptron."""
    if kind == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    if kind != "cnn":
        raise ValueError(f"unknown model {kind!r}: use 'cnn' or 'mlp'")
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),     # 16 x 4 x 4
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),    # 32 x 2 x 2
        nn.Flatten(), nn.Linear(32 * 2 * 2, 10))


def batches(x, y, batch_size, rng=None):
    """Mini-batches of host arrays, shuffled when rng is given."""
    order = rng.permutation(len(y)) if rng is not None else np.arange(len(y))
    for start in range(0, len(y), batch_size):
        idx = order[start:start + batch_size]
        yield x[idx], y[idx]


def evaluate(model, x, y, device, batch_size=512):
    """(mean cross-entropy loss, accuracy) of the model in eval mode."""
    model.eval()
    loss_sum, correct = 0.0, 0
    with cltensor.no_grad():
        for xb, yb in batches(x, y, batch_size):
            logits = model(cltensor.from_numpy(xb, device=device))
            target = cltensor.from_numpy(yb, device=device)
            loss_sum += nn.functional.cross_entropy(logits, target, reduction="sum").item()
            correct += int((logits.argmax(dim=1) == target).sum().item())
    return loss_sum / len(y), correct / len(y)


class CapturedStep:
    """A training step on static input tensors: a few eager steps, then the step captured once
    in a graph and replayed for every later batch (cltensor.graphs); same numbers as eager."""

    WARMUP = 2  # eager steps before the capture: kernels built, Adam's state made

    def __init__(self, model, loss_fn, optimizer, batch_size, device):
        self.x = cltensor.empty((batch_size, 1, 8, 8), device=device)
        self.y = cltensor.empty((batch_size,), dtype=cltensor.int64, device=device)
        self.step = lambda: eager_step(model, loss_fn, optimizer, self.x, self.y)
        self.graph, self.loss, self.eager = None, None, 0

    def __call__(self, xb, yb):
        self.x.copy_(cltensor.from_numpy(xb, device=self.x.device))
        self.y.copy_(cltensor.from_numpy(yb, device=self.y.device))
        if self.eager < self.WARMUP:
            self.eager += 1
            return self.step()
        if self.graph is None:
            self.graph = cltensor.Graph()
            with cltensor.graph(self.graph):
                self.loss = self.step()
        self.graph.replay()
        return self.loss


def eager_step(model, loss_fn, optimizer, inputs, targets):
    optimizer.zero_grad()
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return loss


def train(epochs=12, batch_size=64, lr=1e-2, kind="cnn", device=None, seed=0, log=print,
          graphs=False):
    """Train on the digits; returns (model, history), history a list of per-epoch dicts with
    train_loss, test_loss, test_accuracy and seconds. graphs: full batches through a
    CapturedStep."""
    device = cltensor.get_device(device)
    cltensor.manual_seed(seed)
    x_train, y_train, x_test, y_test = load_data(seed=seed)
    model = build_model(kind).to(device)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = cltensor.optim.Adam(model.parameters(), lr=lr)
    scheduler = cltensor.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
    captured = CapturedStep(model, loss_fn, optimizer, batch_size, device) if graphs else None
    rng = np.random.default_rng(seed)
    history = []
    for epoch in range(1, epochs + 1):
        model.train()
        start, loss_sum = time.perf_counter(), 0.0
        for xb, yb in batches(x_train, y_train, batch_size, rng):
            if captured is not None and len(yb) == batch_size:
                loss = captured(xb, yb)
            else:
                loss = eager_step(model, loss_fn, optimizer, cltensor.from_numpy(xb, device=device),
                                  cltensor.from_numpy(yb, device=device))
            loss_sum += loss.item() * len(yb)
        scheduler.step()
        test_loss, accuracy = evaluate(model, x_test, y_test, device)
        history.append({"epoch": epoch, "train_loss": loss_sum / len(y_train),
                        "test_loss": test_loss, "test_accuracy": accuracy,
                        "seconds": time.perf_counter() - start})
        log(f"epoch {epoch:3d}/{epochs}  train loss {history[-1]['train_loss']:.4f}  "
            f"test loss {test_loss:.4f}  test accuracy {100 * accuracy:6.2f}%  "
            f"({history[-1]['seconds']:.1f} s)")
    return model, history


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--model", choices=("cnn", "mlp"), default="cnn")
    parser.add_argument("--device", default=None, help="'platform:device' index or name part")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", default=None, help="write the trained state_dict to this .npz")
    parser.add_argument("--graphs", action="store_true",
                        help="replay full batches from a captured training step")
    args = parser.parse_args(argv)
    device = cltensor.get_device(args.device)
    print(f"training a {args.model} on {device}")
    model, history = train(args.epochs, args.batch_size, args.lr, args.model, device, args.seed,
                           graphs=args.graphs)
    print(f"final test accuracy: {100 * history[-1]['test_accuracy']:.2f}%")
    if args.save:
        from cltensor.serialization import save
        save(model.state_dict(), args.save)
        print(f"saved the state_dict to {args.save}")


if __name__ == "__main__":
    main()
