"""pytorch/examples mnist_rnn, reduced: an LSTM reads each image row by row."""
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
    def __init__(self, rows=8, hidden=16):
        super().__init__()
        self.rnn = nn.LSTM(input_size=rows, hidden_size=hidden, batch_first=True)
        self.batchnorm = nn.BatchNorm1d(hidden)
        self.dropout1 = nn.Dropout(0.25)
        self.fc1 = nn.Linear(hidden, 16)
        self.dropout2 = nn.Dropout(0.5)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, input):
        input = input.reshape(-1, input.shape[-2], input.shape[-1])  # (N, 1, R, R) -> (N, R, R)
        output, hidden = self.rnn(input)
        output = output[:, -1, :]
        output = self.batchnorm(output)
        output = self.dropout1(output)
        output = F.relu(self.fc1(output))
        output = self.dropout2(output)
        return F.log_softmax(self.fc2(output), dim=1)


def main(argv=()):
    parser = argparse.ArgumentParser(description="MNIST RNN example, reduced")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--save-dir", default=".")
    args = parser.parse_args(list(argv))
    torch.manual_seed(1)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, 32)
    images = rng.random((32, 1, 8, 8), dtype=np.float32)
    images[np.arange(32), 0, :, labels % 8] += 2.0 * (1 + labels[:, None] // 8)
    loader = DataLoader(TensorDataset(torch.tensor(images), torch.tensor(labels)),
                        batch_size=16, shuffle=True)

    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    losses = []
    for epoch in range(1, args.epochs + 1):
        model.train()
        for batch_idx, (data, target) in enumerate(loader):
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            loss = F.nll_loss(model(data), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            print(f"epoch {epoch}, {batch_idx * len(data):3d}/{len(loader.dataset)} seen, "
                  f"loss {loss.item():.6f}")
        scheduler.step()
    model.rnn.flatten_parameters()
    torch.save(model.state_dict(), os.path.join(args.save_dir, "mnist_rnn.pt"))
    return losses


if __name__ == "__main__":
    main()
