"""pytorch/examples vae, reduced: a fully connected VAE on random 8x8 "images" in [0, 1]."""
import argparse
import os

import numpy as np

import cltensor as torch
import cltensor.utils.data
from cltensor import nn, optim
from cltensor.nn import functional as F


class VAE(nn.Module):
    def __init__(self, pixels=64, hidden=32, latent=4):
        super().__init__()
        self.pixels = pixels
        self.fc1 = nn.Linear(pixels, hidden)
        self.fc21 = nn.Linear(hidden, latent)
        self.fc22 = nn.Linear(hidden, latent)
        self.fc3 = nn.Linear(latent, hidden)
        self.fc4 = nn.Linear(hidden, pixels)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, self.pixels))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    bce = F.binary_cross_entropy(recon_x, x.view(-1, recon_x.shape[1]), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def main(argv=()):
    parser = argparse.ArgumentParser(description="VAE example, reduced")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--save-dir", default=".")
    args = parser.parse_args(list(argv))
    torch.manual_seed(1)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    rng = np.random.default_rng(0)
    images = (rng.random((32, 1, 8, 8)) < 0.3).astype(np.float32)
    train_loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.from_numpy(images)), batch_size=16, shuffle=True)

    model = VAE().to(device)
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for epoch in range(1, args.epochs + 1):
        model.train()
        train_loss = 0
        for (data,) in train_loader:
            data = data.to(device)
            optimizer.zero_grad()
            recon_batch, mu, logvar = model(data)
            loss = loss_function(recon_batch, data, mu, logvar)
            loss.backward()
            train_loss += loss.item()
            optimizer.step()
        losses.append(train_loss / len(train_loader.dataset))
        print(f"epoch {epoch}: mean loss per image {losses[-1]:.4f}")
        with torch.no_grad():
            sample = model.decode(torch.randn(8, 4).to(device)).cpu()
            assert sample.shape == (8, 64)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()},
               os.path.join(args.save_dir, "vae.pt"))
    return losses


if __name__ == "__main__":
    main()
