"""The PyTorch "Training a Classifier" (CIFAR-10) tutorial, reduced: LeNet-style Net on random
32x32 images, SGD with momentum, the saved weights reloaded for per-class accuracy."""
import argparse
import os

import numpy as np

import cltensor as torch
import cltensor.nn as nn
import cltensor.nn.functional as F
import cltensor.optim as optim
import cltensor.utils.data

classes = ("plane", "car", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)  # (N, 16, 5, 5) -> (N, 400)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def fake_cifar(n, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n)
    images = rng.uniform(-1, 1, (n, 3, 32, 32)).astype(np.float32)
    images[np.arange(n), :, labels * 3, :] = 1.0
    return torch.utils.data.TensorDataset(torch.from_numpy(images), torch.from_numpy(labels))


def main(argv=()):
    parser = argparse.ArgumentParser(description="CIFAR-10 tutorial, reduced")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--save-dir", default=".")
    args = parser.parse_args(list(argv))
    torch.manual_seed(0)
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    print(device)
    trainloader = torch.utils.data.DataLoader(fake_cifar(16, 0), batch_size=4, shuffle=True,
                                              num_workers=0)
    testloader = torch.utils.data.DataLoader(fake_cifar(8, 1), batch_size=4, shuffle=False)
    net = Net()
    net.to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    losses = []
    for epoch in range(args.epochs):
        running_loss = 0.0
        for i, data in enumerate(trainloader, 0):
            inputs, labels = data[0].to(device), data[1].to(device)
            optimizer.zero_grad()
            outputs = net(inputs)
            loss = criterion(outputs, labels)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
            if i % 2 == 1:
                print(f"epoch {epoch + 1} batch {i + 1:3d}: mean loss {running_loss / (i + 1):.3f}")
        losses.append(running_loss / len(trainloader))
        print(f"epoch {epoch + 1}: mean loss {losses[-1]:.3f}")
    print("trained")

    PATH = os.path.join(args.save_dir, "cifar_net.pth")
    torch.save(net.state_dict(), PATH)
    net = Net()
    net.load_state_dict(torch.load(PATH, weights_only=True))
    net.to(device)
    correct_pred = {classname: 0 for classname in classes}
    total_pred = {classname: 0 for classname in classes}
    with torch.no_grad():
        for images, labels in testloader:
            images, labels = images.to(device), labels.to(device)
            _, predictions = torch.max(net(images), 1)
            for label, prediction in zip(labels, predictions):
                if label == prediction:
                    correct_pred[classes[label]] += 1
                total_pred[classes[label]] += 1
    for classname, correct_count in correct_pred.items():
        if total_pred[classname]:
            accuracy = 100 * float(correct_count) / total_pred[classname]
            print(f"{classname:5s}: {accuracy:5.1f}% right")
    return losses


if __name__ == "__main__":
    main()
