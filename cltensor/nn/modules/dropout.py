"""Dropout layers: Dropout, Dropout1d, Dropout2d, Dropout3d, AlphaDropout, FeatureAlphaDropout."""
from .. import functional as F
from .module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"]


class Dropout(Module):
    """In training, zeroes each element with probability p and scales the rest by 1/(1-p);
    the identity in eval mode.

    Example:
        drop = nn.Dropout(0.2); drop.eval(); drop(x)   # x unchanged
    """

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(Dropout):
    """Dropout of whole channels of (N, C, L) or (C, L) input."""

    def forward(self, input):
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(Dropout):
    """Dropout of whole channels (feature maps) of (N, C, H, W) or (C, H, W) input.

    Example:
        drop = nn.Dropout2d(0.1); y = drop(cltensor.randn(8, 16, 5, 5))
    """

    def forward(self, input):
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(Dropout):
    """Dropout of whole channels of (N, C, D, H, W) or (C, D, H, W) input."""

    def forward(self, input):
        return F.dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(Dropout):
    """Dropout that keeps a SELU network's zero mean and unit variance (training only)."""

    def forward(self, input):
        return F.alpha_dropout(input, self.p, self.training, self.inplace)


class FeatureAlphaDropout(Dropout):
    """AlphaDropout of whole channels of (N, C, *) input."""

    def forward(self, input):
        return F.feature_alpha_dropout(input, self.p, self.training, self.inplace)


_DropoutNd = Dropout  # torch.nn.modules.dropout's name for the dropout layers' base
