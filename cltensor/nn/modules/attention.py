"""The attention layers at the path they had before torch's layout was followed:
MultiheadAttention (now in activation.py) and the Transformer layers (transformer.py)."""
from ..functional.attention import scaled_dot_product_attention  # noqa: F401
from .activation import MultiheadAttention  # noqa: F401
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,  # noqa: F401
                          TransformerEncoder, TransformerEncoderLayer)

# NOTE: nn exports these names from activation and transformer, not from here
__all__ = ["MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder",
           "TransformerDecoderLayer", "TransformerDecoder", "Transformer"]
