"""What an engine gives back, and how it reports: a line's hypotheses (:class:`Translation`),
a progress bar's protocol and the one warning format; no engine in here, so that what wraps an
engine's search (:mod:`mtkit.engines.guard`) needs nothing of :mod:`mtkit.engines.base`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Protocol

from mtkit.engines.alignment import Alignment
from mtkit.engines.confidence import Confidence


@dataclass(frozen=True)
class Translation:
    """One hypothesis: detokenized ``text`` (one line), its ranking ``score`` (length-penalised),
    ``logprob`` (summed log-probabilities incl. EOS; NaN where an engine cannot tell) and
    ``tokens``, the target pieces generated (EOS not counted); ``alignment`` (when asked for)
    the Moses word pairs between the line and ``text`` (:mod:`mtkit.engines.alignment`);
    ``confidence`` (when asked for) its piece and word log-probabilities
    (:mod:`mtkit.engines.confidence`); ``guard``, how the decoding guard translated the line
    when its translation degenerated (:mod:`mtkit.engines.guard`)."""

    text: str
    score: float
    logprob: float
    tokens: int = 0
    alignment: Alignment | None = None  # asked for (SearchConfig.alignment): word pairs
    confidence: Confidence | None = None  # asked for (SearchConfig.scores)
    # the decoding guard (mtkit.engines.guard) replaced the line's degenerate translation:
    # "lowercased", "split" or "squeezed"; None where it did not
    guard: str | None = None
    # the search stopped it in a loop (why, in the guard's words): degenerate, whatever its
    # text; the guard translates its line again (mtkit.decoding.stepper.Stepper.stop_loops)
    stopped: str | None = None


class Progress(Protocol):
    def update(self, n: int) -> object: ...


def warn(message: str) -> None:
    print(f"mtkit translate: warning: {message}", file=sys.stderr, flush=True)
