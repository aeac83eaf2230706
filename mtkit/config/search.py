"""One config dataclass per stage, YAML loading, and type-checked overrides.

Every config is plain data (str, int, float, bool, lists of those, None) so that it round-trips
through YAML and lives inside checkpoints that load with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from mtkit.errors import MtkitError

# ---------------------------------------------------------------------------------------------
# Model


@dataclass
class ModelConfig:
    """Transformer encoder-decoder (Vaswani et al., 2017)."""

    src_vocab_size: int = 8000
    tgt_vocab_size: int = 8000
    d_model: int = 256
    ffn_dim: int = 1024
    heads: int = 4
    encoder_layers: int = 3
    decoder_layers: int = 3
    dropout: float = 0.1
    attention_dropout: float = 0.1
    activation_dropout: float = 0.0
    pre_norm: bool = False  # False: post-LN as in the paper; True: pre-LN with final norms
    tie_output: bool = True  # target embedding == output projection
    share_all_embeddings: bool = False  # source == target == output (joint vocabulary)
    max_positions: int = 1024
    # variants (issue 12); the defaults are the model above, so every older checkpoint loads
    norm: str = "layernorm"  # layernorm | rmsnorm (Zhang & Sennrich 2019)
    norm_eps: float = 1e-5
    positions: str = "sinusoidal"  # sinusoidal | learned | relative | rope | alibi
    max_relative_position: int = 16  # positions=relative: clip distance k (Shaw et al. 2018)
    kv_heads: int = 0  # key/value heads: 0 = heads; 1 = multi-query; else grouped-query
    ffn_activation: str = "relu"  # relu | gelu | silu | swiglu | geglu (gated: hidden 2/3 ffn_dim)
    bias: bool = True  # False: no biases in linear layers and norms
    decoder_self_attention: str = "attention"  # attention | average (Zhang et al. 2018)
    share_layers: bool = False  # one encoder and one decoder layer applied *_layers times
    # imported models (issue 15: Marian/OPUS-MT); the defaults are mtkit's own model
    scale_embedding: bool = True  # embeddings x sqrt(d_model); False: x 1 (Marian's option)
    output_bias: bool = False  # a fixed bias on the output logits (Marian's final_logits_bias)


MODEL_PRESETS: dict[str, dict[str, Any]] = {
    "transformer-small": dict(d_model=256, ffn_dim=1024, heads=4, encoder_layers=3,
                              decoder_layers=3, dropout=0.1),
    "transformer-base": dict(d_model=512, ffn_dim=2048, heads=8, encoder_layers=6,
                             decoder_layers=6, dropout=0.1),
    "transformer-big": dict(d_model=1024, ffn_dim=4096, heads=16, encoder_layers=6,
                            decoder_layers=6, dropout=0.3),
    # Kasai et al. 2021, "Deep Encoder, Shallow Decoder": the decoder's steps are the slow part
    "transformer-deep-shallow": dict(d_model=256, ffn_dim=1024, heads=4, encoder_layers=6,
                                     decoder_layers=1, dropout=0.1),
}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Tokenizer and data


@dataclass
class SpmConfig:
    """Sentencepiece BPE training."""

    inputs: list[str] = field(default_factory=list)  # text files, one sentence per line
    model_prefix: str = "spm"  # writes PREFIX.model and PREFIX.vocab
    vocab_size: int = 8000
    character_coverage: float = 1.0
    input_sentence_size: int = 0  # sample this many sentences (0: use all)
    seed: int = 1
    num_threads: int = 2
    # or, instead of inputs, a parallel corpus as `mtkit prepare` reads it (see PrepareConfig)
    train: str = ""
    src_lang: str = ""
    tgt_lang: str = ""
    joint: bool = True  # True: PREFIX.model; False: PREFIX.SRC.model and PREFIX.TGT.model
    format: str = "auto"  # auto | text | tsv | hf
    hf_config: str = ""
    pairs: list[str] = field(default_factory=list)  # or several: SRC-TGT=SOURCE (multilingual)


@dataclass
class PrepareConfig:
    """Read a parallel corpus, clean it, encode it with spm, and binarize it."""

    src_lang: str = "en"
    tgt_lang: str = "de"
    out_dir: str = "data-bin"
    src_spm: str = ""
    tgt_spm: str = ""  # empty: same model as src_spm (joint vocabulary)
    tokenizer_from: str = ""  # or a checkpoint: its spm models and vocabulary (fine-tuning)
    # sources, per split: a file prefix (PREFIX.SRC/PREFIX.TGT), a .tsv file, a parquet/json(l)
    # file or save_to_disk directory in the HF translation schema, or hf:NAME[:SPLIT] (the hub)
    train: str = ""
    valid: str = ""
    test: str = ""
    format: str = "auto"  # auto | text | tsv | hf
    hf_config: str = ""  # HF dataset configuration, e.g. "de-en"
    max_tokens: int = 256  # drop pairs longer than this (spm pieces, either side); 0: no limit
    max_ratio: float = 3.0  # drop pairs whose length ratio exceeds this; 0: no limit
    dedup: bool = False  # drop exact duplicate pairs
    workers: int = 2  # encoding processes; 0: encode in the main process
    chunk_size: int = 2000  # pairs per encoding job
    force: bool = False  # replace an existing out_dir
    # multilingual (mtkit.data.tags): SRC-TGT=SOURCE per corpus, instead of train/valid/test
    pairs: list[str] = field(default_factory=list)
    valid_pairs: list[str] = field(default_factory=list)
    test_pairs: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Training


@dataclass
class TrainConfig:
    """`mtkit train`: optimisation, batching, validation and checkpointing."""

    data: str = ""  # binarized dataset directory (mtkit prepare)
    run_dir: str = "runs/default"
    preset: str = "transformer-small"
    init_from: str = ""  # a checkpoint whose architecture and weights start a new run
    seed: int = 1
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    # auto (CUDA: bf16 if supported, else fp16; CPU: see mtkit/cpu.py) | fp32 | bf16 | fp16
    precision: str = "auto"
    # per batch and process: pairs x (max(source, target) + 1) of its longest pair, padding counted
    max_tokens: int = 4096
    update_freq: int = 1  # gradient accumulation
    lr: float = 7e-4
    warmup_updates: int = 4000
    warmup_init_lr: float = 1e-7
    adam_betas: list[float] = field(default_factory=lambda: [0.9, 0.98])
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    clip_norm: float = 1.0  # 0: no clipping
    label_smoothing: float = 0.1
    max_updates: int = 0  # 0: no limit
    max_epochs: int = 0  # 0: no limit
    max_time: float = 0.0  # wall-clock budget in seconds; 0: no limit
    validate_every: int = 1000  # updates
    validate_bleu: bool = True
    valid_beam: int = 1
    valid_max_sentences: int = 0  # decode at most this many validation sentences (0: all)
    save_every: int = 1000  # updates
    keep_last: int = 5
    patience: int = 0  # early stop after this many validations without BLEU gain; 0: never
    log_every: int = 50
    num_workers: int = 0
    nan_policy: str = "stop"  # stop | skip
    max_skipped_batches: int = 10
    # multilingual data: sample directions by size ** (1 / T); 1: every pair once per epoch
    pair_temperature: float = 1.0


# ---------------------------------------------------------------------------------------------
# Decoding and evaluation


LENPEN_STYLES = ("fairseq", "gnmt")  # fairseq: len**a | gnmt: ((5+len)/6)**a


@dataclass(frozen=True)
class SearchConfig:
    """What a search computes: beam search, greedy decoding (beam 1) or sampling.

    Validated when built, so every SearchConfig that exists is usable. ``beam`` left unset is 5
    for beam search and 1 with ``sampling``, which draws ``nbest`` independent samples.
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
            (self.sampling or self.nbest <= beam,
             f"--nbest {self.nbest} exceeds --beam {beam} (nbest must be <= beam)"),
            (not self.sampling or beam == 1,
             f"--sampling draws nbest samples per input; it takes no --beam (got {beam})"),
            (self.lenpen_style in LENPEN_STYLES, f"--lenpen-style must be one of "
             f"{', '.join(LENPEN_STYLES)}, got {self.lenpen_style!r}"),
            (self.min_len >= 0, f"--min-len must be >= 0, got {self.min_len}"),
            (self.max_len_a >= 0 and self.max_len_b >= 0, "--max-len-a/-b must be >= 0"),
            (self.no_repeat_ngram >= 0, "--no-repeat-ngram must be >= 0"),
            (self.temperature > 0, f"--temperature must be > 0, got {self.temperature}"),
            (self.top_k >= 0, f"--top-k must be >= 0, got {self.top_k}"),
            (0 < self.top_p <= 1, f"--top-p must be in (0, 1], got {self.top_p}"),
        ]  # fmt: skip

    def replace(self, **changes: Any) -> SearchConfig:
        """A copy with ``changes`` (validated again); ``beam`` re-resolves if not given."""
        values = {**dataclasses.asdict(self), **changes}
        if "beam" not in changes and "sampling" in changes:
            values["beam"] = None
        return SearchConfig(**values)


ENGINES = ("mtkit", "ctranslate2")
DTYPES = ("auto", "fp32", "bf16", "fp16")
CPU_MATMULS = ("onednn", "default")


@dataclass
class TranslateConfig:
    """`mtkit translate`: the search, and how and where it runs."""

    search: SearchConfig = field(default_factory=SearchConfig)
    max_tokens: int = 4096  # source tokens per batch, padding counted
    max_input_tokens: int = 1000  # longer inputs are truncated to this many pieces (documented cap)
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    dtype: str = "fp32"  # fp32 | bf16 (CPU: bf16 linear layers) | fp16 (CUDA) | auto (mtkit/cpu.py)
    quantize: str = ""  # "" | int8
    cpu_matmul: str = "onednn"  # CPU fp32: onednn (weights packed once) | default (torch's)
    threads: int = 0  # torch CPU threads; 0: torch's default
    engine: str = "mtkit"  # mtkit | ctranslate2 (-m names an `mtkit export` directory)
    chunk_lines: int = 10000  # lines read, sorted by length and translated at a time (streaming)
    tgt_lang: str = ""  # multilingual models: lines without a >>xx<< tag get this one

    def __post_init__(self) -> None:
        rules = [
            (self.max_tokens >= 1, f"--max-tokens must be positive, got {self.max_tokens}"),
            (self.max_input_tokens >= 1,
             f"--max-input-tokens must be positive, got {self.max_input_tokens}"),
            (self.chunk_lines >= 1, f"chunk_lines must be positive, got {self.chunk_lines}"),
            (self.threads >= 0, f"--threads must be >= 0, got {self.threads}"),
            (self.dtype in DTYPES, f"--dtype must be one of {', '.join(DTYPES)}, "
             f"got {self.dtype!r}"),
            (self.quantize in ("", "int8"), f"--quantize must be int8 (or empty), "
             f"got {self.quantize!r}"),
            (self.cpu_matmul in CPU_MATMULS, f"--cpu-matmul must be one of "
             f"{', '.join(CPU_MATMULS)}, got {self.cpu_matmul!r}"),
            (self.engine in ENGINES, f"--engine: unknown engine {self.engine!r} "
             f"({' or '.join(ENGINES)})"),
        ]  # fmt: skip
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


LOG_LEVELS = ("debug", "info", "warning", "error")


@dataclass
class ServeConfig:
    """`mtkit serve`: the HTTP side, the cross-request batcher and the request limits."""

    host: str = "127.0.0.1"
    port: int = 8000
    source_lang: str = ""  # "": read from the checkpoint (error if it holds none)
    target_lang: str = ""
    max_batch_tokens: int = 2048  # source pieces (+EOS) per batch, over all requests in it
    max_wait_ms: float = 5.0  # how long the oldest waiting request may wait for others
    queue_size: int = 256  # requests waiting for the model; beyond: 503 with Retry-After
    timeout: float = 30.0  # seconds from arrival to answer; beyond: 504
    max_body_bytes: int = 1_000_000  # beyond: 413
    max_chars: int = 20_000  # characters of text per request; beyond: 400
    max_lines: int = 200  # lines per request (texts split on newlines); beyond: 400
    api_key: str = ""  # "": no key; else required on POST /translate
    log_level: str = "info"  # per-request lines are logged at info

    def __post_init__(self) -> None:
        rules = [
            (0 <= self.port <= 65535, f"--port must be in 0..65535, got {self.port}"),
            (self.max_batch_tokens >= 1, "--max-batch-tokens must be positive"),
            (self.max_wait_ms >= 0, "--max-wait-ms must be >= 0"),
            (self.queue_size >= 1, "--queue-size must be positive"),
            (self.timeout > 0, "--timeout must be positive"),
            (self.max_body_bytes >= 1, "--max-body-bytes must be positive"),
            (self.max_chars >= 1, "--max-chars must be positive"),
            (self.max_lines >= 1, "--max-lines must be positive"),
            (self.log_level in LOG_LEVELS,
             f"--log-level must be one of {', '.join(LOG_LEVELS)}, got {self.log_level!r}"),
            (bool(self.source_lang) == bool(self.target_lang),
             "give both --source-lang and --target-lang, or neither"),
        ]  # fmt: skip
        for ok, message in rules:
            if not ok:
                raise MtkitError(message)


@dataclass
class EvaluateConfig:
    """`mtkit evaluate`: sacrebleu metrics."""

    metrics: list[str] = field(default_factory=lambda: ["bleu", "chrf", "ter"])  # + chrf++
    tokenize: str = ""  # "" : sacrebleu's default for the metric (13a for BLEU)
    lowercase: bool = False  # BLEU and chrF; TER ignores case anyway (sacrebleu's default)
    paired_bs_n: int = 1000
    paired_ar_n: int = 10000
    seed: int = 12345
    input: str = "-"  # hypotheses, one per line; "-": stdin
    refs: list[str] = field(default_factory=list)  # one file per reference translation
    compare: list[str] = field(default_factory=list)  # other systems: paired test vs `input`
    paired: str = "bs"  # bs (paired bootstrap resampling) | ar (approximate randomization)
    checkpoints: list[str] = field(default_factory=list)  # translate `src` instead of `input`
    src: str = ""  # source file translated with `checkpoints`
    output: str = ""  # with `checkpoints`: also write the translations here
    width: int = 1  # decimals printed (as `sacrebleu -w`)


# ---------------------------------------------------------------------------------------------
# YAML and overrides

C = TypeVar("C")


def _check_value(name: str, value: Any, annotation: Any, where: str) -> Any:
    """Return ``value`` converted to ``annotation`` or raise MtkitError naming the key."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        if value is None and type(None) in args:
            return None
        annotation = next(a for a in args if a is not type(None))
        origin = typing.get_origin(annotation)
    if dataclasses.is_dataclass(annotation):
        if isinstance(value, annotation):
            return value
        return from_dict(annotation, value, f"{where}: {name}")
    if origin is list:
        (item,) = typing.get_args(annotation)
        if not isinstance(value, list | tuple):
            raise MtkitError(f"{where}: '{name}' must be a list, got {value!r}")
        return [_check_value(name, v, item, where) for v in value]
    if annotation is bool:
        if isinstance(value, bool):
            return value
    elif annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif annotation is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads 1e-3 (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
    elif annotation is str:
        if isinstance(value, str):
            return value
    else:  # pragma: no cover - every field uses one of the types above
        return value
    raise MtkitError(
        f"{where}: '{name}' must be {annotation.__name__}, got {type(value).__name__} {value!r}"
    )


def _parse_scalar(text: str) -> Any:
    """Parse a command-line override value with YAML rules (1 -> int, true -> bool, ...)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def from_dict(cls: type[C], data: dict[str, Any], where: str = "config") -> C:
    """Build ``cls`` from a mapping, rejecting unknown keys and wrong types with a clear error."""
    if not isinstance(data, dict):
        raise MtkitError(f"{where}: expected a mapping of options, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs = {}
    for key, value in data.items():
        if key not in names:
            raise MtkitError(f"{where}: unknown option '{key}' (known: {', '.join(sorted(names))})")
        kwargs[key] = _check_value(key, value, hints[key], where)
    return cls(**kwargs)


def apply_overrides(config: C, overrides: dict[str, Any], where: str = "override") -> C:
    """Return a copy of ``config`` with ``overrides`` (already-typed or string values) applied."""
    data = dataclasses.asdict(config)  # type: ignore[call-overload]
    for key, value in overrides.items():
        data[key] = _parse_scalar(value) if isinstance(value, str) else value
    hints = typing.get_type_hints(type(config))
    for key, value in overrides.items():  # strings stay strings where the field is a str
        if isinstance(value, str) and hints.get(key) is str:
            data[key] = value
    return from_dict(type(config), data, where)


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping, with one-line errors for missing files and bad syntax."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MtkitError(f"{path}: no such config file") from None
    except UnicodeDecodeError as err:
        raise MtkitError(f"{path}: not UTF-8 ({err.reason})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise MtkitError(f"{path}:{_yaml_problem(err, text)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise MtkitError(f"{path}: expected a mapping of options at the top level")
    return data


def _yaml_problem(err: yaml.YAMLError, text: str) -> str:
    """`` line N invalid YAML (problem)`` on one line, for any of PyYAML's errors."""
    mark = getattr(err, "problem_mark", None)
    line = f" line {mark.line + 1}" if mark is not None else ""
    if isinstance(err, yaml.reader.ReaderError):  # a character YAML forbids, e.g. NUL
        line = f" line {text.count(chr(10), 0, err.position) + 1}"
    problem = getattr(err, "problem", None) or str(err).strip().splitlines()[0]
    return f"{line} invalid YAML ({problem})"


def to_dict(config: Any) -> dict[str, Any]:
    return dataclasses.asdict(config)
