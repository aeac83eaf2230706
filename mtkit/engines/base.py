"""What every decoding engine offers, and the text handling they share.

An engine translates lines; for each line it returns up to ``nbest`` :class:`Translation`
objects, best first, or none for a line with nothing to translate (empty, whitespace only, or
no sentencepiece pieces). Search options may change per call (the server batches requests with
equal options); an engine refuses options it cannot honour with a one-line error.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from mtkit.config import SearchConfig, TranslateConfig
from mtkit.cpu import Resolved
from mtkit.data.batching import token_batches
from mtkit.data.tags import tag_lines
from mtkit.data.tokenizer import Tokenizer


@dataclass(frozen=True)
class Translation:
    """One hypothesis: detokenized ``text`` (one line), its ranking ``score`` (length-penalised),
    ``logprob`` (summed log-probabilities incl. EOS; NaN where an engine cannot tell) and
    ``tokens``, the target pieces generated (EOS not counted)."""

    text: str
    score: float
    logprob: float
    tokens: int = 0


class Progress(Protocol):
    def update(self, n: int) -> object: ...


class Engine(Protocol):
    """A loaded model that translates lines of text."""

    config: TranslateConfig  # runtime settings and the default search

    def check(self, search: SearchConfig) -> None:
        """Refuse (MtkitError, one line) search options this engine cannot honour."""

    def translate(
        self,
        lines: Sequence[str],
        search: SearchConfig | None = None,
        first_number: int = 1,
        progress: Progress | None = None,
    ) -> list[list[Translation]]:
        """Per line, up to ``search.nbest`` translations, best first; [] for a line with
        nothing to translate. ``first_number`` numbers the lines in warnings; ``progress`` is
        told how many lines each batch finished."""


def warn(message: str) -> None:
    print(f"mtkit translate: warning: {message}", file=sys.stderr, flush=True)


def announce_dtype(asked: str, resolved: Resolved) -> None:
    """The one line saying what ``--dtype auto`` chose and why; the bf16 emulation warning."""
    if resolved.warning:
        warn(resolved.warning)
    if asked == "auto":
        print(f"mtkit translate: dtype {resolved.name} ({resolved.reason})", file=sys.stderr,
              flush=True)  # fmt: skip


def encode_sources(
    tokenizer: Tokenizer, lines: Sequence[str], cap: int, first_number: int = 1,
    tgt_lang: str = "",
) -> list[list[int]]:  # fmt: skip
    """Piece ids per line (no EOS), cut to ``cap`` pieces with a warning naming the line; []
    for lines with nothing to translate. Unpaired surrogates become U+FFFD first. A
    multilingual model's lines get their target-language tag (:func:`tag_lines`)."""
    lines = tag_lines(lines, tgt_lang, tokenizer.tags, first_number)
    texts = [line.encode("utf-8", "replace").decode("utf-8") for line in lines]
    ids = tokenizer.encode([text if text.strip() else "" for text in texts])
    for number, row in enumerate(ids, start=first_number):
        if len(row) > cap:
            warn(f"line {number}: {len(row)} pieces, truncated to the first {cap} "
                 "(--max-input-tokens)")  # fmt: skip
    return [row[:cap] for row in ids]


def source_batches(
    sources: list[list[int]], max_tokens: int, progress: Progress | None = None
) -> Iterator[list[int]]:
    """Indices of the non-empty ``sources`` in batches of at most ``max_tokens`` tokens (EOS
    and padding counted), longest first; ``progress`` hears of every line, blank ones last."""
    todo = [i for i, row in enumerate(sources) if row]
    for batch in token_batches([len(sources[i]) + 1 for i in todo], max_tokens):
        yield [todo[j] for j in batch]
        if progress is not None:
            progress.update(len(batch))
    if progress is not None:
        progress.update(len(sources) - len(todo))


def one_line(text: str) -> str:
    """A translation on one line: CR and LF that a model might produce become spaces."""
    return text.replace("\r", " ").replace("\n", " ")


def best_texts(results: list[list[Translation]]) -> list[str]:
    """The best translation of each line, "" for lines with nothing to translate."""
    return [hyps[0].text if hyps else "" for hyps in results]
