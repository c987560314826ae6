"""(in progress)"""
__all__ = []
TENSOR_METHODS = {}
