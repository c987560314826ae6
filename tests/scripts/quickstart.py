"""The PyTorch quickstart tutorial, reduced: an MLP on random 28x28 "FashionMNIST" images,
train and test loops, the model saved, loaded back and asked for a prediction."""
import argparse
import os

import numpy as np

import cltensor as torch
from cltensor import nn
from cltensor.utils.data import DataLoader, TensorDataset

classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
           "Sneaker", "Bag", "Ankle boot"]


class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(
            nn.Linear(28 * 28, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x):
        x = self.flatten(x)
        return self.linear_relu_stack(x)


def fake_fashion(n, seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 10, n)
    X = rng.random((n, 1, 28, 28), dtype=np.float32) * 0.5
    X[np.arange(n), 0, y * 2 + 3] += 0.5
    return TensorDataset(torch.tensor(X), torch.tensor(y))


def train(dataloader, model, loss_fn, optimizer, device):
    size = len(dataloader.dataset)
    model.train()
    for batch, (X, y) in enumerate(dataloader):
        X, y = X.to(device), y.to(device)
        pred = model(X)
        loss = loss_fn(pred, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        loss, current = loss.item(), (batch + 1) * len(X)
        print(f"loss {loss:>7f} after {current:>5d} of {size:>5d}")


def test(dataloader, model, loss_fn, device):
    size = len(dataloader.dataset)
    num_batches = len(dataloader)
    model.eval()
    test_loss, correct = 0, 0
    with torch.no_grad():
        for X, y in dataloader:
            X, y = X.to(device), y.to(device)
            pred = model(X)
            test_loss += loss_fn(pred, y).item()
            correct += (pred.argmax(1) == y).type(torch.float).sum().item()
    test_loss /= num_batches
    correct /= size
    print(f"held out: {(100 * correct):>0.1f}% right, mean loss {test_loss:>8f}")
    return test_loss


def main(argv=()):
    parser = argparse.ArgumentParser(description="quickstart, reduced")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--save-dir", default=".")
    args = parser.parse_args(list(argv))
    torch.manual_seed(0)
    training_data, test_data = fake_fashion(64, 0), fake_fashion(32, 1)
    batch_size = 32
    train_dataloader = DataLoader(training_data, batch_size=batch_size)
    test_dataloader = DataLoader(test_data, batch_size=batch_size)
    for X, y in test_dataloader:
        print(f"images {X.shape}")
        print(f"labels {y.shape} of {y.dtype}")
        break

    device = torch.accelerator.current_accelerator().type \
        if torch.accelerator.is_available() else "cpu"
    print(f"device: {device}")
    model = NeuralNetwork().to(device)
    print(model)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-1)
    losses = []
    for t in range(args.epochs):
        print(f"epoch {t + 1}")
        train(train_dataloader, model, loss_fn, optimizer, device)
        losses.append(test(test_dataloader, model, loss_fn, device))
    print("trained")

    path = os.path.join(args.save_dir, "model.pth")
    torch.save(model.state_dict(), path)
    model = NeuralNetwork().to(device)
    model.load_state_dict(torch.load(path, weights_only=True))
    model.eval()
    x, y = test_data[0][0], test_data[0][1]
    with torch.no_grad():
        x = x.to(device)
        pred = model(x)
        predicted, actual = classes[pred[0].argmax(0)], classes[y]
        print(f"guess {predicted!r}, truth {actual!r}")
    return losses


if __name__ == "__main__":
    main()
