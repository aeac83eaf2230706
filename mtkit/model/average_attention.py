"""The Average Attention Network decoder sublayer (Zhang, Xiong & Su, 2018, "Accelerating Neural
Transformer via an Average Attention Network"), in place of decoder self-attention.

For decoder inputs y_1..y_T of the sublayer (eqs. 1-2 of the paper):

    g_j = FFN((y_1 + ... + y_j) / j)                  average, then a ReLU feed-forward net
    i_j, f_j = sigmoid(W [y_j; g_j] + b)              input and forget gates, W: 2D -> 2D
    h_j = i_j * y_j + f_j * g_j

The residual connection and layer norm around h (eq. 3) belong to the decoder layer, as for
any sublayer. Training uses the parallel form (a cumulative sum divided by 1..T, the paper's
mask matrix of Figure 3 without the T x T matmul); decoding keeps a running sum per row, so a
step costs O(1) in the target length, against O(t) for self-attention's growing cache.

The FFN is on by default, as the paper describes it, d_model -> ffn_dim -> d_model with ReLU
and no residual of its own (the authors' code: ``ffn_layer`` over the average with
``filter_size``); ``use_ffn=False`` gives the variant their code and OpenNMT-py
(``aan_useffn``) default to. Neither CTranslate2 nor Hugging Face's Marian can run this
sublayer: an exporter must refuse it by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from mtkit.model.feedforward import FeedForward


def cumulative_average(x: Tensor) -> Tensor:
    """(B, T, D) -> (B, T, D): row j is the mean of rows 1..j.

    >>> cumulative_average(torch.tensor([[[2.0], [4.0], [0.0]]])).flatten().tolist()
    [2.0, 3.0, 2.0]
    """
    counts = torch.arange(1, x.shape[1] + 1, device=x.device, dtype=x.dtype)[:, None]  # (T, 1)
    return x.cumsum(dim=1) / counts


@dataclass
class AverageState:
    """Decoding state of one average-attention sublayer: the running sum of its inputs.

    Speculative decoding (:meth:`AverageAttention.steps`, several positions per call) keeps the
    sum after each such position in ``saved``, so that ``truncate`` can roll back to any of
    them; ``truncate`` then forgets them (one step at a time, :meth:`AverageAttention.step`,
    saves nothing: plain decoding holds one D-vector per row, as ever)."""

    total: Tensor  # (R, 1, D), R rows being decoded
    steps: int = 0
    saved: dict[int, Tensor] = field(default_factory=dict)  # steps -> total (R, 1, D)

    @classmethod
    def start(
        cls,
        rows: int,
        dim: int,
        device: torch.device | None = None,
        dtype: torch.dtype | None = None,
    ) -> AverageState:
        """The state before the first step: a zero sum."""
        return cls(torch.zeros(rows, 1, dim, device=device, dtype=dtype))

    def reorder(self, rows: Tensor) -> None:
        """Keep rows ``rows`` (R',) in that order: beams moving, sentences leaving."""
        self.total = self.total.index_select(0, rows)
        self.saved = {n: t.index_select(0, rows) for n, t in self.saved.items()}

    def truncate(self, length: int) -> None:
        """Back to the sum after ``length`` steps: now, or one that :meth:`AverageAttention.steps`
        saved since the last truncation."""
        if length != self.steps:
            if length not in self.saved:
                raise ValueError(
                    f"average attention cannot go back from {self.steps} steps to "
                    f"{length} (saved: {sorted(self.saved)})"
                )
            self.total, self.steps = self.saved[length], length
        self.saved = {}

    def nbytes(self) -> int:
        """Bytes held: one D-vector per row, whatever the number of steps."""
        return self.total.nbytes + sum(t.nbytes for t in self.saved.values())


class AverageAttention(nn.Module):
    """The AAN sublayer: ``forward`` for whole sequences, ``step`` for one decoding step.
    Module names: ``ffn.fc1``, ``ffn.fc2`` (when ``use_ffn``) and ``gate`` ([i; f] = gate)."""

    def __init__(
        self,
        d_model: int,
        ffn_dim: int,
        dropout: float = 0.0,
        bias: bool = True,
        use_ffn: bool = True,
    ) -> None:
        super().__init__()
        self.d_model = d_model
        # dropout is the FFN's, on its hidden ReLU activations
        self.ffn = FeedForward(d_model, ffn_dim, "relu", bias, dropout) if use_ffn else None
        self.gate = nn.Linear(2 * d_model, 2 * d_model, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        """x (B, T, D), position j seeing inputs 1..j only -> (B, T, D)."""
        return self._gated(x, cumulative_average(x))

    def step(self, x: Tensor, state: AverageState) -> Tensor:
        """x (R, 1, D), the next position of each row; adds it to ``state`` -> (R, 1, D)."""
        state.total = state.total + x
        state.steps += 1
        return self._gated(x, state.total / state.steps)

    def steps(self, x: Tensor, state: AverageState) -> Tensor:
        """x (R, k, D), the next k positions of each row -> (R, k, D), as k calls of
        :meth:`step` (the same running sums, added in the same order), each sum saved for
        :meth:`AverageState.truncate`."""
        averages = []
        for i in range(x.shape[1]):
            state.total = state.total + x[:, i : i + 1]
            state.steps += 1
            state.saved[state.steps] = state.total
            averages.append(state.total / state.steps)
        return self._gated(x, torch.cat(averages, dim=1))

    def start_state(self, rows: int, like: Tensor) -> AverageState:
        """An empty state for ``rows`` rows on ``like``'s device and dtype."""
        return AverageState.start(rows, self.d_model, like.device, like.dtype)

    def start(self, like: Tensor, rows: int, max_len: int) -> AverageState:
        """:meth:`start_state` with self-attention's ``start`` signature (any ``max_len``: the
        state does not grow with the steps)."""
        return self.start_state(rows, like)

    def _gated(self, y: Tensor, average: Tensor) -> Tensor:
        g = average if self.ffn is None else self.ffn(average)  # (..., D)
        input_gate, forget_gate = self.gate(torch.cat((y, g), dim=-1)).sigmoid().chunk(2, dim=-1)
        return input_gate * y + forget_gate * g
