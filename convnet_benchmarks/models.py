"""The convnet-benchmarks networks, written once for any torch-like library.

`lib` is a module with torch's API: `cltensor` or `torch` (lib.nn.Conv2d, lib.nn.Sequential, ...,
and lib.cat), so the two frameworks run exactly the same network. The definitions follow
convnet-benchmarks (see the project's anchors): AlexNet ("one weird trick"), Overfeat (fast),
VGG-A, GoogLeNet v1 without LRN.
"""

# model name -> (input channels, height and width, default batch on GPUs, default batch on CPUs)
INPUTS = {
    "alexnet": (3, 224, 128, 8),
    "overfeat": (3, 231, 128, 4),
    "vgg_a": (3, 224, 64, 2),
    "googlenet": (3, 224, 128, 4),
}


def alexnet(lib):
    nn = lib.nn
    return nn.Sequential(
        nn.Conv2d(3, 64, 11, stride=4, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(),
        nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(),
        nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Flatten(),
        nn.Linear(256 * 6 * 6, 4096), nn.ReLU(),
        nn.Linear(4096, 4096), nn.ReLU(),
        nn.Linear(4096, 1000))


def overfeat(lib):
    nn = lib.nn
    return nn.Sequential(
        nn.Conv2d(3, 96, 11, stride=4), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Conv2d(96, 256, 5), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Conv2d(256, 512, 3, padding=1), nn.ReLU(),
        nn.Conv2d(512, 1024, 3, padding=1), nn.ReLU(),
        nn.Conv2d(1024, 1024, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Flatten(),
        nn.Linear(1024 * 6 * 6, 3072), nn.ReLU(),
        nn.Linear(3072, 4096), nn.ReLU(),
        nn.Linear(4096, 1000))


def vgg_a(lib):
    nn = lib.nn
    layers, cin = [], 3
    for v in (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"):
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += [nn.Conv2d(cin, v, 3, padding=1), nn.ReLU()]
            cin = v
    return nn.Sequential(*layers, nn.Flatten(),
                         nn.Linear(512 * 7 * 7, 4096), nn.ReLU(),
                         nn.Linear(4096, 4096), nn.ReLU(),
                         nn.Linear(4096, 1000))


# GoogLeNet's inception blocks: (cin; c1; c3r, c3; c5r, c5; pool projection)
INCEPTIONS = {
    "3a": (192, 64, 96, 128, 16, 32, 32), "3b": (256, 128, 128, 192, 32, 96, 64),
    "4a": (480, 192, 96, 208, 16, 48, 64), "4b": (512, 160, 112, 224, 24, 64, 64),
    "4c": (512, 128, 128, 256, 24, 64, 64), "4d": (512, 112, 144, 288, 32, 64, 64),
    "4e": (528, 256, 160, 320, 32, 128, 128), "5a": (832, 256, 160, 320, 32, 128, 128),
    "5b": (832, 384, 192, 384, 48, 128, 128),
}


def _conv_relu(nn, cin, cout, k, **kw):
    return [nn.Conv2d(cin, cout, k, **kw), nn.ReLU()]


def inception_class(lib):
    """An Inception module class for `lib` (each framework needs its own Module subclass)."""
    nn = lib.nn

    class Inception(nn.Module):
        def __init__(self, cin, c1, c3r, c3, c5r, c5, proj):
            super().__init__()
            self.b1 = nn.Sequential(*_conv_relu(nn, cin, c1, 1))
            self.b3 = nn.Sequential(*_conv_relu(nn, cin, c3r, 1), *_conv_relu(nn, c3r, c3, 3, padding=1))
            self.b5 = nn.Sequential(*_conv_relu(nn, cin, c5r, 1), *_conv_relu(nn, c5r, c5, 5, padding=2))
            self.bp = nn.Sequential(nn.MaxPool2d(3, 1, padding=1), *_conv_relu(nn, cin, proj, 1))

        def forward(self, x):
            return lib.cat([self.b1(x), self.b3(x), self.b5(x), self.bp(x)], 1)

    return Inception


def googlenet(lib):
    nn = lib.nn
    inception = inception_class(lib)
    blocks = {name: inception(*cfg) for name, cfg in INCEPTIONS.items()}

    def pool():
        return nn.MaxPool2d(3, 2, ceil_mode=True)

    return nn.Sequential(
        *_conv_relu(nn, 3, 64, 7, stride=2, padding=3), pool(),
        *_conv_relu(nn, 64, 64, 1), *_conv_relu(nn, 64, 192, 3, padding=1), pool(),
        blocks["3a"], blocks["3b"], pool(),
        blocks["4a"], blocks["4b"], blocks["4c"], blocks["4d"], blocks["4e"], pool(),
        blocks["5a"], blocks["5b"], nn.AvgPool2d(7), nn.Flatten(),
        nn.Linear(1024, 1000))


MODELS = {"alexnet": alexnet, "overfeat": overfeat, "vgg_a": vgg_a, "googlenet": googlenet}

