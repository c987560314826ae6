"""The convnet-benchmarks networks (AlexNet, Overfeat, VGG-A, GoogLeNet) timed with cltensor
and PyTorch side by side: python -m convnet_benchmarks --help."""
