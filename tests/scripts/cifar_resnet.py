"""A CIFAR-10 ResNet18 training script in the style of kuangliu's pytorch-cifar, reduced: one
block per stage, narrow stages, 16x16 random images; checkpoints {"net", "acc", "epoch"}."""
import argparse
import os

import numpy as np

import cltensor as torch
import cltensor.backends.cudnn as cudnn
import cltensor.nn as nn
import cltensor.nn.functional as F
import cltensor.optim as optim
import cltensor.utils.data


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1,
                               bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != self.expansion * planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, self.expansion * planes, kernel_size=1, stride=stride,
                          bias=False),
                nn.BatchNorm2d(self.expansion * planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += self.shortcut(x)
        return F.relu(out)


class ResNet(nn.Module):
    def __init__(self, block, num_blocks, num_classes=10, width=8):
        super().__init__()
        self.in_planes = width
        self.conv1 = nn.Conv2d(3, width, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.layer1 = self._make_layer(block, width, num_blocks[0], stride=1)
        self.layer2 = self._make_layer(block, width * 2, num_blocks[1], stride=2)
        self.layer3 = self._make_layer(block, width * 4, num_blocks[2], stride=2)
        self.layer4 = self._make_layer(block, width * 8, num_blocks[3], stride=2)
        self.linear = nn.Linear(width * 8 * block.expansion, num_classes)

    def _make_layer(self, block, planes, num_blocks, stride):
        strides = [stride] + [1] * (num_blocks - 1)
        layers = []
        for stride in strides:
            layers.append(block(self.in_planes, planes, stride))
            self.in_planes = planes * block.expansion
        return nn.Sequential(*layers)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer4(self.layer3(self.layer2(self.layer1(out))))
        out = F.avg_pool2d(out, 2)
        out = out.view(out.size(0), -1)
        return self.linear(out)


def ResNet18():
    return ResNet(BasicBlock, [1, 1, 1, 1])  # ResNet18 has [2, 2, 2, 2] and width 64


def random_cifar(n, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n)
    images = rng.standard_normal((n, 3, 16, 16)).astype(np.float32)
    images[np.arange(n), labels % 3] += (labels[:, None, None] - 4.5) / 3
    return torch.utils.data.TensorDataset(torch.from_numpy(images), torch.from_numpy(labels))


def main(argv=()):
    parser = argparse.ArgumentParser(description="PyTorch CIFAR10 Training, reduced")
    parser.add_argument("--lr", default=0.1, type=float)
    parser.add_argument("--resume", "-r", action="store_true")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--save-dir", default=".")
    args = parser.parse_args(list(argv))
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    best_acc, start_epoch = 0, 0

    trainloader = torch.utils.data.DataLoader(random_cifar(32, 0), batch_size=16,
                                              shuffle=True, num_workers=0)
    testloader = torch.utils.data.DataLoader(random_cifar(16, 1), batch_size=16,
                                             shuffle=False)
    net = ResNet18().to(device)
    if device == "cuda":
        net = torch.nn.DataParallel(net)
        cudnn.benchmark = True
    ckpt = os.path.join(args.save_dir, "checkpoint", "ckpt.pth")
    if args.resume:
        checkpoint = torch.load(ckpt)
        net.load_state_dict(checkpoint["net"])
        best_acc, start_epoch = checkpoint["acc"], checkpoint["epoch"]

    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=200)
    losses = []
    for epoch in range(start_epoch, start_epoch + args.epochs):
        net.train()
        train_loss, correct, total = 0, 0, 0
        for batch_idx, (inputs, targets) in enumerate(trainloader):
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            outputs = net(inputs)
            loss = criterion(outputs, targets)
            loss.backward()
            optimizer.step()
            train_loss += loss.item()
            _, predicted = outputs.max(1)
            total += targets.size(0)
            correct += predicted.eq(targets).sum().item()
            print(f"batch {batch_idx + 1}/{len(trainloader)}, "
                  f"mean loss {train_loss / (batch_idx + 1):.3f}")
        losses.append(train_loss / (batch_idx + 1))
        print(f"epoch {epoch}: loss {losses[-1]:.3f}, train accuracy {100. * correct / total:.1f}% "
              f"of {total}")
        net.eval()
        correct = total = 0
        with torch.no_grad():
            for inputs, targets in testloader:
                inputs, targets = inputs.to(device), targets.to(device)
                _, predicted = net(inputs).max(1)
                total += targets.size(0)
                correct += predicted.eq(targets).sum().item()
        acc = 100. * correct / total
        if acc >= best_acc:
            state = {"net": net.state_dict(), "acc": acc, "epoch": epoch}
            os.makedirs(os.path.dirname(ckpt), exist_ok=True)
            torch.save(state, ckpt)
            best_acc = acc
        scheduler.step()
    checkpoint = torch.load(ckpt)
    net.load_state_dict(checkpoint["net"])
    assert checkpoint["acc"] == best_acc
    return losses


if __name__ == "__main__":
    main()
