"""Training-time augmentation: each epoch, some pairs replaced by modified ones, reproducibly.

Which pairs change, and how, is a pure function of (seed, epoch, pair index), drawn before the
epoch is cut into batches: the modified pairs' lengths are known to the batching (a batch never
exceeds ``max_tokens``), and a resumed run rebuilds the very same epoch from its checkpoint's
(epoch, consumed) as today. The dataset stays as `mtkit prepare` wrote it: a chosen pair is
decoded to text with the dataset's own sentencepiece models, modified
(:mod:`mtkit.data.augment`), and encoded again by the same models.

Per pair, in order, each with its probability (:class:`mtkit.config.AugmentConfig`):

1. ``noise``: the pair becomes a line of emoji, symbols and numbers on both sides (and nothing
   below applies);
2. ``merge``: the pair and the next 1-3 pairs of the corpus (of the same direction) are joined
   into one, and for half of such merges the source sentences lose their final punctuation
   (run-on text whose translation keeps every sentence);
3. one case change at most: ``uppercase`` (both sides), ``titlecase`` (both sides) or
   ``lowercase`` (the source only: the model learns to restore the target's case);
4. ``typos`` in the source.

A modified pair whose pieces would not fit (longer than ``max_pieces`` on either side) keeps its
original form. The pairs merged into another still appear on their own as well.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mtkit.config import AugmentConfig
from mtkit.data import augment as modify
from mtkit.data.binarized import ParallelData
from mtkit.data.tokenizer import Tokenizer

SALT = 0xA06  # keeps augmentation's draws apart from the batch order's


@dataclass
class Change:
    """What happens to one pair in an epoch (see the module docstring)."""

    index: int
    noise: bool = False
    merged: int = 1  # pairs joined, this one first
    strip: bool = False  # merged without final punctuation
    case: str = ""  # uppercase | titlecase | lowercase | ""
    typos: bool = False


def pair_rng(seed: int, epoch: int, index: int) -> random.Random:
    """The random stream of one pair in one epoch."""
    return random.Random((seed * 1_000_003 + epoch) * 1_000_000_007 + index)


def plan_changes(
    n: int,
    config: AugmentConfig,
    seed: int,
    epoch: int,
    ranges: Sequence[tuple[int, int]] = (),
) -> list[Change]:
    """The changes of an epoch over ``n`` pairs, by pair index (pairs left alone omitted).
    ``ranges``: each direction's [start, stop), which merges do not cross."""
    # per pair: noise, merge, case, typos, how many merged, whether without final punctuation
    draws = np.random.default_rng([seed, epoch, SALT]).random((n, 6))
    case_edges = np.cumsum([config.uppercase, config.titlecase, config.lowercase])
    stops = np.full(n, n)
    for start, stop in ranges:
        stops[start:stop] = stop
    chosen = (
        (draws[:, 0] < config.noise)
        | (draws[:, 1] < config.merge)
        | (draws[:, 2] < case_edges[-1])
        | (draws[:, 3] < config.typos)
    )
    changes = []
    for i in np.flatnonzero(chosen).tolist():
        noise, merging, case_draw, typo_draw, size, strip = draws[i].tolist()
        if noise < config.noise:
            changes.append(Change(i, noise=True))
            continue
        change = Change(i)
        if merging < config.merge:
            change.merged = min(2 + int(size * 3), int(stops[i]) - i)
            change.strip = change.merged > 1 and strip < 0.5
        case = int(np.searchsorted(case_edges, case_draw, side="right"))
        change.case = ("uppercase", "titlecase", "lowercase", "")[case]
        change.typos = typo_draw < config.typos
        if change != Change(i):
            changes.append(change)
    return changes


class Augmenter:
    """Builds each epoch's :class:`AugmentedSplit` of a training split."""

    def __init__(
        self,
        data: ParallelData,
        tokenizers: tuple[Tokenizer, Tokenizer],
        config: AugmentConfig,
        seed: int,
        max_pieces: int,
    ) -> None:
        self.data, self.config, self.seed, self.max_pieces = data, config, seed, max_pieces
        self.src_tok, self.tgt_tok = tokenizers
        self.tags = frozenset(self.src_tok.tag_ids)

    def epoch(self, epoch: int) -> AugmentedSplit:
        ranges = list(self.data.directions.values())
        changes = plan_changes(len(self.data), self.config, self.seed, epoch, ranges)
        texts = [self._apply(c, pair_rng(self.seed, epoch, c.index)) for c in changes]
        src_ids = self.src_tok.encode([s for s, _ in texts])
        tgt_ids = self.tgt_tok.encode([t for _, t in texts])
        replaced = {}
        for change, src, tgt in zip(changes, src_ids, tgt_ids, strict=True):
            tag = self._tag(change.index)
            if len(tag) + len(src) <= self.max_pieces and len(tgt) <= self.max_pieces:
                replaced[change.index] = (np.array(tag + src, np.int64), np.array(tgt, np.int64))
        return AugmentedSplit(self.data, replaced)

    def _tag(self, i: int) -> list[int]:
        """The source's leading target-language tag (a multilingual dataset), kept as it is."""
        src = self.data.side("src", i)
        return [int(src[0])] if len(src) and int(src[0]) in self.tags else []

    def _text(self, i: int) -> tuple[str, str]:
        src, tgt = self.data.pair(i)
        src = src[len(self._tag(i)) :]
        return self.src_tok.decode([src])[0], self.tgt_tok.decode([tgt])[0]

    def _apply(self, change: Change, rng: random.Random) -> tuple[str, str]:
        """The modified (source, target) text of a pair."""
        if change.noise:
            line = modify.noise_line(rng)
            return line, line
        pairs = [self._text(change.index + k) for k in range(change.merged)]
        src = modify.merge([s for s, _ in pairs], change.strip)
        tgt = modify.merge([t for _, t in pairs], strip=False)
        if change.case in ("uppercase", "titlecase"):
            case = getattr(modify, change.case)
            src, tgt = case(src), case(tgt)
        elif change.case == "lowercase":
            src = modify.lowercase(src)
        if change.typos:
            src = modify.typos(src, rng, self.config.typo_rate)
        return src, tgt


class AugmentedSplit:
    """A training split as one epoch sees it: some pairs replaced (what
    :func:`mtkit.training.batching.iterate_groups` reads of a :class:`ParallelData`)."""

    def __init__(self, base: ParallelData, replaced: dict[int, tuple[np.ndarray, np.ndarray]]):
        self.base, self.replaced = base, replaced
        self.directions = base.directions
        self.src_lengths = np.array(base.src_lengths, dtype=np.int64)
        self.tgt_lengths = np.array(base.tgt_lengths, dtype=np.int64)
        for i, (src, tgt) in replaced.items():
            self.src_lengths[i], self.tgt_lengths[i] = len(src), len(tgt)

    def __len__(self) -> int:
        return len(self.base)

    def pair(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        found = self.replaced.get(i)
        return found if found is not None else self.base.pair(i)

    def counts(self) -> dict[str, int]:
        return {"pairs": len(self), "changed": len(self.replaced)}
