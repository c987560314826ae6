"""cltensor.onnx: present so that torch scripts importing torch.onnx load; there is no exporter.

cltensor runs its layers as OpenCL kernels and records no graph an ONNX file could describe.
To get an ONNX model, save the weights (cltensor.save writes torch's format) and export the same
model from PyTorch.
"""

__all__ = ["export", "is_in_onnx_export"]


def export(*args, **kwargs):
    """Refused: cltensor has no ONNX exporter.

    Raises:
        NotImplementedError naming what to do instead.
    """
    raise NotImplementedError(
        "cltensor.onnx.export: cltensor has no ONNX exporter. Save the weights with "
        "cltensor.save(model.state_dict(), 'model.pt'), load them into the same model in "
        "PyTorch (torch.load reads the file) and call torch.onnx.export there")


def is_in_onnx_export():
    """False: no export is ever running (model code asks this to take a traceable path)."""
    return False
