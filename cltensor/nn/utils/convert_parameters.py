"""parameters_to_vector / vector_to_parameters, as torch.nn.utils: a model's parameters as one
flat vector and back (evolution strategies, second-order methods, weight averaging)."""
from ...autograd.functions.shape import Cat
from ...tensor import ClTensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def tensor_list(parameters, op):
    """A tensor or an iterable of tensors as a list, or a TypeError naming `op`."""
    params = [parameters] if isinstance(parameters, ClTensor) else list(parameters)
    for p in params:
        if not isinstance(p, ClTensor):
            raise TypeError(f"{op}: expected tensors (parameters), got {type(p).__name__}")
    return params


def _checked(parameters, op):
    params = tensor_list(parameters, op)
    if len({p.device for p in params}) > 1:
        raise ValueError(f"{op}: the parameters are on different devices")
    return params


def parameters_to_vector(parameters):
    """One 1-d tensor of every parameter, flattened and concatenated in order (a copy that
    records the graph, as torch's).

    Example:
        vec = nn.utils.parameters_to_vector(model.parameters())
    """
    params = _checked(parameters, "parameters_to_vector")
    if not params:
        raise ValueError("parameters_to_vector: no parameters given")
    return Cat.apply(0, *[p.reshape(-1) for p in params])


def vector_to_parameters(vec, parameters):
    """Set the parameters' data from consecutive slices of `vec` (as torch: each parameter's
    data becomes a view of vec).

    Raises:
        TypeError unless vec is a tensor; ValueError when its length is not the parameters'
        total size or it is not 1-d.
    """
    if not isinstance(vec, ClTensor):
        raise TypeError(f"vector_to_parameters: expected a tensor, but got {type(vec).__name__}")
    params = _checked(parameters, "vector_to_parameters")
    total = sum(p.numel() for p in params)
    if vec.ndim != 1 or vec.numel() != total:
        raise ValueError(f"vector_to_parameters: vec must be 1-d with {total} elements (the "
                         f"parameters' total size), got shape {tuple(vec.shape)}")
    start = 0
    for p in params:
        p.data = vec[start:start + p.numel()].view_as(p).data
        start += p.numel()
