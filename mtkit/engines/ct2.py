"""The CTranslate2 engine: decode a directory written by `mtkit export --format ctranslate2`.

The directory holds CTranslate2's ``model.bin`` with ``source.spm``, ``target.spm`` and
``mtkit.json`` (position limit, provenance) beside it; it is loaded once and translates batches
of lines with one ``translate_batch`` call each.

Differences from mtkit's own engine (documented, not hidden):

- length penalty: CTranslate2 divides a finished hypothesis' log-probability by len**lenpen, as
  mtkit's 'fairseq' style does; with ``return_end_token`` len counts EOS, as ours. There is no
  'gnmt' style, no UNK penalty and one hypothesis per line: those options are refused.
- length limit: ``max_decoding_length`` is one bound per call, so each batch decodes up to its
  largest bound (max_len_a * source pieces + max_len_b) and every output is then cut to its own
  line's bound, where mtkit forces EOS: same tokens for greedy search, a slightly different beam
  score. Scores are CTranslate2's; the log-probability is not reported (NaN).
- confidence (``SearchConfig.scores``): ``translate_batch`` gives no per-piece
  log-probabilities (``return_logits_vocab`` would give whole vocabularies), so each batch's
  hypotheses are scored again with ``score_batch`` (teacher-forced, EOS scored last): the same
  model log-probabilities as mtkit's engine, at the cost of one more forward pass.
- shortlist: an export written with ``--shortlist`` holds it as CTranslate2's vocabulary map
  (``vmap.txt``), which every call uses (``use_vmap``); ``--shortlist`` itself is refused here.
  CTranslate2 allows UNK, BOS and EOS and the map's entries; mtkit also allows PAD (banned).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mtkit.config import SearchConfig, TranslateConfig, alignment_layer
from mtkit.data.sentence_style import SentenceStyle
from mtkit.data.source_words import SourceWords
from mtkit.data.tags import check_target
from mtkit.data.tokenizer import Tokenizer
from mtkit.devices import parse_device
from mtkit.engines.alignment import Alignment, word_alignment
from mtkit.engines.base import (
    Engine,
    Phrases,
    Progress,
    Translation,
    announce_dtype,
    one_line,
)
from mtkit.engines.confidence import Confidence, piece_confidence
from mtkit.errors import MtkitError
from mtkit.formats.ctranslate2 import (
    ctranslate2_module,
    export_languages,
    read_metadata,
    read_tokenizer,
    suppressed,
)
from mtkit.languages import Languages
from mtkit.precision import resolve_dtype

FLOATS = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def max_target_len(src_len: int, search: SearchConfig, cap: int) -> int:
    """Most target tokens before EOS for a source of ``src_len`` pieces (EOS excluded), as in
    ``mtkit.decoding.beam.max_target_lengths``: floor(a * len + b) within [min_len, cap]."""
    return min(cap, max(search.min_len, math.floor(search.max_len_a * src_len + search.max_len_b)))


def check_search(search: SearchConfig) -> None:
    """Refuse the search options CTranslate2 cannot honour, naming them."""
    if search.lenpen_style != "fairseq":
        raise MtkitError(
            f"lenpen_style={search.lenpen_style!r} is not available with CTranslate2, which "
            "normalizes by len**lenpen only (use 'fairseq')"
        )
    if search.unk_penalty:
        raise MtkitError("unk_penalty is not available with CTranslate2")
    if search.nbest > 1:
        raise MtkitError("nbest > 1 is not available with the ctranslate2 engine (one line out)")
    if search.constraints:
        raise MtkitError(
            "lexical constraints (--constraints, --glossary) are not available with "
            "the ctranslate2 engine, whose target prefix fixes where a phrase goes; "
            "use --engine mtkit"
        )


def _device(name: str, ct2: Any) -> tuple[str, int]:
    kind, index = parse_device(name)
    if kind == "auto":
        kind = "cuda" if ct2.get_cuda_device_count() > 0 else "cpu"
    return kind, index or 0


def compute_type(config: TranslateConfig, dtype: str | None = None) -> str:
    """'default' keeps the exported quantization; --quantize/--dtype ask for another one
    (``dtype``: config.dtype resolved, as auto is)."""
    dtype = dtype or config.dtype
    if config.quantize == "int8":
        return "int8" if dtype == "fp32" else f"int8_{FLOATS[dtype]}"
    return "default" if dtype == "fp32" else FLOATS[dtype]


@dataclass
class Ct2Engine(Engine):
    """A loaded CTranslate2 export with its tokenizers."""

    translator: Any
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    max_positions: int
    config: TranslateConfig
    model_languages: Languages | None = None
    layers: tuple[int, int] | None = None  # (alignment layer, decoder layers) of the export
    where: str = ""  # the model directory, for messages
    use_vmap: bool = False  # the export holds a shortlist as vmap.txt (export --shortlist)

    def check(self, search: SearchConfig) -> None:
        check_search(search)
        if search.alignment:
            self._check_alignment()

    def _check_alignment(self) -> None:
        """Alignments come from the layer chosen at export time: refuse another one."""
        if self.layers is None:
            raise MtkitError(
                f"{self.where}: exported without an alignment layer (before "
                "mtkit 0.27); export it again for --alignment"
            )
        exported, layers = self.layers
        asked = alignment_layer(self.config.alignment_layer, layers)
        if asked != exported:
            raise MtkitError(
                f"--alignment-layer {self.config.alignment_layer}: {self.where} "
                f"was exported to align with decoder layer {exported}, not {asked} "
                "(the layer is fixed in a CTranslate2 model)"
            )

    def decode_batch(
        self, rows: list[list[int]], search: SearchConfig, phrases: list[Phrases] | None = None
    ) -> list[list[Translation]]:
        check_search(search)  # constraints refused there: ``phrases`` are never used
        return self._results(rows, self._submit(rows, search, asynchronous=False), search)

    def decode_batches(
        self,
        batches: list[list[list[int]]],
        search: SearchConfig,
        progress: Progress | None,
        phrases: list[list[Phrases]] | None = None,
    ) -> list[list[list[Translation]]]:
        """With ``--workers`` N (CTranslate2's inter_threads), every batch is submitted at
        once and N are decoded at a time; else one after the other."""
        check_search(search)
        if self.config.workers == 1:
            return super().decode_batches(batches, search, progress)
        pending = [
            self._submit(rows, search, asynchronous=True) if rows else [] for rows in batches
        ]
        found = []
        for rows, waiting in zip(batches, pending, strict=True):
            found.append(self._results(rows, [r.result() for r in waiting], search))
            if progress is not None:
                progress.update(len(rows))
        return found

    def _bound(self, row: list[int], search: SearchConfig) -> int:
        """The row's target length limit; a target-language tag does not count (max_len_a)."""
        tagged = bool(row) and row[0] in self.src_tokenizer.tag_ids
        return max_target_len(len(row) - tagged, search, self.max_positions - 1)

    def _submit(self, rows: list[list[int]], search: SearchConfig, asynchronous: bool) -> Any:
        pieces = [[self.src_tokenizer.id_to_piece(t) for t in row] for row in rows]
        bound = max(self._bound(row, search) for row in rows)
        options = search_options(search, bound, self.tgt_tokenizer)
        options["return_attention"] = search.alignment
        options["use_vmap"] = self.use_vmap
        return self.translator.translate_batch(pieces, asynchronous=asynchronous, **options)

    def _results(
        self, rows: list[list[int]], found: list[Any], search: SearchConfig
    ) -> list[list[Translation]]:
        """Detokenize one batch's CTranslate2 results (cut to each row's bound)."""
        hyps = [
            _target_ids(self.tgt_tokenizer, r.hypotheses[0], self._bound(row, search))
            for row, r in zip(rows, found, strict=True)
        ]
        texts = [one_line(text) for text in self.tgt_tokenizer.decode(hyps)]
        scored = self._confidence(rows, hyps, texts) if search.scores else [None] * len(rows)
        return [
            [
                Translation(
                    text,
                    r.scores[0] if r.scores else math.nan,
                    math.nan,
                    len(hyp),
                    self._alignment(row, hyp, text, r) if search.alignment else None,
                    confidence,
                )
            ]
            for row, r, hyp, text, confidence in zip(rows, found, hyps, texts, scored, strict=True)
        ]

    def _confidence(
        self, rows: list[list[int]], hyps: list[list[int]], texts: list[str]
    ) -> list[Confidence | None]:
        """Each hypothesis' piece log-probabilities, from CTranslate2's ``score_batch`` (the
        model teacher-forced on the pieces it generated; it adds EOS and scores it last)."""
        src_piece, tgt_piece = self.src_tokenizer.id_to_piece, self.tgt_tokenizer.id_to_piece
        found = self.translator.score_batch(
            [[src_piece(t) for t in row] for row in rows],
            [[tgt_piece(t) for t in hyp] for hyp in hyps],
            max_input_length=0,
        )
        unk = tgt_piece(self.tgt_tokenizer.specials.unk)
        return [
            piece_confidence([tgt_piece(t) for t in hyp], r.log_probs, len(text.split()), None, unk)
            for hyp, r, text in zip(hyps, found, texts, strict=True)
        ]

    def _alignment(self, row: list[int], hyp: list[int], text: str, result: Any) -> Alignment:
        """Word pairs from CTranslate2's attention (the exported layer, all heads averaged)."""
        src_piece, tgt_piece = self.src_tokenizer.id_to_piece, self.tgt_tokenizer.id_to_piece
        return word_alignment(
            [src_piece(t) for t in row],
            [tgt_piece(t) for t in hyp],
            result.attention[0],
            bool(row) and row[0] in self.src_tokenizer.tag_ids,
            None,
            len(text.split()),
        )


def _target_ids(tgt: Tokenizer, pieces: list[str], bound: int) -> list[int]:
    """Piece ids up to EOS, at most ``bound`` of them (where mtkit would have forced EOS)."""
    ids = [tgt.piece_to_id(p) for p in pieces]
    eos = tgt.specials.eos
    if eos in ids:
        ids = ids[: ids.index(eos)]
    return ids[:bound]


def search_options(search: SearchConfig, bound: int, tgt: Tokenizer) -> dict[str, Any]:
    """translate_batch keywords for a group of sources whose target bound is ``bound``."""
    options: dict[str, Any] = dict(
        beam_size=search.width,
        length_penalty=search.lenpen,
        max_decoding_length=bound + 1,  # + EOS
        min_decoding_length=search.min_len,
        max_input_length=0,  # we truncate ourselves, before EOS
        no_repeat_ngram_size=search.no_repeat_ngram,
        num_hypotheses=1,
        suppress_sequences=suppressed(tgt),  # PAD and the start token: never generated by mtkit
        return_end_token=True,  # so that len in len**lenpen counts EOS, as in mtkit
        return_scores=True,
        max_batch_size=0,
    )
    if search.sampling:
        options.update(
            sampling_topk=search.top_k or 0,
            sampling_topp=search.top_p,
            sampling_temperature=search.temperature,
        )
    return options


def _translator(model_dir: Path, config: TranslateConfig) -> Any:
    """The CTranslate2 translator for an exported directory."""
    ct2 = ctranslate2_module()
    device, index = _device(config.device, ct2)
    dtype = resolve_dtype(device, config.dtype, config.quantize)
    announce_dtype(config.dtype, dtype)
    config = replace(config, quantize=config.quantize or dtype.quantize)  # fast: int8
    threads = config.threads or max(1, (os.cpu_count() or 1) // config.workers)
    try:
        return ct2.Translator(
            str(model_dir),
            device=device,
            device_index=index,
            compute_type=compute_type(config, dtype.name),
            inter_threads=config.workers,
            intra_threads=threads,
        )
    except (RuntimeError, ValueError) as err:
        raise MtkitError(f"{model_dir}: cannot load CTranslate2 model ({err})") from None


def load(models: list[str], config: TranslateConfig, announce: bool = True) -> Ct2Engine:
    """Load one exported directory (model.bin, source.spm, target.spm) for ``config``."""
    ct2 = ctranslate2_module()  # a missing extra is named before anything else is checked
    if len(models) != 1:
        raise MtkitError("--engine ctranslate2 takes one exported model directory (-m DIR)")
    check_search(config.search)
    model_dir = Path(models[0])
    if config.shortlist:
        raise MtkitError(
            "--shortlist: the ctranslate2 engine decodes with the shortlist of its export; "
            f"export {model_dir} with `mtkit export --shortlist FILE`"
        )
    meta = read_metadata(model_dir)
    translator = _translator(model_dir, config)
    if config.search.sampling:
        ct2.set_random_seed(config.search.seed)
    src = read_tokenizer(model_dir, "source", meta)
    check_target(config.tgt_lang, src.tags)
    tgt = read_tokenizer(model_dir, "target", meta)
    layers = None
    if isinstance(meta.get("alignment_layer"), int) and isinstance(meta.get("decoder_layers"), int):
        layers = (meta["alignment_layer"], meta["decoder_layers"])
    use_vmap = bool(meta.get("vmap")) and (model_dir / str(meta["vmap"])).is_file()
    engine = Ct2Engine(
        translator,
        src,
        tgt,
        int(meta.get("max_positions", 1024)),
        config,
        export_languages(meta),
        layers,
        str(model_dir),
        use_vmap,
    )
    pieces = meta.get("source_pieces")  # the longest training source, where recorded
    engine.trained_pieces = pieces if isinstance(pieces, int) and pieces > 0 else None
    if "sentence_style" in meta:
        engine.sentence_style = SentenceStyle.from_dict(
            meta["sentence_style"], f"{model_dir}: sentence_style"
        )
    if "source_words" in meta:
        engine.source_words = SourceWords.from_list(
            meta["source_words"], f"{model_dir}: source_words"
        )
    return engine
