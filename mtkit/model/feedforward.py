"""Position-wise feed-forward networks: the Transformer's ReLU FFN (Vaswani et al., 2017), GELU
(Hendrycks & Gimpel, 2016), SiLU (Swish with beta 1, Ramachandran et al., 2017: what OPUS-MT's
Marian models call ``swish``), and the gated SwiGLU / GEGLU (Shazeer, 2020, "GLU Variants
Improve Transformer").

Module names are fixed for checkpoints and exporters: ``fc1`` (d_model -> hidden), ``fc2``
(hidden -> d_model), ``gate`` (d_model -> hidden, gated kinds only) and ``activation_dropout``.
The ReLU kind has exactly the state dict of ``mtkit.model.layers.FeedForward``. In CTranslate2's
``FeedForwardSpec`` (``ffn_glu=True`` for the gated kinds), ``gate`` is ``linear_0`` (the one the
activation is applied to), ``fc1`` is ``linear_0_noact`` and ``fc2`` is ``linear_1``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch.nn.functional as F
from torch import Tensor, nn

from mtkit.model.dropout import Dropout

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": F.relu,
    "gelu": F.gelu,  # exact (erf) GELU, CTranslate2's Activation.GELU
    "silu": F.silu,  # x * sigmoid(x), ungated: Marian's "swish", CTranslate2's Activation.SWISH
    "swiglu": F.silu,  # Swish with beta = 1, CTranslate2's Activation.SWISH
    "geglu": F.gelu,
}
GATED = frozenset({"swiglu", "geglu"})


def gated_hidden_size(ffn_dim: int) -> int:
    """Hidden width of a gated FFN with (about) the parameters of an ungated one of ``ffn_dim``.

    A gated FFN has three d x h' matrices where the ungated one has two d x h, so
    3 d h' = 2 d h gives h' = 2h / 3 (Shazeer 2020, section 2), rounded (halves up) to the
    nearest multiple of 8 (at least 8) to keep matrix shapes friendly to vectorized kernels.

    >>> gated_hidden_size(1024), gated_hidden_size(2048), gated_hidden_size(3072)
    (680, 1368, 2048)
    """
    return max(8, 8 * ((2 * ffn_dim + 12) // 24))  # 8 * round(2h / 3 / 8)


class FeedForward(nn.Module):
    """fc2(dropout(act(fc1(x)))) for relu/gelu/silu; fc2(dropout(act(gate(x)) * fc1(x))) for the
    gated kinds (Shazeer 2020, eq. 6: SwiGLU with act = Swish_1 = SiLU, GEGLU with GELU), whose
    hidden width is ``gated_hidden_size(ffn_dim)``. x (..., D) -> (..., D)."""

    def __init__(
        self,
        d_model: int,
        ffn_dim: int,
        activation: str = "relu",
        bias: bool = True,
        activation_dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            known = ", ".join(ACTIVATIONS)
            raise ValueError(f"unknown activation '{activation}' (known: {known})")
        self.activation = activation
        self.act = ACTIVATIONS[activation]
        hidden = gated_hidden_size(ffn_dim) if activation in GATED else ffn_dim
        self.fc1 = nn.Linear(d_model, hidden, bias=bias)  # the value ("up") half when gated
        self.gate = nn.Linear(d_model, hidden, bias=bias) if activation in GATED else None
        self.fc2 = nn.Linear(hidden, d_model, bias=bias)
        self.activation_dropout = Dropout(activation_dropout)

    def forward(self, x: Tensor) -> Tensor:
        if self.gate is None:
            h = self.act(self.fc1(x))  # (..., ffn_dim)
        else:
            h = self.act(self.gate(x)) * self.fc1(x)  # (..., gated_hidden_size(ffn_dim))
        return self.fc2(self.activation_dropout(h))
