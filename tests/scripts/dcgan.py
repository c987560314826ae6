"""pytorch/examples dcgan, reduced: a generator and a discriminator of 16x16 images trained
against each other with BCELoss on random "real" images."""
import argparse
import os
import random

import numpy as np

import cltensor as torch
import cltensor.backends.cudnn as cudnn
import cltensor.nn as nn
import cltensor.optim as optim
import cltensor.utils.data

nz, ngf, ndf, nc = 8, 8, 8, 3


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        torch.nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        torch.nn.init.normal_(m.weight, 1.0, 0.02)
        torch.nn.init.zeros_(m.bias)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False),  # -> 4 x 4
            nn.BatchNorm2d(ngf * 4),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),  # -> 8 x 8
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False),  # -> 16 x 16
            nn.Tanh(),
        )

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),  # -> 8 x 8
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),  # -> 4 x 4
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False),
            nn.Sigmoid(),
        )

    def forward(self, input):
        return self.main(input).view(-1, 1).squeeze(1)


def main(argv=()):
    parser = argparse.ArgumentParser(description="DCGAN example, reduced")
    parser.add_argument("--niter", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.0002)
    parser.add_argument("--beta1", type=float, default=0.5)
    parser.add_argument("--manualSeed", type=int, default=999)
    parser.add_argument("--save-dir", default=".")
    opt = parser.parse_args(list(argv))
    random.seed(opt.manualSeed)
    torch.manual_seed(opt.manualSeed)
    cudnn.benchmark = True
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")

    rng = np.random.default_rng(0)
    real_images = np.tanh(rng.standard_normal((8, nc, 16, 16))).astype(np.float32)
    dataset = torch.utils.data.TensorDataset(torch.from_numpy(real_images),
                                             torch.zeros(8, dtype=torch.int64))
    dataloader = torch.utils.data.DataLoader(dataset, batch_size=8, shuffle=True)

    netG = Generator().to(device)
    netG.apply(weights_init)
    netD = Discriminator().to(device)
    netD.apply(weights_init)
    criterion = nn.BCELoss()
    fixed_noise = torch.randn(8, nz, 1, 1, device=device)
    real_label, fake_label = 1, 0
    optimizerD = optim.Adam(netD.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))

    losses = []
    for epoch in range(opt.niter):
        for i, data in enumerate(dataloader, 0):
            # the discriminator: real images towards 1, generated ones towards 0
            netD.zero_grad()
            real_cpu = data[0].to(device)
            batch_size = real_cpu.size(0)
            label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype, device=device)
            output = netD(real_cpu)
            errD_real = criterion(output, label)
            errD_real.backward()
            D_x = output.mean().item()
            noise = torch.randn(batch_size, nz, 1, 1, device=device)
            fake = netG(noise)
            label.fill_(fake_label)
            output = netD(fake.detach())
            errD_fake = criterion(output, label)
            errD_fake.backward()
            D_G_z1 = output.mean().item()
            errD = errD_real + errD_fake
            optimizerD.step()
            # the generator: its images should pass for real
            netG.zero_grad()
            label.fill_(real_label)
            output = netD(fake)
            errG = criterion(output, label)
            errG.backward()
            D_G_z2 = output.mean().item()
            optimizerG.step()
            losses.append(errD_real.item())  # D learning the real images
            print(f"epoch {epoch} batch {i}: discriminator loss {errD.item():.4f}, generator "
                  f"loss {errG.item():.4f}; D says {D_x:.3f} on real images, {D_G_z1:.3f} then "
                  f"{D_G_z2:.3f} on generated ones")
        fake = netG(fixed_noise)
        assert fake.shape == (8, nc, 16, 16)
        torch.save(netG.state_dict(), os.path.join(opt.save_dir, f"netG_epoch_{epoch}.pth"))
        torch.save(netD.state_dict(), os.path.join(opt.save_dir, f"netD_epoch_{epoch}.pth"))
    return losses


if __name__ == "__main__":
    main()
