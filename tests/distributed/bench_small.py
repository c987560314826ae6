"""Run under mpirun: `python -m convnet_benchmarks --distributed` on a small registered network
(the convnets take minutes on PoCL). Usage: bench_small.py JSON_PATH."""
import sys

from convnet_benchmarks import models
from convnet_benchmarks.__main__ import main


def small(lib):
    nn = lib.nn
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 8 * 8, 5))


if __name__ == "__main__":
    models.MODELS["small"] = small
    models.INPUTS["small"] = (3, 8, 2, 2)
    sys.exit(main(["--model", "small", "--iterations", "2", "--distributed", "--json",
                   sys.argv[1]]))
