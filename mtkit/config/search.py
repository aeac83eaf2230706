"""Decoding: :class:`SearchConfig` (what a search computes) and :class:`TranslateConfig` (the
search, and how and where it runs), both validated when built."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from mtkit.config.common import from_dict
from mtkit.errors import MtkitError

LENPEN_STYLES = ("fairseq", "gnmt")  # fairseq: len**a | gnmt: ((5+len)/6)**a
TEXT_FORMATS = ("text", "html", "xml")  # what a translated text is (mtkit.text)
DEFAULT_LAYER = -1  # word alignments: the last decoder layer (mtkit.engines.alignment)
CONSTRAINT_KINDS = ("", "unordered", "ordered")  # "": none (mtkit.decoding.constrained)
# --compile: off | on (what cannot be compiled is refused) | auto (compiled where it runs: a
# CPU, mtkit's engine, no shortlist, a key/value cache; eager elsewhere)
COMPILE_MODES = ("off", "on", "auto")


@dataclass(frozen=True)
class SearchConfig:
    """What a search computes: beam search, greedy decoding (beam 1) or sampling.

    Each option is validated when built; which options a search can combine is that search's
    own check (:func:`mtkit.decoding.search.check`, run when an engine loads and again by the
    search). ``beam`` left unset is 5 for beam search and 1 with ``sampling``, which draws
    ``nbest`` independent samples.
    """

    beam: int | None = None  # None: 5, or 1 with sampling
    nbest: int = 1
    lenpen: float = 1.0
    lenpen_style: str = "fairseq"  # fairseq: len**a | gnmt: ((5+len)/6)**a
    max_len_a: float = 1.2
    max_len_b: int = 10
    min_len: int = 1
    no_repeat_ngram: int = 0
    unk_penalty: float = 0.0
    sampling: bool = False
    top_k: int = 0
    top_p: float = 1.0
    temperature: float = 1.0
    seed: int = 1  # sampling
    alignment: bool = False  # each hypothesis with its word alignment (mtkit.engines.alignment)
    # lines come with target phrases that their translations must contain: "" none, unordered
    # or ordered (mtkit.decoding.constrained); a kind of its own, so the server batches alike
    constraints: str = ""
    scores: bool = False  # each hypothesis with its piece/word log-probs (engines.confidence)
    # a line whose translation degenerates (a run of one character or piece far beyond its
    # source's, far more pieces) is translated another way (mtkit.engines.guard)
    guard: bool = True

    def __post_init__(self) -> None:
        if self.beam is None:
            object.__setattr__(self, "beam", 1 if self.sampling else 5)
        for ok, message in self._rules():
            if not ok:
                raise MtkitError(message)

    @property
    def width(self) -> int:
        """The beam width, resolved (never None)."""
        assert self.beam is not None
        return self.beam

    def _rules(self) -> list[tuple[bool, str]]:
        beam = self.width
        return [
            (beam >= 1, f"--beam must be at least 1, got {beam}"),
            (self.nbest >= 1, f"--nbest must be at least 1, got {self.nbest}"),
            (
                self.sampling or self.nbest <= beam,
                f"--nbest {self.nbest} exceeds --beam {beam} (nbest must be <= beam)",
            ),
            (
                not self.sampling or beam == 1,
                f"--sampling draws nbest samples per input; it takes no --beam (got {beam})",
            ),
            (
                self.lenpen_style in LENPEN_STYLES,
                f"--lenpen-style must be one of "
                f"{', '.join(LENPEN_STYLES)}, got {self.lenpen_style!r}",
            ),
            (self.min_len >= 0, f"--min-len must be >= 0, got {self.min_len}"),
            (self.max_len_a >= 0 and self.max_len_b >= 0, "--max-len-a/-b must be >= 0"),
            (self.no_repeat_ngram >= 0, "--no-repeat-ngram must be >= 0"),
            (self.temperature > 0, f"--temperature must be > 0, got {self.temperature}"),
            (self.top_k >= 0, f"--top-k must be >= 0, got {self.top_k}"),
            (0 < self.top_p <= 1, f"--top-p must be in (0, 1], got {self.top_p}"),
            (
                self.constraints in CONSTRAINT_KINDS,
                f"constraints must be one of "
                f"{', '.join(repr(k) for k in CONSTRAINT_KINDS)}, got {self.constraints!r}",
            ),
        ]

    def max_target_length(self, source_pieces: int, cap: int) -> int:
        """Tokens a translation of ``source_pieces`` pieces may have before EOS:
        ``max_len_a * pieces + max_len_b``, within [min_len, cap] (as
        :func:`mtkit.decoding.beam.max_target_lengths` computes it for a batch)."""
        return min(
            max(math.floor(self.max_len_a * source_pieces + self.max_len_b), self.min_len), cap
        )

    def replace(self, **changes: Any) -> SearchConfig:
        """A copy with ``changes`` (validated again); ``beam`` re-resolves if not given."""
        values = {**dataclasses.asdict(self), **changes}
        if "beam" not in changes and "sampling" in changes:
            values["beam"] = None
        return SearchConfig(**values)


DTYPES = ("auto", "fp32", "bf16", "fp16", "fast")
FLOAT_TYPES = ("fp32", "bf16", "fp16")  # what a draft may be given
CPU_MATMULS = ("onednn", "default")


@dataclass
class TranslateConfig:
    """`mtkit translate`: the search, and how and where it runs."""

    search: SearchConfig = field(default_factory=SearchConfig)
    max_tokens: int = 4096  # source tokens per batch, padding counted
    max_input_tokens: int = 1000  # longer inputs are truncated to this many pieces (documented cap)
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    # fp32 | bf16 (CPU: bf16 linear layers) | fp16 (CUDA) | auto (mtkit/cpu.py) | fast (bf16 where
    # auto picks it, else int8: mtkit/precision.py)
    dtype: str = "fp32"
    quantize: str = ""  # "" | int8
    cpu_matmul: str = "onednn"  # CPU fp32: onednn (weights packed once) | default (torch's)
    compile: str = "off"  # CPU: the decoder's step as one compiled graph (COMPILE_MODES)
    threads: int = 0  # CPU threads (per worker); 0: torch's default (divided among workers)
    workers: int = 1  # batches decoded at once, each by a worker with --threads threads (CPU)
    engine: str = "mtkit"  # a name in the registry, mtkit.engines (checked when loaded)
    chunk_lines: int = 10000  # lines read, sorted by length and translated at a time (streaming)
    tgt_lang: str = ""  # multilingual models: lines without a >>xx<< tag get this one
    split_sentences: bool = False  # each line a text: cut into sentences, translated, rebuilt
    # sentence ends the input leaves out read as the training data had them: run-ons cut at
    # its opening words (with split_sentences), final marks added (mtkit.text.sentence_ends)
    sentence_ends: bool = True
    # a word one edit from the training sources' words, which it is not, corrected to the most
    # frequent of them (mtkit.text.spelling)
    spelling: bool = True
    alignment_layer: int = DEFAULT_LAYER  # decoder layer that aligns words (-1: the last)
    spans: bool = True  # URLs, e-mails, numbers, @mentions, #hashtags, emoji, code kept verbatim
    format: str = "text"  # text (lines) | html | xml (the whole input one document)
    constraints_in_input: bool = False  # lines are SOURCE<TAB>PHRASE<TAB>PHRASE... (fairseq's)
    constraints_ordered: bool = False  # the phrases appear in their order (implies the above)
    glossary: str = ""  # TSV of source term<TAB>target term: a term found gives a constraint
    glossary_ignore_case: bool = False  # glossary terms match whatever their case
    shortlist: str = ""  # a lexical shortlist file (`mtkit shortlist build`): mtkit engine only

    word_scores: bool = False  # a column of per-word scores (implies search.scores)
    draft: str = ""  # a small checkpoint proposing tokens the models check (greedy, same output)
    draft_tokens: int = 4  # tokens the draft proposes per pass of the models (at most)
    draft_confidence: float = 0.0  # > 0: a pass's proposals stop after one less probable
    draft_quantize: str = ""  # "" (as --quantize) | int8 | none: the draft's own precision
    draft_dtype: str = ""  # "" (as --dtype) | fp32 | bf16 | fp16: the draft's own float type
    draft_shortlist: str = ""  # a lexical shortlist the draft guesses within (same output)

    def __post_init__(self) -> None:
        if isinstance(self.compile, bool):  # compile=True from Python: "on"
            self.compile = "on" if self.compile else "off"
        if self.word_scores and not self.search.scores:
            self.search = self.search.replace(scores=True)
        if self.constraints_ordered:
            self.constraints_in_input = True
        if (self.constraints_in_input or self.glossary) and not self.search.constraints:
            kind = "ordered" if self.constraints_ordered else "unordered"
            self.search = self.search.replace(constraints=kind)
        rules = [
            (self.max_tokens >= 1, f"--max-tokens must be positive, got {self.max_tokens}"),
            (
                self.max_input_tokens >= 1,
                f"--max-input-tokens must be positive, got {self.max_input_tokens}",
            ),
            (self.chunk_lines >= 1, f"chunk_lines must be positive, got {self.chunk_lines}"),
            (self.threads >= 0, f"--threads must be >= 0, got {self.threads}"),
            (self.workers >= 1, f"--workers must be >= 1, got {self.workers}"),
            (
                self.dtype in DTYPES,
                f"--dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}",
            ),
            (
                self.quantize in ("", "int8"),
                f"--quantize must be int8 (or empty), got {self.quantize!r}",
            ),
            (
                self.cpu_matmul in CPU_MATMULS,
                f"--cpu-matmul must be one of {', '.join(CPU_MATMULS)}, got {self.cpu_matmul!r}",
            ),
            (
                not (self.split_sentences and self.search.nbest > 1),
                "--split-sentences gives one translation per line; it cannot be combined with "
                f"--nbest {self.search.nbest}",
            ),
            (
                self.format in TEXT_FORMATS,
                f"--format must be one of {', '.join(TEXT_FORMATS)}, got {self.format!r}",
            ),
            (
                self.format == "text" or (self.search.nbest == 1 and not self.search.alignment),
                f"--format {self.format} gives one document; it cannot be combined with --nbest or "
                "--alignment",
            ),
            (
                not self.constraints_in_input
                or (self.format == "text" and not self.split_sentences),
                "--constraints gives phrases per input line, which must be one sentence: it cannot "
                "be combined with --split-sentences or --format html/xml (use --glossary, whose "
                "terms are found per sentence)",
            ),
            (self.draft_tokens >= 1, f"--draft-tokens must be at least 1, got {self.draft_tokens}"),
            (
                not self.draft or self.engine == "mtkit",
                f"--draft runs with --engine mtkit only (got --engine {self.engine})",
            ),
            (
                not (self.draft and self.shortlist),
                "--draft cannot be combined with --shortlist "
                "(the models check the draft's pieces over the whole vocabulary; "
                "--draft-shortlist restricts the draft)",
            ),
            (
                self.compile in COMPILE_MODES,
                f"--compile must be one of {', '.join(COMPILE_MODES)}, got {self.compile!r}",
            ),
            (
                self.compile != "on" or self.engine == "mtkit",
                f"--compile compiles mtkit's own engine (got --engine {self.engine})",
            ),
            (
                not (self.compile == "on" and (self.shortlist or self.draft_shortlist)),
                f"--compile cannot be combined with "
                f"{'--shortlist' if self.shortlist else '--draft-shortlist'} yet (a shortlisted "
                "output layer is not compiled); leave one out",
            ),
            (
                0.0 <= self.draft_confidence < 1.0,
                f"--draft-confidence must be in [0, 1), got {self.draft_confidence}",
            ),
            (
                self.draft_quantize in ("", "int8", "none"),
                f"--draft-quantize must be int8 or none, got {self.draft_quantize!r}",
            ),
            (
                self.draft_dtype in ("", *FLOAT_TYPES),
                f"--draft-dtype must be one of {', '.join(FLOAT_TYPES)}, got {self.draft_dtype!r}",
            ),
            (
                self.draft
                or not (
                    self.draft_quantize
                    or self.draft_shortlist
                    or self.draft_confidence
                    or self.draft_dtype
                ),
                "--draft-quantize, --draft-dtype, --draft-shortlist and --draft-confidence need "
                "--draft",
            ),
            (
                not (self.draft_quantize == "int8" and self.draft_dtype not in ("", "fp32")),
                f"--draft-quantize int8 runs with --draft-dtype fp32 only (got --draft-dtype "
                f"{self.draft_dtype})",
            ),
            (
                self.format == "text" or not self.search.scores,
                f"--format {self.format} gives one document; it cannot be combined with --scores "
                "or --word-scores (scores are per line)",
            ),
        ]
        for ok, message in rules:
            if not ok:
                raise MtkitError(message)

    @classmethod
    def from_flat(cls, values: dict[str, Any], where: str = "config") -> TranslateConfig:
        """Build from one flat mapping (command-line flags): SearchConfig's fields go to
        ``search``, the rest to the runtime settings; unknown names and wrong types refused."""
        names = {f.name for f in dataclasses.fields(SearchConfig)}
        search = {k: v for k, v in values.items() if k in names}
        runtime = {k: v for k, v in values.items() if k not in names}
        return from_dict(cls, {**runtime, "search": search}, where)


def alignment_layer(asked: int, layers: int) -> int:
    """``asked`` (0-based, or negative from the top: -1 the last layer) as a layer index of a
    decoder with ``layers`` layers."""
    index = asked + layers if asked < 0 else asked
    if not 0 <= index < layers:
        raise MtkitError(
            f"--alignment-layer {asked}: the model has {layers} decoder "
            f"layer{'s' if layers != 1 else ''} (0 to {layers - 1}, or -1 to "
            f"-{layers})"
        )
    return index
