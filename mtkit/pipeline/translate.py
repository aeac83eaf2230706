"""`mtkit translate`: load checkpoints, stream text through batched search, write one line each.

The input is read in chunks of ``config.chunk_lines`` lines; each chunk is encoded with the
checkpoint's source spm model, sorted by length, cut into batches of at most
``config.max_tokens`` source tokens (padding counted), translated, put back in input order,
detokenized with the target spm model and written (and flushed) before the next chunk is read.
Memory stays bounded whatever the input's size.

Line rules: exactly one output line per input line (``nbest`` > 1: ``nbest`` TSV rows per input
line). Lines are split on ``\\n`` only; a trailing ``\\r`` (CRLF) and a UTF-8 byte-order mark at
the start are dropped. Invalid UTF-8 is decoded with U+FFFD replacement characters and a warning
naming the line (a 10-million-line job should not die at line 9 million). An empty or
whitespace-only line, or one with no sentencepiece pieces, gives an empty translation. A line of
more than ``config.max_input_tokens`` pieces (or the model's ``max_positions - 1``) is truncated,
with a warning naming it. Newlines and tabs that a translation might contain become spaces.

SIGINT and SIGTERM stop a run at once but never in the middle of writing a chunk (see
:mod:`mtkit.pipeline.signals`): on stdout the chunks already written stay, whole and flushed; a
file output is not written at all.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

import torch
from torch import nn

from mtkit.config import TranslateConfig
from mtkit.data.tokenizer import EOS_ID, Tokenizer
from mtkit.decoding.batching import pad_batch, token_batches
from mtkit.decoding.search import Hypothesis, check_config, generate
from mtkit.errors import MtkitError, naming_output
from mtkit.model.packed import onednn_available, pack_linears
from mtkit.model.transformer import Transformer
from mtkit.pipeline.signals import Interrupted, SignalGuard
from mtkit.staging import staged_file
from mtkit.training.checkpoint import load_for_inference

if TYPE_CHECKING:
    from mtkit.export.ct2 import Ct2Model

STDIO = "-"
NBEST_HEADER = "LINE\tRANK\tSCORE\tLOGPROB\tTRANSLATION"
MAX_ENCODING_WARNINGS = 10
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
CPU_MATMULS = ("onednn", "default")


def warn(message: str) -> None:
    print(f"mtkit translate: warning: {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Loading


def resolve_device(name: str) -> torch.device:
    """``auto`` -> CUDA when available, else CPU; refuses devices this machine lacks."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise MtkitError(f"--device: unknown device {name!r} (auto, cpu, cuda, cuda:N)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise MtkitError(f"--device {name}: CUDA is not available on this machine")
    if device.type not in ("cpu", "cuda"):
        raise MtkitError(f"--device {name}: only cpu and cuda are supported")
    return device


def check_precision(device: torch.device, dtype: str, quantize: str) -> None:
    """Refuse precisions the device cannot run, with a one-line error."""
    if dtype not in DTYPES:
        raise MtkitError(f"--dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if dtype == "fp16" and device.type == "cpu":
        raise MtkitError("--dtype fp16 needs a CUDA device; on CPU use fp32 or bf16")
    if dtype == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise MtkitError("--dtype bf16 is not supported by this GPU; use fp16 or fp32")
    if quantize not in ("", "int8"):
        raise MtkitError(f"--quantize must be int8 (or empty), got {quantize!r}")
    if quantize and (device.type != "cpu" or dtype != "fp32"):
        raise MtkitError("--quantize int8 runs on CPU with --dtype fp32 only")


def quantize_int8(model: Transformer) -> nn.Module:
    """Dynamic int8 quantization of every nn.Linear (weights int8, activations quantized per
    batch). A tied output projection gets its own Linear (a copy of the embedding) first, so the
    largest matrix of a small model is quantized too."""
    if model.output is None:
        output = nn.Linear(model.cfg.d_model, model.cfg.tgt_vocab_size, bias=False)
        output.weight = nn.Parameter(model.tgt_embed.weight.detach().clone())
        model.output = output
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization deprecation notices
        from torch.ao.quantization import quantize_dynamic

        return quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)


def _packs_linears(device: torch.device, config: TranslateConfig) -> bool:
    """Whether to pack linear weights for oneDNN: CPU float32 without quantization, when asked
    (``cpu_matmul``) and where this PyTorch build can."""
    if config.cpu_matmul not in CPU_MATMULS:
        raise MtkitError(f"--cpu-matmul must be one of {', '.join(CPU_MATMULS)}, "
                         f"got {config.cpu_matmul!r}")  # fmt: skip
    wanted = device.type == "cpu" and config.dtype == "fp32" and not config.quantize
    return wanted and config.cpu_matmul == "onednn" and onednn_available()


@dataclass
class Translator:
    """Models ready to translate, with their tokenizers and the search configuration."""

    models: list[Transformer]
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    config: TranslateConfig
    device: torch.device
    generator: torch.Generator | None = None

    @property
    def max_source_pieces(self) -> int:
        positions = min(m.cfg.max_positions for m in self.models)
        return min(self.config.max_input_tokens, positions - 1)


def load_translator(checkpoints: list[str], config: TranslateConfig) -> Translator:
    """Load one checkpoint, or several as an ensemble (they must share their spm models)."""
    check_config(config)
    if not checkpoints:
        raise MtkitError("no checkpoint given (-m CHECKPOINT)")
    if config.max_input_tokens < 1 or config.max_tokens < 1 or config.chunk_lines < 1:
        raise MtkitError("--max-input-tokens, --max-tokens and chunk_lines must be positive")
    device = resolve_device(config.device)
    check_precision(device, config.dtype, config.quantize)
    if config.threads > 0:
        torch.set_num_threads(config.threads)
    loaded = [load_for_inference(path, device) for path in checkpoints]
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
    pack = _packs_linears(device, config)
    models = []
    for item in loaded:
        model = item.model.to(DTYPES[config.dtype])
        if config.quantize:
            model = quantize_int8(model)
        elif pack:
            model = pack_linears(model)
        models.append(model)
    generator = torch.Generator(device).manual_seed(config.seed) if config.sampling else None
    return Translator(models, first.src_tokenizer, first.tgt_tokenizer, config, device, generator)


# ---------------------------------------------------------------------------------------------
# Translating a chunk


def _clean(text: str, tab: bool) -> str:
    text = text.replace("\r", " ").replace("\n", " ")
    return text.replace("\t", " ") if tab else text


def encode_lines(tr: Translator, lines: list[str], first_number: int) -> list[list[int]]:
    """Source ids (+ EOS) per line; [] for lines with nothing to translate. Truncates and warns."""
    cap = tr.max_source_pieces
    texts = [line.encode("utf-8", "replace").decode("utf-8") for line in lines]
    ids = tr.src_tokenizer.encode([t if t.strip() else "" for t in texts])
    out = []
    for number, row in enumerate(ids, start=first_number):
        if len(row) > cap:
            warn(f"line {number}: {len(row)} pieces, truncated to the first {cap} "
                 "(--max-input-tokens)")  # fmt: skip
            row = row[:cap]
        out.append(row + [EOS_ID] if row else [])
    return out


Result = list[tuple[str, float, float]]  # (translation, score, logprob) per hypothesis


def translate_ids(
    tr: Translator, sources: list[list[int]]
) -> Iterator[tuple[list[int], list[list[Hypothesis]]]]:
    """(indices, hypotheses) for each batch of the non-empty sources, longest batch first."""
    todo = [i for i, s in enumerate(sources) if s]
    for batch in token_batches([len(sources[i]) for i in todo], tr.config.max_tokens):
        index = [todo[j] for j in batch]
        src = pad_batch([sources[i] for i in index], tr.device)
        yield index, generate(tr.models, src, tr.config, tr.generator)


class Progress(Protocol):
    def update(self, n: int) -> object: ...


def translate_chunk(
    tr: Translator, lines: list[str], first_number: int = 1, progress: Progress | None = None
) -> list[Result | None]:
    """Per line, its hypotheses best first; None for a line with nothing to translate."""
    sources = encode_lines(tr, lines, first_number)
    results: list[Result | None] = [None] * len(lines)
    for index, batch in translate_ids(tr, sources):
        texts = iter(tr.tgt_tokenizer.decode([h.tokens for hyps in batch for h in hyps]))
        for i, hyps in zip(index, batch, strict=True):
            results[i] = [(next(texts), h.score, h.logprob) for h in hyps]
        if progress is not None:
            progress.update(len(index))
    if progress is not None:
        progress.update(sum(1 for s in sources if not s))
    return results


def format_results(results: list[Result | None], first_number: int, nbest: int) -> str:
    """Output text of a chunk: one line per input line, or ``nbest`` TSV rows per input line.

    TSV columns: ``LINE`` (1-based input line), ``RANK`` (1 = best), ``SCORE`` (length-penalised,
    used for ranking), ``LOGPROB`` (summed token log-probabilities incl. EOS), ``TRANSLATION``.
    A line with nothing to translate gives ``nbest`` rows with score 0 and an empty translation.
    """
    if nbest <= 1:
        return "".join(_clean(hyps[0][0] if hyps else "", tab=False) + "\n" for hyps in results)
    rows = []
    for number, hyps in enumerate(results, start=first_number):
        for rank, (text, score, logprob) in enumerate(hyps or [("", 0.0, 0.0)] * nbest, start=1):
            rows.append(f"{number}\t{rank}\t{score:.4f}\t{logprob:.4f}\t{_clean(text, True)}\n")
    return "".join(rows)


# ---------------------------------------------------------------------------------------------
# Streams, files and lists


def read_lines(stream: BinaryIO) -> Iterator[str]:
    """Decode a binary stream line by line (see the module docstring for the rules)."""
    from mtkit.data.lines import decode_lines  # here, not above: a one-function change

    bad = 0

    def replaced(message: str) -> None:  # lenient: warn for the first lines, then go on
        nonlocal bad
        bad += 1
        if bad <= MAX_ENCODING_WARNINGS:
            more = " (further invalid lines not reported)" if bad == MAX_ENCODING_WARNINGS else ""
            warn(f"{message}, bad bytes replaced by U+FFFD{more}")

    name = getattr(stream, "name", None)
    return decode_lines(stream, name if isinstance(name, str) else "<input>", replaced)


def translate_stream(
    tr: Translator | Ct2Model,
    lines: Iterable[str],
    out: BinaryIO,
    progress: Progress | None = None,
    guard: SignalGuard | None = None,
) -> int:
    """Translate ``lines`` chunk by chunk into ``out`` (flushed per chunk); returns the count.

    Under ``guard`` a signal raises :class:`Interrupted` (with the count of lines written)
    between writes, never in the middle of one.
    """
    iterator = iter(lines)
    written = 0
    try:
        while chunk := list(islice(iterator, tr.config.chunk_lines)):
            data = _render_chunk(tr, chunk, written + 1, progress).encode("utf-8")
            with guard.writing() if guard is not None else nullcontext():
                out.write(data)
                out.flush()
                written += len(chunk)
    except Interrupted as err:
        err.lines = written
        raise
    return written


def _render_chunk(
    tr: Translator | Ct2Model, chunk: list[str], number: int, progress: Progress | None
) -> str:
    if isinstance(tr, Translator):
        return format_results(translate_chunk(tr, chunk, number, progress), number, tr.config.nbest)
    from mtkit.export.ct2 import translate_with_ct2

    texts = translate_with_ct2(tr, chunk, number)
    if progress is not None:
        progress.update(len(chunk))
    return "".join(text + "\n" for text in texts)


def load_engine(checkpoints: list[str], config: TranslateConfig) -> Translator | Ct2Model:
    """mtkit's own decoder over checkpoints, or CTranslate2 over one exported directory."""
    if config.engine == "mtkit":
        return load_translator(checkpoints, config)
    if config.engine != "ctranslate2":
        raise MtkitError(f"--engine: unknown engine {config.engine!r} (mtkit or ctranslate2)")
    if len(checkpoints) != 1:
        raise MtkitError("--engine ctranslate2 takes one exported model directory (-m DIR)")
    from mtkit.export.ct2 import load_ct2

    return load_ct2(checkpoints[0], config)


@dataclass
class TranslateStats:
    lines: int
    seconds: float

    def __str__(self) -> str:
        rate = self.lines / self.seconds if self.seconds > 0 else 0.0
        return f"translated {self.lines} lines in {self.seconds:.1f}s ({rate:.1f} lines/s)"


def _check_paths(input: str, output: str) -> None:
    """Fail before loading any model: input missing, output directory missing."""
    if input != STDIO and not Path(input).exists():  # exists(): pipes like <(zcat f.gz) too
        raise MtkitError(f"{input}: no such input file")
    if input != STDIO and Path(input).is_dir():
        raise MtkitError(f"{input}: is a directory, not a text file")
    if output != STDIO and Path(output).is_dir():
        raise MtkitError(f"{output}: is a directory")


def translate_file(
    checkpoints: list[str],
    input: str,
    output: str,
    config: TranslateConfig,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    show_progress: bool = False,
) -> TranslateStats:
    """Translate ``input`` (a path, or ``-`` for ``stdin``) into ``output`` (path or ``-``).

    A file output is written to a temporary file beside it and renamed at the end, so an error
    or an interruption never leaves a partial output. SIGINT or SIGTERM raise
    :class:`Interrupted`: on stdout, the chunks written before it stay (whole and flushed); a
    file output is left as it was.
    """
    _check_paths(input, output)
    start = time.perf_counter()
    progress = None
    with SignalGuard() as guard, naming_output("<stdout>" if output == STDIO else output):
        try:
            tr = load_engine(checkpoints, config)
            progress = _progress_bar() if show_progress else None
            with _open_input(input, stdin) as source:
                if output == STDIO:
                    out = stdout or sys.stdout.buffer
                    count = translate_stream(tr, read_lines(source), out, progress, guard)
                else:
                    count = _translate_to_file(tr, read_lines(source), output, progress, guard)
        finally:
            if progress is not None:
                progress.close()
    return TranslateStats(count, time.perf_counter() - start)


def _open_input(input: str, stdin: BinaryIO | None) -> AbstractContextManager[BinaryIO]:
    if input == STDIO:
        return nullcontext(stdin or sys.stdin.buffer)  # left open: not ours to close
    try:
        return open(input, "rb")
    except OSError as err:
        raise MtkitError(f"{input}: cannot read ({err.strerror or err})") from None


def _translate_to_file(
    tr: Translator | Ct2Model,
    lines: Iterable[str],
    output: str,
    progress: Progress | None,
    guard: SignalGuard | None = None,
) -> int:
    """Write to a temporary file beside ``output``; rename it over ``output`` when complete."""
    with staged_file(output) as handle:
        return translate_stream(tr, lines, handle, progress, guard)


def _progress_bar() -> Any:
    from tqdm import tqdm

    return tqdm(unit=" lines", file=sys.stderr, dynamic_ncols=True, mininterval=0.5)


def translate_lines(checkpoints: list[str], lines: list[str], config: TranslateConfig) -> list[str]:
    """Translate a list of sentences (the best hypothesis each); one output per input."""
    tr = load_translator(checkpoints, config)
    return translate_with(tr, lines)


def translate_with(tr: Translator, lines: list[str]) -> list[str]:
    """Translate with an already loaded :class:`Translator`; one output per input."""
    out: list[str] = []
    size = tr.config.chunk_lines
    for start in range(0, len(lines), size):
        results = translate_chunk(tr, lines[start : start + size], start + 1)
        out.extend(_clean(hyps[0][0], tab=False) if hyps else "" for hyps in results)
    return out
