"""mtkit's own engine: checkpoints (one, or several as an ensemble) and the batched search.

Lines are encoded with the checkpoint's source spm model, cut into batches of at most
``max_tokens`` source tokens (padding counted, longest first), searched over the KV cache
(:func:`mtkit.decoding.search.generate`), put back in input order and detokenized.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import Tensor, nn

from mtkit.allocator import keep_freed_memory
from mtkit.checkpoint import Checkpoint, load_for_inference
from mtkit.config import SearchConfig, TranslateConfig, alignment_layer
from mtkit.cpu import Resolved
from mtkit.data.shortlist import Shortlist, read_shortlist_for
from mtkit.data.tags import check_target
from mtkit.data.tokenizer import Tokenizer
from mtkit.decoding.batching import pad_batch
from mtkit.decoding.constraints import Constraints
from mtkit.decoding.guard import copied
from mtkit.decoding.scheduler import Scheduler
from mtkit.decoding.search import Hypothesis, generate, joinable, start_search
from mtkit.decoding.search import check as check_search
from mtkit.decoding.speculative import Draft
from mtkit.decoding.stepper import Stepper
from mtkit.devices import torch_device
from mtkit.engines.alignment import word_alignment
from mtkit.engines.base import (
    Engine,
    ModelInfo,
    Phrases,
    Progress,
    Translation,
    announce_dtype,
    one_line,
)
from mtkit.engines.confidence import piece_confidence
from mtkit.engines.decoders import DecoderPool
from mtkit.engines.draft import describe_draft, load_draft
from mtkit.errors import MtkitError
from mtkit.languages import Languages
from mtkit.model.compiled import CompiledStep
from mtkit.model.inference import check_precision, compiles, prepare_for_inference
from mtkit.model.shortlisted import ROWS, Shortlisted, group_plan, projection_weight
from mtkit.model.transformer import EncoderOut
from mtkit.precision import resolve_dtype


@dataclass
class NativeEngine(Engine):
    """Models ready to translate, with their tokenizers, on one device."""

    models: list[nn.Module]
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    config: TranslateConfig
    device: torch.device
    max_positions: int
    model_languages: Languages | None = None
    generator: torch.Generator | None = None  # sampling draws from one stream across calls
    boundaries: frozenset[int] | None = None  # target pieces that end a word (constraints)
    draft: Draft | None = None  # --draft: greedy searches are speculative (same output)
    shortlist: Shortlist | None = None  # --shortlist: each batch's output layer restricted
    # per model, its output projection's weight before packing (what output_rows needs)
    projection_weights: list[Tensor | None] | None = None
    shortlist_rows: int = ROWS  # decoder rows whose sentences share one shortlist union
    scheduler: Scheduler | DecoderPool | None = None  # :meth:`schedule`: searches step together
    checkpoints: list[str] = field(default_factory=list)  # what it was loaded from

    @property
    def compiled(self) -> bool:
        """Whether the models' decoding steps run as compiled graphs (``--compile``)."""
        return any(isinstance(model.decode_step, CompiledStep) for model in self.models)

    def check(self, search: SearchConfig) -> None:
        """The search's own check of ``search`` (a server request's options included)."""
        check_search(search, bool(search.constraints), self.draft is not None)

    def decode_batch(
        self, rows: list[list[int]], search: SearchConfig, phrases: list[Phrases] | None = None
    ) -> list[list[Translation]]:
        ids = self.src_tokenizer.specials  # the checkpoint's (an imported vocabulary's) ids
        src = pad_batch([row + [ids.eos] for row in rows], self.device, ids.pad)
        first = self._aligning() if search.alignment else self.models[0]
        models = [first, *self.models[1:]]
        if search.constraints:
            phrases = phrases or [[] for _ in rows]
        if self.shortlist is not None:
            wanted = [t for p in phrases or [] for phrase in p for t in phrase]
            models = self._shortlisted(models, rows, search, wanted if search.constraints else None)
        constraints = None
        if search.constraints:
            if self.boundaries is None:
                self.boundaries = self.tgt_tokenizer.word_boundaries()
            ordered = search.constraints == "ordered"
            boundaries, given = self.boundaries, phrases or []
            if isinstance(models[0], Shortlisted):  # as the columns of its one group
                columns = models[0].plan.columns
                boundaries = frozenset(columns(sorted(self.boundaries)))
                given = [[columns(phrase) for phrase in p] for p in given]
            constraints = [Constraints(p, ordered, boundaries) for p in given]
        # the guard retries a loop (repeats banned, where it may): the search stops it
        stop = search.guard and not search.no_repeat_ngram and not search.alignment
        found = self._searched(models, rows, src, search, constraints, stop)
        if stop:

            def again(index: list[int]) -> list[list[Hypothesis]]:
                kept = None if constraints is None else [constraints[i] for i in index]
                part = [rows[i] for i in index]
                return self._searched(models, part, src[index], search, kept, False)

            found = self._loops_of_the_source(rows, found, again)
        texts = iter(self.tgt_tokenizer.decode([h.tokens for hyps in found for h in hyps]))
        out = [
            [
                Translation(
                    one_line(next(texts)),
                    h.score,
                    h.logprob,
                    len(h.tokens),
                    stopped=self._stopped(h),
                )
                for h in hyps
            ]
            for hyps in found
        ]
        if search.scores:
            out = [
                [self._scored(h, t) for h, t in zip(hyps, row, strict=True)]
                for hyps, row in zip(found, out, strict=True)
            ]
        if isinstance(first, Aligning):
            return self._aligned(rows, src, first.encoded, found, out)
        return out

    def _searched(
        self,
        models: list[Any],
        rows: list[list[int]],
        src: Tensor,
        search: SearchConfig,
        constraints: list[Constraints] | None,
        stop: bool,
    ) -> list[list[Hypothesis]]:
        """Each row's hypotheses (target vocabulary ids), searched here or on the scheduler's
        thread, beside (or joining) other requests' rows; ``stop``: loops stopped."""
        ids = self.src_tokenizer.specials
        if self.scheduler is None:
            generator = self._generator(search)
            found = generate(models, src, search, generator, constraints, self.draft, stop)
        else:
            joins = self._joins(models, search)
            found = self.scheduler.decode(
                [row + [ids.eos] for row in rows],
                (search, stop) if joins else None,
                self.starter(models, search, constraints, joins, stop),
            )
        if isinstance(models[0], Shortlisted):  # its columns as the vocabulary's ids
            to_vocab = models[0].vocabulary_ids
            found = [
                [
                    replace(
                        h,
                        tokens=to_vocab(i, h.tokens),
                        looped=h.looped and (to_vocab(i, [h.looped[0]])[0], h.looped[1]),
                    )
                    for h in hyps
                ]
                for i, hyps in enumerate(found)
            ]
        return found

    def starter(
        self,
        models: list[Any],
        search: SearchConfig,
        constraints: list[Constraints] | None,
        joins: bool,
        stop: bool,
    ) -> Callable[[Tensor], Stepper]:
        """How a scheduler starts this engine's search over source rows (B, S): ``joins``,
        built to take rows joining it; ``stop``: loops stopped (a decoding process starts its
        own from a submission's key, :mod:`mtkit.engines.decoders`)."""
        generator = self._generator(search)
        return lambda src: start_search(
            models, src, search, generator, constraints, self.draft, joins, stop
        )

    def _loops_of_the_source(
        self,
        rows: list[list[int]],
        found: list[list[Hypothesis]],
        again: Callable[[list[int]], list[list[Hypothesis]]],
    ) -> list[list[Hypothesis]]:
        """``found`` with each input that the search stopped in a loop its source spells (a
        run the guard allows: ``zzzzzzzzzzzz`` copied) searched ``again`` without stops."""
        stopped = [i for i, hyps in enumerate(found) if any(h.looped for h in hyps)]
        if not stopped:
            return found
        piece = self.tgt_tokenizer.id_to_piece
        texts = self.src_tokenizer.decode([rows[i] for i in stopped])
        redo = [
            i
            for i, text in zip(stopped, texts, strict=True)
            if any(h.looped and copied(piece(h.looped[0]), h.looped[1], text) for h in found[i])
        ]
        if not redo:
            return found
        found = list(found)
        for i, hyps in zip(redo, again(redo), strict=True):
            found[i] = hyps
        return found

    def _stopped(self, hyp: Hypothesis) -> str | None:
        """Why the search stopped ``hyp`` (the guard's words), None where it ended."""
        if hyp.looped is None:
            return None
        token, run = hyp.looped
        return f"a run of {run} pieces {self.tgt_tokenizer.id_to_piece(token)!r}"

    def decode_batches(
        self,
        batches: list[list[list[int]]],
        search: SearchConfig,
        progress: Progress | None,
        phrases: list[list[Phrases]] | None = None,
    ) -> list[list[list[Translation]]]:
        """With a scheduler and a search whose rows join a running one, every batch in one
        submission (the scheduler takes its rows in as its budget allows); else batch by
        batch."""
        if self.scheduler is None or not self._joins(self.models, search):
            return super().decode_batches(batches, search, progress, phrases)
        found = self.decode_batch([row for rows in batches for row in rows], search)
        out, at = [], 0
        for rows in batches:
            out.append(found[at : at + len(rows)])
            at += len(rows)
            if progress is not None:
                progress.update(len(rows))
        return out

    def schedule(
        self, max_tokens: int, share_tokens: int | None = None, decoders: int = 1
    ) -> Scheduler | DecoderPool:
        """From now on every search runs on one decoding thread, step by step, with those of
        other callers (threads): rows of greedy and beam searches join a running one
        (:mod:`mtkit.decoding.scheduler`: ``max_tokens`` source tokens at a time, at most
        ``share_tokens`` of one caller's while others decode); a compiled step builds the
        graph that joined rows need at once. ``decoders`` > 1: the joining rows decode in
        that many processes, the threads shared among them (:mod:`mtkit.engines.decoders`)."""
        if self.scheduler is None:
            pad = self.src_tokenizer.specials.pad
            local = Scheduler(max_tokens, self.device, pad, share_tokens)
            for model in self.models:  # rows will join: a compiled step's graph for it, now
                if isinstance(model.decode_step, CompiledStep):  # (in the cache, for decoders)
                    model.decode_step.prepare_joins()
            self.scheduler = local
            if decoders > 1:
                threads = max(1, torch.get_num_threads() // decoders)
                each = replace(self.config, threads=threads, workers=1)
                self.scheduler = DecoderPool(
                    __name__, self.checkpoints, each, max_tokens, share_tokens, decoders, local
                )
        return self.scheduler

    def _joins(self, models: list[Any], search: SearchConfig) -> bool:
        """Whether this search's rows may join a running one: a greedy or beam search (no
        constraints, no draft's speculation) without alignments or a shortlist, on models
        whose states take joining rows (eager key/value caches)."""
        if search.alignment or search.constraints or self.shortlist is not None:
            return False
        if not joinable(search, draft=self.draft is not None):
            return False
        return all(getattr(model, "joinable", False) for model in models)

    def _aligning(self) -> Aligning:
        """The first model, recording its alignment layer's cross-attention as it decodes."""
        model = self.models[0]
        return Aligning(
            model, alignment_layer(self.config.alignment_layer, model.cfg.decoder_layers)
        )

    def _scored(self, hyp: Hypothesis, translation: Translation) -> Translation:
        """``translation`` with its confidence: the search's log-probability of each piece."""
        piece = self.tgt_tokenizer.id_to_piece
        found = piece_confidence(
            [piece(t) for t in hyp.tokens],
            hyp.token_logprobs,
            len(translation.text.split()),
            hyp.logprob,
            piece(self.tgt_tokenizer.specials.unk),
        )
        return replace(translation, confidence=found)

    def _aligned(
        self,
        rows: list[list[int]],
        src: Tensor,
        enc: EncoderOut | None,
        found: list[list[Hypothesis]],
        out: list[list[Translation]],
    ) -> list[list[Translation]]:
        """``out`` with each hypothesis' word alignment, from the cross-attention the search
        recorded, or where a search records none (hypotheses without ``attention``), from one
        teacher-forced pass of the first model up to the alignment layer over those (source,
        hypothesis) pairs, on the encoder output the search computed (``enc``)."""
        pairs = [(i, h) for i, hyps in enumerate(found) for h in hyps]
        missing = [(i, h) for i, h in pairs if h.attention is None]
        forced = iter(self._forced_attention(src, enc, missing) if missing else [])
        probs = [next(forced) if h.attention is None else h.attention.tolist() for _, h in pairs]
        src_piece, tgt_piece = self.src_tokenizer.id_to_piece, self.tgt_tokenizer.id_to_piece
        tags = set(self.src_tokenizer.tag_ids)
        aligned = iter(probs)
        return [
            [
                replace(
                    t,
                    alignment=word_alignment(
                        [src_piece(p) for p in rows[i]],
                        [tgt_piece(p) for p in h.tokens],
                        next(aligned),
                        rows[i][0] in tags,
                        None,
                        len(t.text.split()),
                    ),
                )
                for h, t in zip(found[i], out[i], strict=True)
            ]
            for i in range(len(found))
        ]

    def _forced_attention(
        self, src: Tensor, enc: EncoderOut | None, pairs: list[tuple[int, Hypothesis]]
    ) -> list[list[list[float]]]:
        """The alignment layer's cross-attention of each (source row, hypothesis) pair, from a
        teacher-forced pass of the first model (on ``enc``, the search's encoder output)."""
        model = self.models[0]
        layer = alignment_layer(self.config.alignment_layer, model.cfg.decoder_layers)
        ids = self.tgt_tokenizer.specials
        tgt_in = pad_batch([[ids.bos] + h.tokens for _, h in pairs], self.device, ids.pad)
        index = torch.tensor([i for i, _ in pairs], device=self.device)
        if enc is not None:
            keep = None if enc.src_keep is None else enc.src_keep.index_select(0, index)
            enc = EncoderOut(enc.memory.index_select(0, index), keep)
        with torch.inference_mode():
            return model.cross_attention(src.index_select(0, index), tgt_in, layer, enc).tolist()

    def _shortlisted(
        self,
        models: list[Any],
        rows: list[list[int]],
        search: SearchConfig,
        wanted: list[int] | None,
    ) -> list[Shortlisted]:
        """``models`` restricted to the target ids the shortlist allows this batch's sentences
        (:mod:`mtkit.model.shortlisted`): per group of sentences (``shortlist_rows`` decoder
        rows: beams, or samples), the union of their source
        pieces' entries, the frequent pieces and the special ids. With constraints
        (``wanted``: their pieces, allowed too) the batch is one group, since the constrained
        search reads one column space for all its rows."""
        assert self.shortlist is not None and self.projection_weights is not None
        per_sentence = search.nbest if search.sampling else search.width
        group = max(1, self.shortlist_rows // per_sentence)
        if wanted is not None:
            group = max(len(rows), 1)
        found = group_plan(
            self.shortlist, rows, self.tgt_tokenizer.specials, self.device, group, wanted or ()
        )
        return [
            Shortlisted(model, found, plain, weight)
            for model, plain, weight in zip(
                models, self.models, self.projection_weights, strict=True
            )
        ]

    def _generator(self, search: SearchConfig) -> torch.Generator | None:
        if not search.sampling:
            return None
        if self.generator is None:
            self.generator = torch.Generator(self.device).manual_seed(search.seed)
        return self.generator


class Aligning:
    """The first model for the search when word alignments are asked: its decoding state
    records the cross-attention of decoder layer ``layer`` at each step (each hypothesis then
    carries it, :attr:`Hypothesis.attention`), and it remembers its last encoder output
    (``encoded``) for the teacher-forced pass of a search that records none. Everything else
    is the model's."""

    def __init__(self, model: nn.Module, layer: int) -> None:
        self._model = model
        self.layer = layer
        self.encoded: EncoderOut | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def encode(self, src: Tensor) -> EncoderOut:
        self.encoded = self._model.encode(src)
        return self.encoded

    def start_state(self, encoded: EncoderOut, max_len: int) -> Any:
        return self._model.start_state(encoded, max_len, self.layer)


def check_ensemble(paths: list[str], tokenizers: list[tuple[Tokenizer, Tokenizer]]) -> None:
    """Ensembled checkpoints must share their sentencepiece models."""
    for path, pair in zip(paths[1:], tokenizers[1:], strict=True):
        for side, a, b in zip(("src", "tgt"), tokenizers[0], pair, strict=True):
            if a.sha256 != b.sha256:
                raise MtkitError(
                    f"{path}: its {side} sentencepiece model differs from {paths[0]}'s (sha256 "
                    f"{b.sha256[:12]} vs {a.sha256[:12]}); ensembled models must share source "
                    "and target vocabularies"
                )


def _settings(config: TranslateConfig) -> tuple[torch.device, Resolved]:
    """The device and resolved dtype (refused in one line if the device cannot run it), after
    the search options (:func:`mtkit.decoding.search.check`, a ``--draft`` included); what
    ``--dtype auto`` chose is announced once every option is checked, so that a refused
    option is the only line a user reads."""
    check_search(config.search, bool(config.search.constraints), bool(config.draft))
    device = torch_device(config.device)
    dtype = resolve_dtype(device.type, config.dtype, config.quantize)
    check_precision(device, dtype.name, config.quantize or dtype.quantize)
    return device, dtype


def settled(config: TranslateConfig, resolved: Resolved) -> TranslateConfig:
    """``config`` with ``--dtype auto`` or ``fast`` as ``resolved`` (a float type, and int8
    where ``fast`` chose it): what the engine, its draft and its log read."""
    quantize = config.quantize or resolved.quantize
    return replace(config, dtype=resolved.name, quantize=quantize)


def _shortlist(config: TranslateConfig, src: Tokenizer, tgt: Tokenizer) -> Shortlist | None:
    """``--shortlist``'s file, checked against the models' vocabularies (None without one)."""
    if not config.shortlist:
        return None
    return read_shortlist_for(config.shortlist, src, tgt, "--shortlist")


def trained_pieces(recorded: Iterable[int | None]) -> int | None:
    """The longest source every model of an ensemble was trained on: the shortest of those
    recorded (None where none is)."""
    return min((pieces for pieces in recorded if pieces), default=None)


def describe(checkpoints: list[str], config: TranslateConfig) -> ModelInfo:
    """What the engine would know of ``checkpoints`` (tokenizers, limits, languages), checked
    as :func:`load` checks them, without building a model: for a process that only encodes."""
    _, resolved = _settings(config)
    ckpts = [Checkpoint.load(path) for path in checkpoints]
    pairs = [ckpt.tokenizers() for ckpt in ckpts]
    check_ensemble(checkpoints, pairs)
    describe_draft(config, checkpoints[0], pairs[0])
    check_target(config.tgt_lang, pairs[0][0].tags)
    _shortlist(config, *pairs[0])
    announce_dtype(config.dtype, resolved)
    positions = min(ckpt.model_config.max_positions for ckpt in ckpts)
    trained = trained_pieces(ckpt.source_pieces for ckpt in ckpts)
    first = ckpts[0]
    return ModelInfo(
        *pairs[0], positions, first.languages, trained, first.sentence_style, first.source_words
    )


def load(checkpoints: list[str], config: TranslateConfig, announce: bool = True) -> NativeEngine:
    """Load one checkpoint, or several as an ensemble, prepared for ``config``'s device
    (``announce``: say what ``--dtype auto`` chose; workers of a parallel engine do not)."""
    device, resolved = _settings(config)
    asked, config = config.dtype, settled(config, resolved)
    dtype = resolved.name
    if config.threads > 0:
        torch.set_num_threads(config.threads)
    if device.type == "cpu":
        keep_freed_memory()  # each step's logits: reused, not new pages (mtkit/allocator.py)
    loaded = [load_for_inference(path) for path in checkpoints]
    check_ensemble(checkpoints, [(item.src_tokenizer, item.tgt_tokenizer) for item in loaded])
    check_target(config.tgt_lang, loaded[0].src_tokenizer.tags)
    first = loaded[0]
    shortlist = _shortlist(config, first.src_tokenizer, first.tgt_tokenizer)
    # a packed projection (CPU) keeps no weight to take rows from: keep it aside
    weights = [
        projection_weight(item.model) if shortlist and device.type == "cpu" else None
        for item in loaded
    ]
    # --compile auto: compiled where it can be (no shortlisted output layer, on a CPU)
    models = [
        prepare_for_inference(
            item.model,
            device,
            dtype,
            config.quantize,
            config.cpu_matmul,
            not shortlist and compiles(config.compile, item.model, device),
        )
        for item in loaded
    ]
    positions = min(item.config.max_positions for item in loaded)
    engine = NativeEngine(
        models,
        first.src_tokenizer,
        first.tgt_tokenizer,
        config,
        device,
        positions,
        first.languages,
        shortlist=shortlist,
        projection_weights=weights,
        checkpoints=list(checkpoints),
    )
    engine.trained_pieces = trained_pieces(item.source_pieces for item in loaded)
    engine.sentence_style, engine.source_words = first.sentence_style, first.source_words
    engine._generator(config.search)
    engine.draft = load_draft(
        config, checkpoints[0], (first.src_tokenizer, first.tgt_tokenizer), device, dtype
    )
    if announce:
        announce_dtype(asked, resolved)
    return engine
