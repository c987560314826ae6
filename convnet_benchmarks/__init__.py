"""The convnet-benchmarks networks (AlexNet, Overfeat, VGG-A, GoogLeNet) timed with cltensor
and, side by side, PyTorch and tinygrad: python -m convnet_benchmarks --help."""
