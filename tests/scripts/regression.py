"""pytorch/examples regression, reduced: fit a degree-4 polynomial with a Linear layer and
plain gradient steps on the parameters."""
import argparse

import numpy as np

import cltensor as torch
import cltensor.nn.functional as F

POLY_DEGREE = 4


def make_features(x):
    """The powers x, x^2, ... x^POLY_DEGREE of a vector of samples, as columns."""
    x = x.unsqueeze(1)
    return torch.cat([x ** i for i in range(1, POLY_DEGREE + 1)], 1)


def poly_desc(W, b):
    result = "y = "
    for i, w in enumerate(W):
        result += f"{w:+.2f} x^{i + 1} "
    result += f"{b[0]:+.2f}"
    return result


def build_model():
    torch.manual_seed(3)
    return torch.nn.Linear(POLY_DEGREE, 1)


def train(fc, device, steps):
    rng = np.random.default_rng(0)
    w_target = torch.tensor(rng.standard_normal((POLY_DEGREE, 1)) * 5, dtype=torch.float32)
    b_target = torch.tensor(rng.standard_normal(1) * 5, dtype=torch.float32)
    losses = []
    for batch_idx in range(steps):  # noqa: B007 (reported below)
        x = torch.tensor(rng.standard_normal(32), dtype=torch.float32)
        batch_x = make_features(x).to(device)
        batch_y = (batch_x.mm(w_target.to(device)) + b_target.to(device)).to(device)
        fc.zero_grad()
        output = F.smooth_l1_loss(fc(batch_x), batch_y)
        loss = output.item()
        output.backward()
        for param in fc.parameters():
            param.data.add_(-0.1 * param.grad)
        losses.append(loss)
    print(f"loss {loss:.6f} after {batch_idx + 1} steps")
    print("fitted: " + poly_desc(fc.weight.view(-1), fc.bias))
    print("target: " + poly_desc(w_target.view(-1), b_target))
    return losses


def main(argv=()):
    parser = argparse.ArgumentParser(description="regression example, reduced")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--save-dir", default=".")
    args = parser.parse_args(list(argv))
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return train(build_model().to(device), device, args.steps)


if __name__ == "__main__":
    main()
