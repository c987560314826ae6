"""A CIFAR-10 DLA (deep layer aggregation, the simple form in kuangliu's pytorch-cifar) trained
as that repository's main.py does, reduced: channels / 8, 16x16 random images."""
import argparse
import os

import numpy as np

import cltensor as torch
import cltensor.nn as nn
import cltensor.nn.functional as F
import cltensor.optim as optim
from cltensor.utils.data import DataLoader, TensorDataset


class BasicBlock(nn.Module):
    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride, bias=False),
                                          nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class Root(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size=1):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=1,
                              padding=(kernel_size - 1) // 2, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)

    def forward(self, xs):
        x = torch.cat(xs, 1)
        return F.relu(self.bn(self.conv(x)))


class Tree(nn.Module):
    def __init__(self, block, in_channels, out_channels, level=1, stride=1):
        super().__init__()
        self.root = Root(2 * out_channels, out_channels)
        if level == 1:
            self.left_tree = block(in_channels, out_channels, stride=stride)
            self.right_tree = block(out_channels, out_channels, stride=1)
        else:
            self.left_tree = Tree(block, in_channels, out_channels, level=level - 1,
                                  stride=stride)
            self.right_tree = Tree(block, out_channels, out_channels, level=level - 1, stride=1)

    def forward(self, x):
        out1 = self.left_tree(x)
        out2 = self.right_tree(out1)
        return self.root([out1, out2])


class SimpleDLA(nn.Module):
    def __init__(self, block=BasicBlock, num_classes=10, w=2):
        super().__init__()
        self.base = nn.Sequential(nn.Conv2d(3, 2 * w, 3, 1, 1, bias=False),
                                  nn.BatchNorm2d(2 * w), nn.ReLU(True))
        self.layer1 = nn.Sequential(nn.Conv2d(2 * w, 2 * w, 3, 1, 1, bias=False),
                                    nn.BatchNorm2d(2 * w), nn.ReLU(True))
        self.layer2 = nn.Sequential(nn.Conv2d(2 * w, 4 * w, 3, 1, 1, bias=False),
                                    nn.BatchNorm2d(4 * w), nn.ReLU(True))
        self.layer3 = Tree(block, 4 * w, 8 * w, level=1, stride=1)
        self.layer4 = Tree(block, 8 * w, 16 * w, level=2, stride=2)
        self.layer5 = Tree(block, 16 * w, 32 * w, level=2, stride=2)
        self.linear = nn.Linear(32 * w, num_classes)

    def forward(self, x):
        out = self.base(x)
        out = self.layer5(self.layer4(self.layer3(self.layer2(self.layer1(out)))))
        out = F.avg_pool2d(out, 4)
        return self.linear(out.view(out.size(0), -1))


def main(argv=()):
    parser = argparse.ArgumentParser(description="PyTorch CIFAR10 Training (DLA), reduced")
    parser.add_argument("--lr", default=0.05, type=float)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--save-dir", default=".")
    args = parser.parse_args(list(argv))
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, 16)
    images = rng.standard_normal((16, 3, 16, 16)).astype(np.float32)
    images[np.arange(16), labels % 3] += (labels[:, None, None] - 4.5) / 3
    trainloader = DataLoader(TensorDataset(torch.tensor(images), torch.tensor(labels)),
                             batch_size=16, shuffle=True)
    net = SimpleDLA().to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=200)
    losses = []
    for epoch in range(args.epochs):
        net.train()
        for inputs, targets in trainloader:
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            loss = criterion(net(inputs), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            print(f"Epoch {epoch} | Loss: {loss:.3f} | lr {scheduler.get_last_lr()[0]:.5f}")
        scheduler.step()
    state = {"net": net.state_dict(), "acc": 0.0, "epoch": args.epochs}
    torch.save(state, os.path.join(args.save_dir, "ckpt.pth"))
    net.load_state_dict(torch.load(os.path.join(args.save_dir, "ckpt.pth"))["net"])
    return losses


if __name__ == "__main__":
    main()
