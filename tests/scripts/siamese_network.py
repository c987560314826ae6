"""pytorch/examples siamese_network, reduced: a shared CNN embeds two images, a head says
whether they show the same class (BCELoss on a sigmoid), with a pair Dataset of its own."""
import argparse
import os

import numpy as np

import cltensor as torch
import cltensor.nn as nn
import cltensor.optim as optim
from cltensor.optim.lr_scheduler import StepLR
from cltensor.utils.data import DataLoader, Dataset


class SiameseNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=3, padding=1, bias=False), nn.BatchNorm2d(8),
            nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d((1, 1)))
        self.fc_in_features = 16
        self.fc = nn.Sequential(nn.Linear(self.fc_in_features * 2, 16), nn.ReLU(inplace=True),
                                nn.Linear(16, 1))
        self.sigmoid = nn.Sigmoid()
        self.fc.apply(self.init_weights)

    def init_weights(self, m):
        if isinstance(m, nn.Linear):
            torch.nn.init.xavier_uniform_(m.weight)
            m.bias.data.fill_(0.01)

    def forward_once(self, x):
        output = self.features(x)
        return output.view(output.size()[0], -1)

    def forward(self, input1, input2):
        output = torch.cat((self.forward_once(input1), self.forward_once(input2)), 1)
        return self.sigmoid(self.fc(output))


class PairDataset(Dataset):
    """Pairs of random 12x12 images of four classes: even items the same class, odd ones not."""

    def __init__(self, n, seed):
        rng = np.random.default_rng(seed)
        self.images = rng.random((40, 1, 12, 12)).astype(np.float32)
        self.labels = np.arange(40) % 4
        self.images[np.arange(40), 0, self.labels * 3, :] += 2.0
        self.rng, self.n = rng, n
        self.pairs = [self._pair(i) for i in range(n)]

    def _pair(self, index):
        a = int(self.rng.integers(40))
        same = self.labels == self.labels[a] if index % 2 == 0 else self.labels != self.labels[a]
        b = int(self.rng.choice(np.flatnonzero(same)))
        return a, b, float(index % 2 == 0)

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        a, b, target = self.pairs[index]
        return (torch.from_numpy(self.images[a]), torch.from_numpy(self.images[b]),
                torch.tensor(target))


def train(model, device, train_loader, optimizer, epoch):
    model.train()
    criterion = nn.BCELoss()
    losses = []
    for batch_idx, (images_1, images_2, targets) in enumerate(train_loader):
        images_1, images_2 = images_1.to(device), images_2.to(device)
        targets = targets.to(device)
        optimizer.zero_grad()
        outputs = model(images_1, images_2).squeeze()
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        print(f"epoch {epoch}, {batch_idx * len(images_1):3d}/{len(train_loader.dataset)} pairs, "
              f"loss {loss.item():.6f}")
    return losses


def test(model, device, test_loader):
    model.eval()
    test_loss, correct = 0, 0
    criterion = nn.BCELoss()
    with torch.no_grad():
        for images_1, images_2, targets in test_loader:
            images_1, images_2 = images_1.to(device), images_2.to(device)
            targets = targets.to(device)
            outputs = model(images_1, images_2).squeeze()
            test_loss += criterion(outputs, targets).sum().item()
            pred = torch.where(outputs > 0.5, 1, 0)
            correct += pred.eq(targets.view_as(pred)).sum().item()
    print(f"held out: mean loss {test_loss / len(test_loader.dataset):.4f}, "
          f"{correct} of {len(test_loader.dataset)} pairs right")


def main(argv=()):
    parser = argparse.ArgumentParser(description="Siamese network example, reduced")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--save-dir", default=".")
    args = parser.parse_args(list(argv))
    torch.manual_seed(1)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_loader = DataLoader(PairDataset(32, 0), batch_size=16, shuffle=True)
    test_loader = DataLoader(PairDataset(16, 1), batch_size=16)
    model = SiameseNetwork().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    losses = []
    for epoch in range(1, args.epochs + 1):
        losses += train(model, device, train_loader, optimizer, epoch)
        test(model, device, test_loader)
        scheduler.step()
    torch.save(model.state_dict(), os.path.join(args.save_dir, "siamese_network.pt"))
    return losses


if __name__ == "__main__":
    main()
