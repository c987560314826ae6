"""pytorch/examples mnist, reduced: a small CNN on random 28x28 digits, Adadelta and StepLR."""
import argparse
import os

import numpy as np

import cltensor as torch
import cltensor.nn as nn
import cltensor.nn.functional as F
import cltensor.optim as optim
from cltensor.optim.lr_scheduler import StepLR
from cltensor.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(16 * 12 * 12, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


def fake_mnist(n, seed):
    rng = np.random.default_rng(seed)
    images = rng.random((n, 1, 28, 28), dtype=np.float32)
    labels = rng.integers(0, 10, n)
    images[np.arange(n), 0, labels * 2 + 4, 4:24] += 2.0  # a learnable stroke per class
    return TensorDataset(torch.from_numpy((images - 0.1307) / 0.3081), torch.from_numpy(labels))


def train(args, model, device, train_loader, optimizer, epoch):
    model.train()
    losses = []
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if batch_idx % args.log_interval == 0:
            print(f"epoch {epoch}, {batch_idx * len(data):3d}/{len(train_loader.dataset)} seen, "
                  f"loss {loss:.6f}")
    return losses


def test(model, device, test_loader):
    model.eval()
    test_loss, correct = 0, 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    test_loss /= len(test_loader.dataset)
    print(f"held out: mean loss {test_loss:.4f}, {correct} of {len(test_loader.dataset)} right "
          f"({100. * correct / len(test_loader.dataset):.0f}%)")
    return test_loss


def main(argv=()):
    parser = argparse.ArgumentParser(description="MNIST example, reduced")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--gamma", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-interval", type=int, default=1)
    parser.add_argument("--save-dir", default=".")
    args = parser.parse_args(list(argv))
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    train_kwargs = {"batch_size": args.batch_size, "shuffle": True}
    if torch.cuda.is_available():
        train_kwargs.update({"num_workers": 1, "pin_memory": True})
    train_loader = DataLoader(fake_mnist(32, 0), **train_kwargs)
    test_loader = DataLoader(fake_mnist(16, 1), batch_size=16)

    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    losses = []
    for epoch in range(1, args.epochs + 1):
        losses += train(args, model, device, train_loader, optimizer, epoch)
        test(model, device, test_loader)
        scheduler.step()
    path = os.path.join(args.save_dir, "mnist_cnn.pt")
    torch.save(model.state_dict(), path)
    model.load_state_dict(torch.load(path, map_location=device, weights_only=True))
    return losses


if __name__ == "__main__":
    main()
