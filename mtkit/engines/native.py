"""mtkit's own engine: checkpoints (one, or several as an ensemble) and the batched search.

Lines are encoded with the checkpoint's source spm model, cut into batches of at most
``max_tokens`` source tokens (padding counted, longest first), searched over the KV cache
(:func:`mtkit.decoding.search.generate`), put back in input order and detokenized.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

from mtkit.allocator import keep_freed_memory
from mtkit.checkpoint import LoadedModel, load_for_inference
from mtkit.config import SearchConfig, TranslateConfig
from mtkit.data.tags import check_target
from mtkit.data.tokenizer import Tokenizer
from mtkit.decoding.batching import pad_batch
from mtkit.decoding.search import generate
from mtkit.devices import torch_device
from mtkit.engines.base import (
    Progress,
    Translation,
    announce_dtype,
    encode_sources,
    one_line,
    source_batches,
)
from mtkit.errors import MtkitError
from mtkit.model.inference import check_precision, prepare_for_inference
from mtkit.precision import resolve_dtype

if TYPE_CHECKING:
    from mtkit.engines.parallel import ParallelEngine


@dataclass
class NativeEngine:
    """Models ready to translate, with their tokenizers, on one device."""

    models: list[nn.Module]
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    config: TranslateConfig
    device: torch.device
    max_positions: int
    generator: torch.Generator | None = None  # sampling draws from one stream across calls

    @property
    def max_source_pieces(self) -> int:
        return min(self.config.max_input_tokens, self.max_positions - 1)

    def check(self, search: SearchConfig) -> None:
        """Every valid SearchConfig runs here."""

    def translate(
        self,
        lines: Sequence[str],
        search: SearchConfig | None = None,
        first_number: int = 1,
        progress: Progress | None = None,
    ) -> list[list[Translation]]:
        search = search or self.config.search
        sources = encode_sources(self.src_tokenizer, lines, self.max_source_pieces, first_number,
                                 self.config.tgt_lang)  # fmt: skip
        results: list[list[Translation]] = [[] for _ in lines]
        for index in source_batches(sources, self.config.max_tokens, progress):
            found = self.translate_batch([sources[i] for i in index], search)
            for i, hyps in zip(index, found, strict=True):
                results[i] = hyps
        return results

    def translate_batch(
        self, rows: list[list[int]], search: SearchConfig
    ) -> list[list[Translation]]:
        """One batch: source piece ids per row (non-empty, no EOS) -> each row's hypotheses."""
        ids = self.src_tokenizer.specials  # the checkpoint's (an imported vocabulary's) ids
        src = pad_batch([row + [ids.eos] for row in rows], self.device, ids.pad)
        found = generate(self.models, src, search, self._generator(search))
        texts = iter(self.tgt_tokenizer.decode([h.tokens for hyps in found for h in hyps]))
        return [[Translation(one_line(next(texts)), h.score, h.logprob, len(h.tokens))
                 for h in hyps] for hyps in found]  # fmt: skip

    def _generator(self, search: SearchConfig) -> torch.Generator | None:
        if not search.sampling:
            return None
        if self.generator is None:
            self.generator = torch.Generator(self.device).manual_seed(search.seed)
        return self.generator


def check_ensemble(loaded: list[LoadedModel]) -> None:
    """Ensembled checkpoints must share their sentencepiece models."""
    first = loaded[0]
    for other in loaded[1:]:
        for side in ("src", "tgt"):
            a, b = getattr(first, f"{side}_tokenizer"), getattr(other, f"{side}_tokenizer")
            if a.sha256 != b.sha256:
                raise MtkitError(
                    f"{other.checkpoint_path}: its {side} sentencepiece model differs from "
                    f"{first.checkpoint_path}'s (sha256 {b.sha256[:12]} vs {a.sha256[:12]}); "
                    "ensembled models must share source and target vocabularies"
                )


def load(
    checkpoints: list[str], config: TranslateConfig, announce: bool = True
) -> NativeEngine | ParallelEngine:
    """Load one checkpoint, or several as an ensemble, prepared for ``config``'s device
    (``announce``: say what ``--dtype auto`` chose; workers of a parallel engine do not).
    With ``config.workers`` > 1: a :class:`~mtkit.engines.parallel.ParallelEngine`."""
    if config.workers > 1:
        from mtkit.engines import parallel

        return parallel.load(checkpoints, config)
    device = torch_device(config.device)
    dtype = resolve_dtype(device.type, config.dtype, config.quantize)
    check_precision(device, dtype.name, config.quantize)
    if announce:
        announce_dtype(config.dtype, dtype)
    if config.threads > 0:
        torch.set_num_threads(config.threads)
    if device.type == "cpu":
        keep_freed_memory()  # each step's logits: reused, not new pages (mtkit/allocator.py)
    loaded = [load_for_inference(path) for path in checkpoints]
    check_ensemble(loaded)
    check_target(config.tgt_lang, loaded[0].src_tokenizer.tags)
    models = [
        prepare_for_inference(item.model, device, dtype.name, config.quantize, config.cpu_matmul)
        for item in loaded
    ]
    first = loaded[0]
    positions = min(item.config.max_positions for item in loaded)
    engine = NativeEngine(models, first.src_tokenizer, first.tgt_tokenizer, config, device,
                          positions)  # fmt: skip
    engine._generator(config.search)
    return engine
