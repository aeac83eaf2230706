"""Normalization layers by name: LayerNorm (Ba et al., 2016) and RMSNorm (Zhang & Sennrich,
2019, "Root Mean Square Layer Normalization").

``build_norm`` is the one place a norm's name becomes a module; both kinds are torch's own.
"""

from __future__ import annotations

from torch import nn

NORMS = ("layernorm", "rmsnorm")


def build_norm(kind: str, dim: int, eps: float, bias: bool) -> nn.Module:
    """A norm over the last ``dim`` features.

    - ``layernorm``: (x - mean(x)) / sqrt(var(x) + eps) * g + b (``b`` only with ``bias``).
    - ``rmsnorm``: x / sqrt(mean(x^2) + eps) * g. No centring and no bias (the paper's form,
      and CTranslate2's ``rms_norm=True``, whose LayerNormSpec has no ``beta``), so
      ``bias=True`` is refused rather than ignored.

    >>> build_norm("rmsnorm", 4, 1e-6, bias=False)
    RMSNorm((4,), eps=1e-06, elementwise_affine=True)
    """
    if kind == "layernorm":
        return nn.LayerNorm(dim, eps=eps, bias=bias)
    if kind == "rmsnorm":
        if bias:
            raise ValueError("rmsnorm has no bias (Zhang & Sennrich 2019): pass bias=False")
        return nn.RMSNorm(dim, eps=eps)
    raise ValueError(f"unknown norm '{kind}' (known: {', '.join(NORMS)})")
