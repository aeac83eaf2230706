"""`mtkit translate -m CKPT [-i IN] [-o OUT]`: batched beam search, greedy or sampling."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from mtkit.cli.common import config_option, user_errors
from mtkit.config import COMPILE_MODES, DTYPES, SearchConfig, TranslateConfig
from mtkit.engines import ENGINES, engine_names

# (flags, SearchConfig or TranslateConfig field, type, help); every default comes from them
SEARCH_OPTIONS: list[tuple[tuple[str, ...], str, Any, str]] = [
    (
        ("-b", "--beam"),
        "beam",
        click.IntRange(1),
        "Beam width; 1 is greedy decoding (--sampling: 1).",
    ),
    (
        ("-n", "--nbest"),
        "nbest",
        click.IntRange(1),
        "Hypotheses per input (TSV: LINE RANK SCORE LOGPROB TRANSLATION).",
    ),
    (("--lenpen",), "lenpen", float, "Length penalty exponent alpha."),
    (
        ("--lenpen-style",),
        "lenpen_style",
        click.Choice(["fairseq", "gnmt"]),
        "fairseq: logprob/len**alpha; gnmt: logprob/((5+len)/6)**alpha.",
    ),
    (("--max-len-a",), "max_len_a", float, "Max output length = a * source pieces + b."),
    (("--max-len-b",), "max_len_b", click.IntRange(0), "See --max-len-a."),
    (("--min-len",), "min_len", click.IntRange(0), "Tokens required before EOS."),
    (
        ("--no-repeat-ngram",),
        "no_repeat_ngram",
        click.IntRange(0),
        "Never repeat an n-gram of this size (0: off).",
    ),
    (("--unk-penalty",), "unk_penalty", float, "Subtracted from UNK's log-probability."),
    (("--sampling",), "sampling", None, "Sample nbest outputs per input instead of searching."),
    (("--top-k",), "top_k", click.IntRange(0), "Sampling: only the k likeliest tokens."),
    (("--top-p",), "top_p", float, "Sampling: nucleus of this probability mass."),
    (("--temperature",), "temperature", float, "Sampling temperature."),
    (("--seed",), "seed", int, "Sampling seed."),
    (
        ("--max-tokens",),
        "max_tokens",
        click.IntRange(1),
        "Source tokens per batch, padding counted.",
    ),
    (
        ("--max-input-tokens",),
        "max_input_tokens",
        click.IntRange(1),
        "Longer inputs are truncated to this many pieces (with a warning).",
    ),
    (("--device",), "device", str, "auto, cpu, cuda or cuda:N."),
    (
        ("--dtype",),
        "dtype",
        click.Choice(DTYPES),
        "Precision. CPU bf16: linear layers in bf16 (fast with AVX512-BF16 or AMX); fp16: CUDA "
        "only; auto: bf16 on CPUs where the ablation found no loss (mtkit/cpu.py), else fp32; "
        "fast: as auto, with int8 linear layers where that is fp32 on a CPU.",
    ),
    (("--quantize",), "quantize", click.Choice(["int8"]), "Dynamic int8 quantization (CPU)."),
    (
        ("--cpu-matmul",),
        "cpu_matmul",
        click.Choice(["onednn", "default"]),
        "CPU fp32: pack linear weights once for oneDNN, or torch's default matmul.",
    ),
    (
        ("--compile",),
        "compile",
        {"type": click.Choice(COMPILE_MODES), "is_flag": False, "flag_value": "on"},
        "CPU: run the decoder's step as one compiled graph (AOTInductor; the same output in "
        "fp32). The first run of an architecture and precision on a machine compiles for a "
        "minute or more; later runs load it from the cache ($MTKIT_COMPILED_DIR, else "
        "~/.cache/mtkit/compiled) at once. --compile alone: on (refuses what cannot be "
        "compiled); auto: compiled where it can be (a CPU, mtkit's engine, no shortlist), eager "
        "elsewhere.",
    ),
    (
        ("--threads",),
        "threads",
        click.IntRange(0),
        "CPU threads, per worker (0: torch's default, divided among the workers).",
    ),
    (
        ("--workers",),
        "workers",
        click.IntRange(1),
        "Batches decoded at once on CPU, each by its own worker (mtkit: a process; ctranslate2: "
        "inter_threads).",
    ),
    (
        ("--tgt-lang",),
        "tgt_lang",
        str,
        "Multilingual models: translate into this language (adds >>TGT<< to lines without a tag).",
    ),
    (
        ("--split-sentences",),
        "split_sentences",
        None,
        "Each input line is a text: cut into sentences, each translated, put back with the "
        "line's spacing (default: each line is one sentence).",
    ),
    (
        ("--sentence-ends/--no-sentence-ends",),
        "sentence_ends",
        None,
        "Read the sentence ends the input leaves out as the model's training data had them: a "
        "sentence without a final mark gets the data's (a full stop), and with "
        "--split-sentences sentences run on into one line are cut where a word that opens the "
        "data's sentences follows a lowercase word (checkpoints that record the style).",
    ),
    (
        ("--spelling/--no-spelling",),
        "spelling",
        None,
        "Correct typos: a word the training sources never had, one edit (a letter dropped, "
        "added, replaced, or two swapped) from words they had, becomes the most frequent of "
        "them, its case kept (checkpoints that record their words; a glossary's terms kept).",
    ),
    (
        ("--format",),
        "format",
        click.Choice(["text", "html", "xml"]),
        "text: one line (one sentence, or --split-sentences one text) per line; html, xml: the "
        "whole input is one document, its markup carried to the translated words.",
    ),
    (
        ("--spans/--no-spans",),
        "spans",
        None,
        "Keep URLs, e-mail addresses, numbers, @mentions, #hashtags, emoji and `code` verbatim "
        "(masked before the model, restored after).",
    ),
    (
        ("--alignment",),
        "alignment",
        None,
        "Also write each translation's word alignment: TRANSLATION<TAB>ALIGNMENT, Moses i-j "
        "pairs over whitespace words (0-based), from the model's cross-attention.",
    ),
    (
        ("--alignment-layer",),
        "alignment_layer",
        int,
        "Decoder layer whose cross-attention (averaged over heads) aligns words; negative counts "
        "from the top (-1: the last layer).",
    ),
    (
        ("--constraints",),
        "constraints_in_input",
        None,
        "Each input line is SOURCE<TAB>PHRASE<TAB>PHRASE... (fairseq's convention): its "
        "translation contains every phrase (lexically constrained beam search, mtkit engine); "
        "lines without a tab are unconstrained.",
    ),
    (
        ("--constraints-ordered",),
        "constraints_ordered",
        None,
        "As --constraints, the phrases in their order.",
    ),
    (
        ("--glossary",),
        "glossary",
        click.Path(),
        "TSV of source term<TAB>target term: a sentence containing a source term (on word "
        "boundaries) must translate it as the target term (a constraint).",
    ),
    (
        ("--glossary-ignore-case",),
        "glossary_ignore_case",
        None,
        "Glossary source terms match whatever their case (default: case-sensitive).",
    ),
    (
        ("--scores",),
        "scores",
        None,
        "Also write each translation's score: SCORE<TAB>TRANSLATION, the length-normalised "
        "log-probability (logprob / (pieces + EOS); a line of several sentences: over all its "
        "pieces).",
    ),
    (
        ("--word-scores",),
        "word_scores",
        None,
        "Also write each word's score (implies --scores): SCORE<TAB>TRANSLATION<TAB>WORD_SCORES, "
        "the mean log-probability of each whitespace word's pieces.",
    ),
    (
        ("--guard/--no-guard",),
        "guard",
        None,
        "A line whose translation degenerates (a run of one character or piece far beyond "
        "anything in its source, or far more pieces than it) is translated again lowercased "
        "(its case put back), in parts, or as the last resort has those runs cut short; a "
        "warning names the line.",
    ),
    (
        ("--draft",),
        "draft",
        click.Path(),
        "Speculative decoding (greedy, --beam 1): this small checkpoint, with the same spm "
        "models, proposes tokens that the models check in one pass; the output is theirs.",
    ),
    (
        ("--draft-tokens",),
        "draft_tokens",
        click.IntRange(1),
        "Tokens the --draft model proposes per pass of the models.",
    ),
    (
        ("--draft-confidence",),
        "draft_confidence",
        click.FloatRange(0.0, 1.0, max_open=True),
        "Stop a pass's proposals after one the draft gives a probability below this (0: always "
        "--draft-tokens); the output is the models' either way.",
    ),
    (
        ("--draft-quantize",),
        "draft_quantize",
        click.Choice(["int8", "none"]),
        "The draft's precision: int8, or none; unset, the draft is quantized as --quantize "
        "says. The output is the models' either way; an int8 draft proposes faster.",
    ),
    (
        ("--draft-dtype",),
        "draft_dtype",
        click.Choice(["fp32", "bf16", "fp16"]),
        "The draft's float type; unset, the models' (--dtype). The output is the models' either "
        "way; a bf16 draft proposes faster on a CPU with bf16 hardware. The draft follows "
        "--quantize only in fp32.",
    ),
    (
        ("--draft-shortlist",),
        "draft_shortlist",
        click.Path(),
        "Lexical shortlist (`mtkit shortlist build`) the --draft guesses within: its output layer "
        "reads only the pieces the source allows; the models still check over the whole "
        "vocabulary, so the output is unchanged.",
    ),
    (
        ("--shortlist",),
        "shortlist",
        click.Path(),
        "Lexical shortlist (`mtkit shortlist build`): score only the target pieces the source "
        "pieces list, plus the frequent ones (mtkit engine; ctranslate2: export with "
        "--shortlist).",
    ),
    (
        ("--engine",),
        "engine",
        click.Choice(engine_names()),
        "; ".join(f"{e.name}: -m names a {e.model_format}" for e in ENGINES.values()) + ".",
    ),
]


SEARCH_FIELDS = {f.name for f in dataclasses.fields(SearchConfig)}


def search_options(
    func: Callable, rows: list | None = None, defaults: dict[str, Any] | None = None
) -> Callable:
    """One option per row of ``rows`` (SEARCH_OPTIONS), its default and --help from
    SearchConfig or TranslateConfig, or for the fields of ``defaults`` from the config given
    there (`mtkit serve`'s :class:`~mtkit.config.ServedPath`); the value is None unless given
    (the config fills in the rest)."""
    for flags, name, kind, help_text in reversed(SEARCH_OPTIONS if rows is None else rows):
        config = SearchConfig if name in SEARCH_FIELDS else TranslateConfig
        config = (defaults or {}).get(name, config)
        attrs: dict[str, Any] = (
            {"is_flag": True}
            if kind is None
            else dict(kind)
            if isinstance(kind, dict)
            else {"type": kind}
        )
        option = config_option(
            *flags, config=config, field=name, override=True, help=help_text, **attrs
        )
        func = option(func)
    return func


@click.command()
@click.option(
    "-m",
    "--model",
    "models",
    multiple=True,
    required=True,
    type=click.Path(),
    help="Checkpoint; repeat for an ensemble (same spm models).",
)
@click.option(
    "-i",
    "--input",
    "input_path",
    default="-",
    show_default=True,
    type=click.Path(),
    help="Source text, one sentence (--split-sentences: one text) per line ('-': stdin).",
)
@click.option(
    "-o",
    "--output",
    "output_path",
    default="-",
    show_default=True,
    type=click.Path(),
    help="Where to write translations ('-': stdout).",
)
@search_options
@click.option("-q", "--quiet", is_flag=True, help="No progress bar and no summary on stderr.")
@click.option(
    "--warm",
    type=click.FloatRange(min=0, min_open=True),
    help="Keep the model loaded in a resident process for this many seconds after each call, "
    "and translate through it: the next call with the same checkpoints and options skips "
    "loading (text input only; docs/translate.md).",
)
def translate(
    models: tuple[str, ...],
    input_path: str,
    output_path: str,
    quiet: bool,
    warm: float | None,
    **options: Any,
) -> None:
    """Translate text with one checkpoint or an ensemble: one output line per input line."""
    with user_errors():
        given = {key: value for key, value in options.items() if value is not None}
        config = TranslateConfig.from_flat(given, where="mtkit translate")
        if warm is not None:  # a thin client: no torch, no model in this process
            from mtkit.pipeline.warm import translate_warm

            stats = translate_warm(list(models), input_path, output_path, config, warm)
            if not quiet:
                click.echo(f"mtkit translate: {stats}", err=True)
            return
        from mtkit.pipeline.signals import Interrupted
        from mtkit.pipeline.translate import translate_file

        try:
            stats = translate_file(
                list(models),
                input_path,
                output_path,
                config,
                show_progress=not quiet and sys.stderr.isatty(),
            )
        except BrokenPipeError:  # `mtkit translate ... | head`: stop quietly, like other tools
            _silence_stdout()
            sys.exit(1)
        except Interrupted as stop:  # SIGINT/SIGTERM: whole chunks on stdout, no -o file
            kept = f"the first {stop.lines} lines were written"
            if output_path != "-":
                kept = f"{output_path} was not written ({stop.lines} lines were translated)"
            click.echo(f"mtkit translate: {stop}: {kept}", err=True)
            sys.exit(128 + stop.signum)
        if not quiet:
            click.echo(f"mtkit translate: {stats}", err=True)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so Python's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
