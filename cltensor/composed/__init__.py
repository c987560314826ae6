"""Ops composed of the differentiable tensor ops (above autograd): one module per job, with
torch's names; cltensor/__init__.py exports their functions, composed_methods.py their methods."""
