"""The bad-input matrix: every subcommand against broken, hostile or unusual input.

One row per case. An error row expects a non-zero exit, exactly one line of output (on stderr)
matching the culprit regex, no traceback, nothing on stdout and no file or directory left
behind (the tree under the row's directory is the same before and after). A legitimate-input
row (CRLF, a BOM, empty lines, ...) expects exit 0 and checks the output. Rows run through
click's CliRunner in this process; those marked ``real`` run ``python -m mtkit`` in a
subprocess, to show that no traceback reaches a real terminal either.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pytest
import sentencepiece
import torch
from bad_input_world import (
    AVERAGE,
    CRAFTED,
    DE,
    EN,
    EVALUATE,
    EXPORT,
    HR,
    MB_LINE,
    PAIR,
    PLOT,
    PREPARE,
    SPM,
    TO_FILE,
    TRANSLATE,
    TRUNCATED,
    VALID,
    Row,
    World,
    ckpt_with,
    crafted,
    ct2_model,
    data_copy,
    directory,
    empty_train_split,
    evaluated_like,
    full_disk_in_checkpoint_writer,
    full_disk_in_dataset_writer,
    full_disk_in_translation_output,
    future_ckpt,
    head,
    invoke,
    lines,
    metrics,
    other_tool_ckpt,
    plain_spm,
    png,
    prepared,
    prepared_like_lf,
    prepared_nul,
    reads_anything,
    run_copy,
    run_real,
    scored_as_sacrebleu,
    spm_like_lf,
    spm_written,
    tiny_train,
    torch_threads,
    trained,
    translated_as,
    translated_with_warning,
    tree,
    truncated_ckpt,
    truncated_spm,
    unreadable,
    untouched_run,
    utf16,
    windows,
)
from click.testing import CliRunner
from training.training_helpers import train_args

from mtkit.cli import cli

# ---------------------------------------------------------------------------------------------
# The rows

ROWS = [
    # -- mtkit spm train --------------------------------------------------------------------
    Row("spm-missing-file", [*SPM, "{t}/nope.txt"], error=r"nope\.txt: no such file"),
    Row("spm-directory-as-file", [*SPM, "{t}/d"], {"d": directory}, r"/d: is a directory"),
    Row("spm-unreadable", [*SPM, "{t}/x.txt"], {"x.txt": unreadable(EN)},
        r"x\.txt: permission denied", nonroot=True),
    Row("spm-empty-file", [*SPM, "{t}/x.txt"], {"x.txt": b""}, r"m: no text to train on"),
    Row("spm-invalid-utf8", [*SPM, "{t}/x.txt"], {"x.txt": EN + b"caf\xe9\n"},
        r"x\.txt: line 4: invalid UTF-8 \(byte 0xe9\)"),
    Row("spm-utf16", [*SPM, "{t}/x.txt"], {"x.txt": utf16(EN)},
        r"x\.txt: line 1: invalid UTF-8 \(byte 0xff\)"),
    Row("spm-1mb-line", [*SPM, "{t}/x.txt"], {"x.txt": MB_LINE + b"\n"},
        r"x\.txt: no text to train .*m\.model on: every sentence is longer than 4192 bytes"),
    Row("spm-mismatched-corpus", [*SPM, "--train", "{t}/c", "--src-lang", "en", "--tgt-lang",
        "de"], {"c.en": EN, "c.de": head(DE, 2)}, r"line counts differ: .*c\.en has 3 lines"),
    Row("spm-files-and-corpus", [*SPM, "--train", "{t}/c", "{t}/c.en"], PAIR,
        r"give text FILES or a corpus \(--train/--train-prefix\), not both"),
    Row("spm-wrong-type", [*SPM[:-1], "many", "{t}/c.en"], PAIR,
        r"Invalid value for '--vocab-size': 'many' is not a valid integer"),
    Row("spm-crlf-bom", [*SPM, "{t}/x.txt"], {"x.txt": windows(EN + DE)}, check=spm_like_lf),
    Row("spm-nul-bytes", [*SPM, "{t}/x.txt"], {"x.txt": EN + b"a\x00b\n" + DE},
        check=spm_written(r"wrote .* from 7 sentences")),
    Row("spm-output-dir-created", ["spm", "train", "--model-prefix", "{t}/new/dir/m",
        "--vocab-size", "40", "{t}/c.en", "{t}/c.de"], PAIR,
        check=spm_written(r"wrote .*/new/dir/m\.model .* from 6 sentences")),
    Row("spm-real-terminal", [*SPM, "{t}/nope.txt"], error=r"nope\.txt: no such file",
        real=True),
    # -- mtkit prepare ----------------------------------------------------------------------
    Row("prepare-missing-corpus", [*PREPARE, "--train", "{t}/c"], error=r"c: no such corpus"),
    Row("prepare-directory-as-file", [*PREPARE, "--train", "{t}/c"], {"c.en": directory,
        "c.de": DE}, r"c\.en: is a directory"),
    Row("prepare-unreadable", [*PREPARE, "--train", "{t}/c"], {"c.en": unreadable(EN),
        "c.de": DE}, r"c\.en: permission denied", nonroot=True),
    Row("prepare-empty-files", [*PREPARE, "--train", "{t}/c"], {"c.en": b"", "c.de": b""},
        r"--train .*/c: empty corpus \(no sentence pairs\)"),
    Row("prepare-all-pairs-dropped", [*PREPARE, "--train", "{t}/c"],
        {"c.en": lines("", " "), "c.de": lines("x", "")},
        r"--train .*/c: all 2 pairs were dropped \(empty 2\)"),
    Row("prepare-mismatched-lines", [*PREPARE, "--train", "{t}/c"], {"c.en": EN,
        "c.de": DE + lines("Noch eine.")}, r"line counts differ: .*c\.en has 3 lines, .*c\.de "
        r"has 4"),
    Row("prepare-invalid-utf8", [*PREPARE, "--train", "{t}/c"], {"c.en": EN,
        "c.de": DE[:-3] + b"\xc3(\n"}, r"c\.de: line 3: invalid UTF-8 \(byte 0xc3\)"),
    Row("prepare-invalid-utf8-tsv", [*PREPARE, "--train", "{t}/c.tsv"],
        {"c.tsv": b"a\tb\n\xff\tc\n"}, r"c\.tsv: line 2: invalid UTF-8 \(byte 0xff\)"),
    Row("prepare-tsv-columns", [*PREPARE, "--train", "{t}/c.tsv"], {"c.tsv": b"a\tb\nc\n"},
        r"c\.tsv: line 2: expected 2 tab-separated columns, found 1"),
    Row("prepare-corrupt-gzip", [*PREPARE, "--train", "{t}/c"],
        {"c.en.gz": b"not gzip", "c.de.gz": b"not gzip"}, r"c\.en\.gz: unreadable"),
    Row("prepare-corrupt-jsonl", [*PREPARE, "--train", "{t}/c.jsonl"],
        {"c.jsonl": b"{not json\n"}, r"c\.jsonl: unreadable \(JSON parse error"),
    Row("prepare-missing-spm", [*PREPARE, "--train", "{t}/c", "--spm", "{t}/nope.model"], PAIR,
        r"nope\.model: no such sentencepiece model"),
    Row("prepare-truncated-spm", [*PREPARE, "--train", "{t}/c", "--spm", "{t}/x.model"],
        {**PAIR, "x.model": truncated_spm}, r"x\.model: not a sentencepiece model"),
    Row("prepare-spm-of-another-tool", [*PREPARE, "--train", "{t}/c", "--spm", "{t}/x.model"],
        {**PAIR, "x.model": plain_spm}, r"x\.model: special ids \(pad, unk, bos, eos\) are "
        r"\(-1, 0, 1, 2\), mtkit needs \(0, 1, 2, 3\)"),
    Row("prepare-checkpoint-as-spm", [*PREPARE, "--train", "{t}/c", "--spm", "{ckpt}"], PAIR,
        r"checkpoint_last\.pt: not a sentencepiece model"),
    Row("prepare-same-languages", [*PREPARE, "--train", "{t}/c", "--tgt-lang", "en"], PAIR,
        r"need two different languages, got 'en', 'en'"),
    Row("prepare-negative-workers", [*PREPARE, "--train", "{t}/c", "--workers", "-1"], PAIR,
        r"--workers and --max-tokens must be >= 0"),
    Row("prepare-wrong-type", [*PREPARE, "--train", "{t}/c", "--max-ratio", "high"], PAIR,
        r"Invalid value for '--max-ratio': 'high' is not a valid float"),
    Row("prepare-existing-output", [*PREPARE, "--train", "{t}/c"], {**PAIR, "bin": run_copy()},
        r"bin: already exists \(use --force to replace it\)"),
    Row("prepare-full-disk", [*PREPARE, "--train", "{t}/c"], PAIR,
        r"/bin: cannot write \(No space left on device\)", patch=full_disk_in_dataset_writer),
    Row("prepare-crlf-bom", [*PREPARE, "--train", "{t}/c", "--valid", "{t}/c"],
        {"c.en": windows(EN), "c.de": windows(DE)}, check=prepared_like_lf),
    Row("prepare-nul-bytes", [*PREPARE, "--train", "{t}/c", "--valid", "{t}/c"],
        {"c.en": b"a\x00b\nc\n", "c.de": b"x\ny\n"}, check=prepared_nul),
    Row("prepare-1mb-line", [*PREPARE, "--train", "{t}/c"], {"c.en": EN + MB_LINE + b"\n",
        "c.de": DE + lines("Der Mann.")}, check=prepared("train", read=4, kept=3)),
    Row("prepare-output-dir-created", [*PREPARE[:4], "{t}/new/dir/bin", "--workers", "0",
        "--train", "{t}/c"], PAIR, check=prepared("train", read=3, kept=3)),
    Row("prepare-real-terminal", [*PREPARE, "--train", "{t}/c"], {"c.en": EN,
        "c.de": b"\xff\n"}, r"c\.de: line 1: invalid UTF-8", real=True),
    # -- mtkit train ------------------------------------------------------------------------
    Row("train-missing-dataset", train_args(Path("{t}/nodata"), Path("{t}/run")),
        error=r"nodata: not an mtkit dataset \(no manifest\.json; run `mtkit prepare`\)"),
    Row("train-truncated-dataset", train_args(Path("{t}/d"), Path("{t}/run")),
        {"d": data_copy("train.src.bin", b"\x01\x00")},
        r"train\.src\.bin: size does not match its index \(truncated\?\)"),
    Row("train-garbage-manifest", train_args(Path("{t}/d"), Path("{t}/run")),
        {"d": data_copy("manifest.json", b'{"format_version": 1,')},
        r"manifest\.json: unreadable manifest"),
    Row("train-empty-train-split", train_args(Path("{t}/d"), Path("{t}/run")),
        {"d": empty_train_split}, r"/d: the train split is empty"),
    Row("train-truncated-spm", train_args(Path("{t}/d"), Path("{t}/run")),
        {"d": data_copy("spm.src.model", truncated_spm)},
        r"spm\.src\.model: not a sentencepiece model"),
    Row("train-spm-of-another-tool", train_args(Path("{t}/d"), Path("{t}/run")),
        {"d": data_copy("spm.tgt.model", plain_spm)}, r"spm\.tgt\.model: special ids"),
    Row("train-config-unknown-key", tiny_train("--config", "{t}/c.yaml"),
        {"c.yaml": b"max_updatez: 3\n"}, r"c\.yaml: unknown option 'max_updatez' \(known: "),
    Row("train-config-wrong-type", tiny_train("--config", "{t}/c.yaml"),
        {"c.yaml": b"lr: fast\n"}, r"c\.yaml: 'lr' must be float, got str 'fast'"),
    Row("train-config-model-wrong-type", tiny_train("--config", "{t}/c.yaml"),
        {"c.yaml": b"model:\n  d_model: wide\n"},
        r"c\.yaml: model: 'd_model' must be int, got str 'wide'"),
    Row("train-config-invalid-utf8", tiny_train("--config", "{t}/c.yaml"),
        {"c.yaml": b"lr: 1\n# caf\xe9\n"}, r"c\.yaml: not UTF-8"),
    Row("train-config-nul-byte", tiny_train("--config", "{t}/c.yaml"),
        {"c.yaml": b"lr: 1\nseed: 2\x00\n"},
        r"c\.yaml: line 2 invalid YAML \(unacceptable character #x0000"),
    Row("train-config-missing", tiny_train("--config", "{t}/c.yaml"),
        error=r"c\.yaml: no such config file"),
    Row("train-config-directory", tiny_train("--config", "{t}/d"), {"d": directory},
        r"Invalid value for '--config': File '.*/d' is a directory"),
    Row("train-set-unknown-key", tiny_train("--set", "dropuot=0.3"),
        error=r"unknown option 'dropuot'"),
    Row("train-set-wrong-type", tiny_train("--set", "model.heads=two"),
        error=r"--set model\.\*: 'heads' must be int, got str 'two'"),
    Row("train-fp16-on-cpu", tiny_train("--precision", "fp16"),
        error=r"precision fp16 needs a CUDA device"),
    Row("train-heads-do-not-divide", tiny_train("--set", "model.heads=3"),
        error=r"d_model \(32\) must be divisible by heads \(3\)"),
    Row("train-run-of-another-config", tiny_train("--seed", "9"), {"run": run_copy()},
        r"run was trained with another config \(seed 1 -> 9\)"),
    Row("train-run-dir-is-a-file", tiny_train(), {"run": b"x"},
        r"run: not a directory \(--run-dir\)"),
    Row("train-truncated-checkpoint", tiny_train(),
        {"run": run_copy(("checkpoint_last.pt", truncated_ckpt))},
        r"checkpoint_last\.pt: unreadable checkpoint \(truncated or corrupt"),
    Row("train-checkpoint-of-another-tool", tiny_train(),
        {"run": run_copy(("checkpoint_last.pt", other_tool_ckpt))},
        r"checkpoint_last\.pt: not an mtkit checkpoint"),
    Row("train-checkpoint-of-another-version", tiny_train(),
        {"run": run_copy(("checkpoint_last.pt", future_ckpt))},
        r"checkpoint_last\.pt: checkpoint format 99 \(mtkit 9\.0\); this mtkit .* reads format 1"),
    Row("train-crafted-checkpoint", tiny_train(),
        {"run": run_copy(("checkpoint_last.pt", crafted))}, CRAFTED),
    Row("train-full-disk", ["train", "--run-dir", "{t}/run", "--max-updates", "6", "-q"],
        {"run": run_copy()}, r"checkpoint_6\.pt: could not write checkpoint \(No space left",
        patch=full_disk_in_checkpoint_writer, check=untouched_run),
    Row("train-config-empty", tiny_train("--config", "{t}/c.yaml"), {"c.yaml": b""},
        check=trained(2)),
    Row("train-config-crlf-bom", train_args(Path("{data}"), Path("{t}/run"), "--config",
        "{t}/c.yaml"), {"c.yaml": windows(b"max_updates: 1\nseed: 3\n")},
        check=trained(1, seed=3)),
    Row("train-run-dir-created", train_args(Path("{data}"), Path("{t}/new/dir/run"),
        "--max-updates", "1"), check=trained(1)),
    Row("train-real-terminal", tiny_train("--config", "{t}/c.yaml"),
        {"c.yaml": b"max_updatez: 3\n"}, r"c\.yaml: unknown option 'max_updatez'", real=True),
    # -- mtkit average ----------------------------------------------------------------------
    Row("average-missing", [*AVERAGE, "-c", "{t}/x.pt"], error=r"x\.pt: no such checkpoint"),
    Row("average-directory", [*AVERAGE, "-c", "{t}/x.pt"], {"x.pt": directory},
        r"x\.pt: is a directory, not a checkpoint"),
    Row("average-empty-file", [*AVERAGE, "-c", "{t}/x.pt"], {"x.pt": b""},
        r"x\.pt: empty file, not a checkpoint"),
    Row("average-truncated", [*AVERAGE, "-c", "{t}/x.pt"], {"x.pt": truncated_ckpt},
        TRUNCATED),
    Row("average-other-tool", [*AVERAGE, "-c", "{t}/x.pt"], {"x.pt": other_tool_ckpt},
        r"x\.pt: not an mtkit checkpoint"),
    Row("average-other-version", [*AVERAGE, "-c", "{t}/x.pt"], {"x.pt": future_ckpt},
        r"x\.pt: checkpoint format 99"),
    Row("average-crafted", [*AVERAGE, "-c", "{t}/x.pt"], {"x.pt": crafted}, CRAFTED),
    Row("average-another-model", [*AVERAGE, "-c", "{t}/x.pt"],
        {"x.pt": ckpt_with(model_config__dropout=0.5)},
        r"x\.pt: model config differs from .* \(dropout\)"),
    Row("average-last-and-files", ["average", "--last", "2", "{run}", "-c", "{ckpt}", "-o",
        "{t}/avg.pt"], error=r"give either --last N RUN_DIR or one or more -c CHECKPOINT"),
    Row("average-too-few", ["average", "--last", "3", "{run}", "-o", "{t}/avg.pt"],
        error=r"run: 2 numbered checkpoints, fewer than 3"),
    Row("average-output-dir-missing", ["average", "--last", "2", "{run}", "-o",
        "{t}/nodir/avg.pt"], error=r"nodir: directory does not exist"),
    Row("average-full-disk", ["average", "--last", "2", "{run}", "-o", "{t}/avg.pt"],
        error=r"avg\.pt: could not write checkpoint \(No space left on device\)",
        patch=full_disk_in_checkpoint_writer),
    # -- mtkit translate --------------------------------------------------------------------
    Row("translate-missing-checkpoint", [*TRANSLATE, "-m", "{t}/x.pt", *TO_FILE],
        {"in.txt": EN}, r"x\.pt: no such checkpoint"),
    Row("translate-missing-input", [*TRANSLATE, "-m", "{ckpt}", *TO_FILE],
        error=r"in\.txt: no such input file"),
    Row("translate-directory-input", [*TRANSLATE, "-m", "{ckpt}", *TO_FILE],
        {"in.txt": directory}, r"in\.txt: is a directory, not a text file"),
    Row("translate-unreadable-input", [*TRANSLATE, "-m", "{ckpt}", *TO_FILE],
        {"in.txt": unreadable(EN)}, r"in\.txt' is not readable",
        nonroot=True),
    Row("translate-truncated-checkpoint", [*TRANSLATE, "-m", "{t}/x.pt", *TO_FILE],
        {"in.txt": EN, "x.pt": truncated_ckpt}, TRUNCATED),
    Row("translate-checkpoint-of-another-tool", [*TRANSLATE, "-m", "{t}/x.pt", *TO_FILE],
        {"in.txt": EN, "x.pt": other_tool_ckpt}, r"x\.pt: not an mtkit checkpoint"),
    Row("translate-checkpoint-of-another-version", [*TRANSLATE, "-m", "{t}/x.pt", *TO_FILE],
        {"in.txt": EN, "x.pt": future_ckpt}, r"x\.pt: checkpoint format 99"),
    Row("translate-crafted-checkpoint", [*TRANSLATE, "-m", "{t}/x.pt", *TO_FILE],
        {"in.txt": EN, "x.pt": crafted}, CRAFTED),
    Row("translate-garbage-spm-in-checkpoint", [*TRANSLATE, "-m", "{t}/x.pt", *TO_FILE],
        {"in.txt": EN, "x.pt": ckpt_with(spm__src=b"\x00garbage")},
        r"x\.pt: source spm: not a sentencepiece model"),
    Row("translate-weights-do-not-fit", [*TRANSLATE, "-m", "{t}/x.pt", *TO_FILE],
        {"in.txt": EN, "x.pt": ckpt_with(model_config__ffn_dim=48)},
        r"x\.pt: weights do not fit the model config \(size mismatch for .*; \d+ more\)"),
    Row("translate-nbest-over-beam", [*TRANSLATE, "-m", "{ckpt}", *TO_FILE, "--nbest", "3"],
        {"in.txt": EN}, r"--nbest 3 exceeds --beam 1"),
    Row("translate-sampling-with-beam", [*TRANSLATE, "-m", "{ckpt}", *TO_FILE, "--sampling",
        "--beam", "4"], {"in.txt": EN}, r"--sampling .* takes no --beam \(got 4\)"),
    Row("translate-fp16-on-cpu", [*TRANSLATE, "-m", "{ckpt}", *TO_FILE, "--device", "cpu",
        "--dtype", "fp16"], {"in.txt": EN}, r"--dtype fp16 needs a CUDA device"),
    Row("translate-wrong-type", [*TRANSLATE, "-m", "{ckpt}", *TO_FILE, "--beam", "wide"],
        {"in.txt": EN}, r"Invalid value for '-b' / '--beam': 'wide' is not a valid integer"),
    Row("translate-output-dir-missing", [*TRANSLATE, "-m", "{ckpt}", "-i", "{t}/in.txt", "-o",
        "{t}/nodir/out.txt"], {"in.txt": EN}, r"nodir: output directory does not exist"),
    Row("translate-output-is-a-directory", [*TRANSLATE, "-m", "{ckpt}", *TO_FILE],
        {"in.txt": EN, "out.txt": directory}, r"out\.txt: is a directory"),
    Row("translate-full-disk", [*TRANSLATE, "-m", "{ckpt}", *TO_FILE], {"in.txt": EN},
        r"out\.txt: cannot write \(No space left on device\)",
        patch=full_disk_in_translation_output),
    Row("translate-empty-input", [*TRANSLATE, "-m", "{ckpt}", *TO_FILE], {"in.txt": b""},
        check=translated_as()),
    Row("translate-crlf-bom", [*TRANSLATE, "-m", "{ckpt}", *TO_FILE],
        {"in.txt": windows(lines("the man runs", "a dog"))},
        check=translated_as("the man runs", "a dog")),
    Row("translate-empty-lines", [*TRANSLATE, "-m", "{ckpt}", *TO_FILE],
        {"in.txt": lines("the man", "", "  ", "a dog")},
        check=translated_as("the man", "", "", "a dog")),
    Row("translate-nul-bytes", [*TRANSLATE, "-m", "{ckpt}", *TO_FILE],
        {"in.txt": lines("the\x00man", "\x00")}, check=translated_as("the\x00man", "\x00")),
    Row("translate-invalid-utf8", [*TRANSLATE, "-m", "{ckpt}", *TO_FILE],
        {"in.txt": b"the man\nred \xff house\n"}, check=translated_with_warning(
            2, r"mtkit translate: warning: line 2: invalid UTF-8, bad bytes replaced by U\+FFFD")),
    Row("translate-1mb-line", [*TRANSLATE, "-m", "{ckpt}", *TO_FILE],
        {"in.txt": MB_LINE + b"\n"}, check=translated_with_warning(
            1, r"mtkit translate: warning: line 1: \d+ pieces, truncated to the first 1000 "
               r"\(--max-input-tokens\)")),  # fmt: skip
    Row("translate-real-terminal", [*TRANSLATE, "-m", "{t}/x.pt"], {"x.pt": crafted},
        CRAFTED, stdin=EN, real=True),
    # -- mtkit evaluate ---------------------------------------------------------------------
    Row("evaluate-missing-hypotheses", EVALUATE, {"r.txt": EN}, r"h\.txt: no such file"),
    Row("evaluate-missing-reference", EVALUATE, {"h.txt": EN}, r"r\.txt: no such file"),
    Row("evaluate-directory", EVALUATE, {"h.txt": directory, "r.txt": EN},
        r"h\.txt: is a directory, not a text file"),
    Row("evaluate-unreadable", EVALUATE, {"h.txt": unreadable(EN), "r.txt": EN},
        r"h\.txt: cannot read \(Permission denied\)", nonroot=True),
    Row("evaluate-empty-files", EVALUATE, {"h.txt": b"", "r.txt": b""},
        r"h\.txt: no lines, nothing to score"),
    Row("evaluate-mismatched-lines", EVALUATE, {"h.txt": EN, "r.txt": head(EN, 2)},
        r"line count mismatch: .*h\.txt has 3 lines, .*r\.txt has 2"),
    Row("evaluate-mismatched-references", [*EVALUATE, "-r", "{t}/r2.txt"],
        {"h.txt": EN, "r.txt": EN, "r2.txt": EN + EN},
        r"line count mismatch: .*r\.txt has 3 lines, .*r2\.txt has 6"),
    Row("evaluate-invalid-utf8", EVALUATE, {"h.txt": EN, "r.txt": EN + b"\x80\n"},
        r"r\.txt:4: invalid UTF-8 \(byte 0x80 at byte 1 of the line\)"),
    Row("evaluate-corrupt-gzip", ["evaluate", "-i", "{t}/h.gz", "-r", "{t}/r.txt"],
        {"h.gz": b"not gzip", "r.txt": EN}, r"h\.gz: corrupt or truncated gzip data"),
    Row("evaluate-unknown-metric", [*EVALUATE, "--metrics", "bleu,blue"], HR,
        r"--metrics: unknown metric 'blue'"),
    Row("evaluate-src-without-model", [*EVALUATE, "--src", "{t}/h.txt"], HR,
        r"--src is only used with -m/--model"),
    Row("evaluate-crafted-model", ["evaluate", "-m", "{t}/x.pt", "--src", "{t}/h.txt", "-r",
        "{t}/r.txt"], {**HR, "x.pt": crafted}, CRAFTED),
    Row("evaluate-output-dir-missing", ["evaluate", "-m", "{ckpt}", "--src", "{t}/h.txt", "-r",
        "{t}/r.txt", "-o", "{t}/nodir/hyp.txt"], HR, r"directory .*nodir does not exist"),
    Row("evaluate-crlf-bom", [*EVALUATE, "--json"], {"h.txt": windows(EN), "r.txt": DE},
        check=evaluated_like(EN, DE)),
    Row("evaluate-nul-bytes", [*EVALUATE, "--json", "--metrics", "bleu"],
        {"h.txt": lines("the\x00cat sat"), "r.txt": lines("the cat sat")},
        check=scored_as_sacrebleu(["the\x00cat sat"], ["the cat sat"])),
    Row("evaluate-1mb-line", [*EVALUATE, "--json", "--metrics", "bleu"],
        {"h.txt": MB_LINE + b"\n", "r.txt": MB_LINE + b"\n"},
        check=scored_as_sacrebleu(["the man " * 131072], ["the man " * 131072])),
    Row("evaluate-real-terminal", EVALUATE, {"h.txt": EN, "r.txt": head(EN, 2)},
        r"line count mismatch", real=True),
    # -- mtkit export -----------------------------------------------------------------------
    Row("export-missing", [*EXPORT, "-m", "{t}/x.pt", "{t}/ct2"], error=r"x\.pt: no such"),
    Row("export-truncated", [*EXPORT, "-m", "{t}/x.pt", "{t}/ct2"], {"x.pt": truncated_ckpt},
        TRUNCATED),
    Row("export-other-tool", [*EXPORT, "-m", "{t}/x.pt", "{t}/ct2"], {"x.pt": other_tool_ckpt},
        r"x\.pt: not an mtkit checkpoint"),
    Row("export-other-version", [*EXPORT, "-m", "{t}/x.pt", "{t}/ct2"], {"x.pt": future_ckpt},
        r"x\.pt: checkpoint format 99"),
    Row("export-crafted", [*EXPORT, "-m", "{t}/x.pt", "{t}/ct2"], {"x.pt": crafted}, CRAFTED),
    Row("export-hf-with-quantization", ["export", "-m", "{ckpt}", "--format", "hf",
        "--quantization", "int8", "{t}/hf"], error=r"--quantization applies to --format "
        r"ctranslate2 only \(see '.* export --help'\)"),
    Row("export-existing-output", [*EXPORT, "-m", "{ckpt}", "{t}/ct2"],
        {"ct2": directory, "ct2/model.bin": b"an older export"},
        r"ct2: already exists \(use --force to replace it\)"),
    Row("export-output-dir-created", [*EXPORT, "-m", "{ckpt}", "{t}/new/ct2"],
        check=ct2_model),
    # -- mtkit plot -------------------------------------------------------------------------
    Row("plot-missing-run", PLOT, error=r"run/metrics\.jsonl: no metrics log"),
    Row("plot-empty-log", PLOT, {"run": directory, "run/metrics.jsonl": b""},
        r"metrics\.jsonl: no 'valid_bleu' records yet"),
    Row("plot-invalid-utf8", PLOT, {"run": directory,
        "run/metrics.jsonl": metrics(*VALID) + b"\xff\n"},
        r"metrics\.jsonl:3: invalid UTF-8 \(byte 0xff"),
    Row("plot-nul-byte", PLOT, {"run": directory, "run/metrics.jsonl": b"\x00\n"},
        r"metrics\.jsonl:1: not a JSON record"),
    Row("plot-not-an-object", PLOT, {"run": directory, "run/metrics.jsonl": b"[1, 2]\n"},
        r"metrics\.jsonl:1: not a JSON object, but list"),
    Row("plot-wrong-type", PLOT, {"run": directory, "run/metrics.jsonl":
        metrics({"valid_bleu": "high", "elapsed": 1})},
        r"metrics\.jsonl:1: 'valid_bleu' and 'elapsed' must be numbers"),
    Row("plot-output-dir-missing", ["plot", "{t}/run", "-o", "{t}/nodir/c.png"],
        {"run": directory, "run/metrics.jsonl": metrics(*VALID)},
        r"nodir: directory does not exist"),
    Row("plot-output-is-a-directory", ["plot", "{t}/run", "-o", "{t}/d"],
        {"run": directory, "run/metrics.jsonl": metrics(*VALID), "d": directory},
        r"/d: is a directory"),
    Row("plot-crlf-bom", PLOT, {"run": directory, "run/metrics.jsonl": windows(metrics(*VALID))},
        check=png),
    Row("plot-last-line-cut-by-a-kill", PLOT, {"run": directory,
        "run/metrics.jsonl": metrics(*VALID) + b'{"update": 6, "valid_bl'}, check=png),
]  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Running a row


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, tiny_dataset: Path, corpus_spm: Path):
    base = tmp_path_factory.mktemp("bad-input")
    run = base / "run"
    args = train_args(tiny_dataset, run, "--max-updates", "4", "--save-every", "2",
                      "--validate-every", "2", "--set", "validate_bleu=false")  # fmt: skip
    with torch_threads(1):
        result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    marker = base / "pwned"

    class Crafted:
        def __reduce__(self) -> tuple:
            return (os.system, (f"touch {marker}",))

    buffer = io.BytesIO()
    torch.save({"format": "mtkit-checkpoint", "format_version": 1, "model": Crafted()}, buffer)
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.Train(
        sentence_iterator=iter((EN + DE).decode().splitlines() * 20), model_writer=model,
        vocab_size=40, hard_vocab_limit=False, minloglevel=2,
    )  # fmt: skip
    return World(run, run / "checkpoint_last.pt", tiny_dataset, corpus_spm, marker,
                 buffer.getvalue(), model.getvalue())  # fmt: skip


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_bad_input(row: Row, world: World, tmp_path: Path, monkeypatch) -> None:
    if row.nonroot and reads_anything(tmp_path):
        pytest.skip("this process reads files whatever their mode (root)")
    for name, content in row.files.items():
        path = tmp_path / name
        if callable(content):
            content(world, path)
        else:
            path.write_bytes(content)
    places = {"t": tmp_path, "run": world.run, "ckpt": world.ckpt, "data": world.data,
              "spm": world.spm}  # fmt: skip
    args = [re.sub(r"\{(\w+)\}", lambda m: str(places[m.group(1)]), a) for a in row.args]
    before = tree(tmp_path)
    if row.patch is not None:
        row.patch(monkeypatch)
    outcome = run_real(args, row.stdin, tmp_path) if row.real else invoke(args, row.stdin)
    monkeypatch.undo()
    assert not world.marker.exists(), "the crafted checkpoint ran its command"
    assert "Traceback" not in outcome.stderr + outcome.stdout
    if not row.error:
        assert outcome.code == 0, outcome.stderr
        assert row.check is not None
        row.check(world, tmp_path, outcome)
        return
    assert outcome.code != 0 and outcome.stdout == ""
    assert outcome.stderr.count("\n") == 1 and outcome.stderr.startswith("Error: "), outcome
    assert re.search(row.error, outcome.stderr), outcome.stderr
    assert tree(tmp_path) == before  # no partial output, no temporary left behind
    if row.check is not None:
        row.check(world, tmp_path, outcome)


def test_the_matrix_is_broad() -> None:
    commands = {row.args[0] for row in ROWS}
    assert commands == {"spm", "prepare", "train", "average", "translate", "evaluate",
                        "export", "plot"}  # fmt: skip
    assert len(ROWS) >= 60 and len({row.id for row in ROWS}) == len(ROWS)
    assert sum(row.real for row in ROWS) >= 4 and sum(not row.error for row in ROWS) >= 20
