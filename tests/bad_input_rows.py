"""The bad-input matrix's rows: every subcommand against broken, hostile or unusual input.

Each row names its command line, the files it creates first and the one-line error it expects
(or, for legitimate input, a check of the output); test_bad_input.py runs them.
"""

from __future__ import annotations

from bad_input_checks import (
    ct2_model,
    evaluated_like,
    made,
    png,
    scored_as_sacrebleu,
    translated_as,
    translated_with_warning,
)
from bad_input_rows_data import DATA_ROWS
from bad_input_rows_shortlist import SHORTLIST_ROWS
from bad_input_world import (
    AVERAGE,
    CRAFTED,
    DE,
    EN,
    EVALUATE,
    EXPORT,
    HR,
    MB_LINE,
    PLOT,
    TO_FILE,
    TRANSLATE,
    TRUNCATED,
    VALID,
    Row,
    ckpt_with,
    crafted,
    directory,
    full_disk_in_checkpoint_writer,
    full_disk_in_file_output,
    future_ckpt,
    head,
    lines,
    metrics,
    other_tool_ckpt,
    truncated_ckpt,
    unreadable,
    windows,
)

EN_TEXT = EN.decode().splitlines()

ROWS = [
    *DATA_ROWS,  # spm train, prepare, train
    *SHORTLIST_ROWS,  # shortlist build, translate/export --shortlist
    # -- mtkit average ----------------------------------------------------------------------
    Row("average-missing", [*AVERAGE, "-c", "{t}/x.pt"], error=r"x\.pt: no such checkpoint"),
    Row(
        "average-directory",
        [*AVERAGE, "-c", "{t}/x.pt"],
        {"x.pt": directory},
        r"x\.pt: is a directory, not a checkpoint",
    ),
    Row(
        "average-empty-file",
        [*AVERAGE, "-c", "{t}/x.pt"],
        {"x.pt": b""},
        r"x\.pt: empty file, not a checkpoint",
    ),
    Row("average-truncated", [*AVERAGE, "-c", "{t}/x.pt"], {"x.pt": truncated_ckpt}, TRUNCATED),
    Row(
        "average-other-tool",
        [*AVERAGE, "-c", "{t}/x.pt"],
        {"x.pt": other_tool_ckpt},
        r"x\.pt: not an mtkit checkpoint",
    ),
    Row(
        "average-other-version",
        [*AVERAGE, "-c", "{t}/x.pt"],
        {"x.pt": future_ckpt},
        r"x\.pt: checkpoint format 99",
    ),
    Row("average-crafted", [*AVERAGE, "-c", "{t}/x.pt"], {"x.pt": crafted}, CRAFTED),
    Row(
        "average-another-model",
        [*AVERAGE, "-c", "{t}/x.pt"],
        {"x.pt": ckpt_with(model_config__dropout=0.5)},
        r"x\.pt: model config differs from .* \(dropout\)",
    ),
    Row(
        "average-last-and-files",
        ["average", "--last", "2", "{run}", "-c", "{ckpt}", "-o", "{t}/avg.pt"],
        error=r"give either --last N RUN_DIR or one or more -c CHECKPOINT",
    ),
    Row(
        "average-too-few",
        ["average", "--last", "3", "{run}", "-o", "{t}/avg.pt"],
        error=r"run: 2 numbered checkpoints, fewer than 3",
    ),
    Row(
        "average-output-dir-missing",
        ["average", "--last", "2", "{run}", "-o", "{t}/nodir/avg.pt"],
        check=made("nodir/avg.pt", b"PK"),
    ),
    Row(
        "average-full-disk-in-a-new-dir",
        ["average", "--last", "2", "{run}", "-o", "{t}/nodir/avg.pt"],
        error=r"avg\.pt: could not write checkpoint \(No space left",
        patch=full_disk_in_checkpoint_writer,
    ),
    Row(
        "average-full-disk",
        ["average", "--last", "2", "{run}", "-o", "{t}/avg.pt"],
        error=r"avg\.pt: could not write checkpoint \(No space left on device\)",
        patch=full_disk_in_checkpoint_writer,
    ),
    # -- mtkit translate --------------------------------------------------------------------
    Row(
        "translate-tgt-lang-of-a-bilingual-model",
        [*TRANSLATE, "-m", "{ckpt}", *TO_FILE, "--tgt-lang", "de"],
        {"in.txt": EN},
        r"--tgt-lang de: this model was not trained "
        r"multilingual \(its vocabulary has no >>xx<< target-language tags\)",
    ),
    Row(
        "translate-missing-checkpoint",
        [*TRANSLATE, "-m", "{t}/x.pt", *TO_FILE],
        {"in.txt": EN},
        r"x\.pt: no such checkpoint",
    ),
    Row(
        "translate-missing-input",
        [*TRANSLATE, "-m", "{ckpt}", *TO_FILE],
        error=r"in\.txt: no such input file",
    ),
    Row(
        "translate-directory-input",
        [*TRANSLATE, "-m", "{ckpt}", *TO_FILE],
        {"in.txt": directory},
        r"in\.txt: is a directory, not a text file",
    ),
    Row(
        "translate-unreadable-input",
        [*TRANSLATE, "-m", "{ckpt}", *TO_FILE],
        {"in.txt": unreadable(EN)},
        r"in\.txt' is not readable",
        nonroot=True,
    ),
    Row(
        "translate-truncated-checkpoint",
        [*TRANSLATE, "-m", "{t}/x.pt", *TO_FILE],
        {"in.txt": EN, "x.pt": truncated_ckpt},
        TRUNCATED,
    ),
    Row(
        "translate-checkpoint-of-another-tool",
        [*TRANSLATE, "-m", "{t}/x.pt", *TO_FILE],
        {"in.txt": EN, "x.pt": other_tool_ckpt},
        r"x\.pt: not an mtkit checkpoint",
    ),
    Row(
        "translate-checkpoint-of-another-version",
        [*TRANSLATE, "-m", "{t}/x.pt", *TO_FILE],
        {"in.txt": EN, "x.pt": future_ckpt},
        r"x\.pt: checkpoint format 99",
    ),
    Row(
        "translate-crafted-checkpoint",
        [*TRANSLATE, "-m", "{t}/x.pt", *TO_FILE],
        {"in.txt": EN, "x.pt": crafted},
        CRAFTED,
    ),
    Row(
        "translate-garbage-spm-in-checkpoint",
        [*TRANSLATE, "-m", "{t}/x.pt", *TO_FILE],
        {"in.txt": EN, "x.pt": ckpt_with(spm__src=b"\x00garbage")},
        r"x\.pt: source spm: not a sentencepiece model",
    ),
    Row(
        "translate-weights-do-not-fit",
        [*TRANSLATE, "-m", "{t}/x.pt", *TO_FILE],
        {"in.txt": EN, "x.pt": ckpt_with(model_config__ffn_dim=48)},
        r"x\.pt: weights do not fit the model config \(size mismatch for .*; \d+ more\)",
    ),
    Row(
        "translate-nbest-over-beam",
        [*TRANSLATE, "-m", "{ckpt}", *TO_FILE, "--nbest", "3"],
        {"in.txt": EN},
        r"--nbest 3 exceeds --beam 1",
    ),
    Row(
        "translate-sampling-with-beam",
        [*TRANSLATE, "-m", "{ckpt}", *TO_FILE, "--sampling", "--beam", "4"],
        {"in.txt": EN},
        r"--sampling .* takes no --beam \(got 4\)",
    ),
    Row(
        "translate-fp16-on-cpu",
        [*TRANSLATE, "-m", "{ckpt}", *TO_FILE, "--device", "cpu", "--dtype", "fp16"],
        {"in.txt": EN},
        r"--dtype fp16 needs a CUDA device",
    ),
    Row(
        "translate-wrong-type",
        [*TRANSLATE, "-m", "{ckpt}", *TO_FILE, "--beam", "wide"],
        {"in.txt": EN},
        r"Invalid value for '-b' / '--beam': 'wide' is not a valid integer",
    ),
    Row(
        "translate-output-dir-missing",
        [*TRANSLATE, "-m", "{ckpt}", "-i", "{t}/in.txt", "-o", "{t}/nodir/out.txt"],
        {"in.txt": EN},
        check=translated_as(*EN_TEXT, out="nodir/out.txt"),
    ),
    Row(
        "translate-full-disk-in-a-new-dir",
        [*TRANSLATE, "-m", "{ckpt}", "-i", "{t}/in.txt", "-o", "{t}/nodir/out.txt"],
        {"in.txt": EN},
        r"out\.txt: cannot write \(No space left",
        patch=full_disk_in_file_output,
    ),
    Row(
        "translate-output-is-a-directory",
        [*TRANSLATE, "-m", "{ckpt}", *TO_FILE],
        {"in.txt": EN, "out.txt": directory},
        r"out\.txt: is a directory",
    ),
    Row(
        "translate-full-disk",
        [*TRANSLATE, "-m", "{ckpt}", *TO_FILE],
        {"in.txt": EN},
        r"out\.txt: cannot write \(No space left on device\)",
        patch=full_disk_in_file_output,
    ),
    Row(
        "translate-empty-input",
        [*TRANSLATE, "-m", "{ckpt}", *TO_FILE],
        {"in.txt": b""},
        check=translated_as(),
    ),
    Row(
        "translate-crlf-bom",
        [*TRANSLATE, "-m", "{ckpt}", *TO_FILE],
        {"in.txt": windows(lines("the man runs", "a dog"))},
        check=translated_as("the man runs", "a dog"),
    ),
    Row(
        "translate-empty-lines",
        [*TRANSLATE, "-m", "{ckpt}", *TO_FILE],
        {"in.txt": lines("the man", "", "  ", "a dog")},
        check=translated_as("the man", "", "", "a dog"),
    ),
    Row(
        "translate-nul-bytes",
        [*TRANSLATE, "-m", "{ckpt}", *TO_FILE],
        {"in.txt": lines("the\x00man", "\x00")},
        check=translated_as("the\x00man", "\x00"),
    ),
    Row(
        "translate-invalid-utf8",
        [*TRANSLATE, "-m", "{ckpt}", *TO_FILE],
        {"in.txt": b"the man\nred \xff house\n"},
        check=translated_with_warning(
            2,
            r"mtkit translate: warning: .*in\.txt:2: invalid UTF-8 \(byte 0xff at byte 5 of the "
            r"line\), bad bytes replaced by U\+FFFD",
        ),
    ),
    Row(
        "translate-1mb-line",
        [*TRANSLATE, "-m", "{ckpt}", *TO_FILE],
        {"in.txt": MB_LINE + b"\n"},
        check=translated_with_warning(
            1,
            r"mtkit translate: warning: line 1: \d+ pieces, truncated to the first 1000 "
            r"\(--max-input-tokens\)(\nmtkit translate: warning: line 1: a degenerate "
            r"translation \(cut short: .*\); translated again in parts)?",
        ),
    ),
    Row(
        "translate-real-terminal",
        [*TRANSLATE, "-m", "{t}/x.pt"],
        {"x.pt": crafted},
        CRAFTED,
        stdin=EN,
        real=True,
    ),
    # -- mtkit evaluate ---------------------------------------------------------------------
    Row("evaluate-missing-hypotheses", EVALUATE, {"r.txt": EN}, r"h\.txt: no such file"),
    Row("evaluate-missing-reference", EVALUATE, {"h.txt": EN}, r"r\.txt: no such file"),
    Row(
        "evaluate-directory",
        EVALUATE,
        {"h.txt": directory, "r.txt": EN},
        r"h\.txt: is a directory, not a text file",
    ),
    Row(
        "evaluate-unreadable",
        EVALUATE,
        {"h.txt": unreadable(EN), "r.txt": EN},
        r"h\.txt: cannot read \(Permission denied\)",
        nonroot=True,
    ),
    Row(
        "evaluate-empty-files",
        EVALUATE,
        {"h.txt": b"", "r.txt": b""},
        r"h\.txt: no lines, nothing to score",
    ),
    Row(
        "evaluate-mismatched-lines",
        EVALUATE,
        {"h.txt": EN, "r.txt": head(EN, 2)},
        r"line count mismatch: .*h\.txt has 3 lines, .*r\.txt has 2",
    ),
    Row(
        "evaluate-mismatched-references",
        [*EVALUATE, "-r", "{t}/r2.txt"],
        {"h.txt": EN, "r.txt": EN, "r2.txt": EN + EN},
        r"line count mismatch: .*r\.txt has 3 lines, .*r2\.txt has 6",
    ),
    Row(
        "evaluate-invalid-utf8",
        EVALUATE,
        {"h.txt": EN, "r.txt": EN + b"\x80\n"},
        r"r\.txt:4: invalid UTF-8 \(byte 0x80 at byte 1 of the line\)",
    ),
    Row(
        "evaluate-corrupt-gzip",
        ["evaluate", "-i", "{t}/h.gz", "-r", "{t}/r.txt"],
        {"h.gz": b"not gzip", "r.txt": EN},
        r"h\.gz: corrupt or truncated gzip data",
    ),
    Row(
        "evaluate-unknown-metric",
        [*EVALUATE, "--metrics", "bleu,blue"],
        HR,
        r"--metrics: unknown metric 'blue'",
    ),
    Row(
        "evaluate-src-without-model",
        [*EVALUATE, "--src", "{t}/h.txt"],
        HR,
        r"--src is only used with -m/--model",
    ),
    Row(
        "evaluate-crafted-model",
        ["evaluate", "-m", "{t}/x.pt", "--src", "{t}/h.txt", "-r", "{t}/r.txt"],
        {**HR, "x.pt": crafted},
        CRAFTED,
    ),
    Row(
        "evaluate-output-dir-missing",
        [
            "evaluate",
            "-m",
            "{ckpt}",
            "--src",
            "{t}/h.txt",
            "-r",
            "{t}/r.txt",
            "-o",
            "{t}/nodir/hyp.txt",
        ],
        HR,
        check=made("nodir/hyp.txt", b""),
    ),
    Row(
        "evaluate-crlf-bom",
        [*EVALUATE, "--json"],
        {"h.txt": windows(EN), "r.txt": DE},
        check=evaluated_like(EN, DE),
    ),
    Row(
        "evaluate-nul-bytes",
        [*EVALUATE, "--json", "--metrics", "bleu"],
        {"h.txt": lines("the\x00cat sat"), "r.txt": lines("the cat sat")},
        check=scored_as_sacrebleu(["the\x00cat sat"], ["the cat sat"]),
    ),
    Row(
        "evaluate-1mb-line",
        [*EVALUATE, "--json", "--metrics", "bleu"],
        {"h.txt": MB_LINE + b"\n", "r.txt": MB_LINE + b"\n"},
        check=scored_as_sacrebleu(["the man " * 131072], ["the man " * 131072]),
    ),
    Row(
        "evaluate-real-terminal",
        EVALUATE,
        {"h.txt": EN, "r.txt": head(EN, 2)},
        r"line count mismatch",
        real=True,
    ),
    # -- mtkit export -----------------------------------------------------------------------
    Row("export-missing", [*EXPORT, "-m", "{t}/x.pt", "{t}/ct2"], error=r"x\.pt: no such"),
    Row(
        "export-truncated",
        [*EXPORT, "-m", "{t}/x.pt", "{t}/ct2"],
        {"x.pt": truncated_ckpt},
        TRUNCATED,
    ),
    Row(
        "export-other-tool",
        [*EXPORT, "-m", "{t}/x.pt", "{t}/ct2"],
        {"x.pt": other_tool_ckpt},
        r"x\.pt: not an mtkit checkpoint",
    ),
    Row(
        "export-other-version",
        [*EXPORT, "-m", "{t}/x.pt", "{t}/ct2"],
        {"x.pt": future_ckpt},
        r"x\.pt: checkpoint format 99",
    ),
    Row("export-crafted", [*EXPORT, "-m", "{t}/x.pt", "{t}/ct2"], {"x.pt": crafted}, CRAFTED),
    Row(
        "export-hf-with-quantization",
        ["export", "-m", "{ckpt}", "--format", "hf", "--quantization", "int8", "{t}/hf"],
        error=r"--quantization applies to --format "
        r"ctranslate2 and argos only \(see '.* export --help'\)",
    ),
    Row(
        "export-existing-output",
        [*EXPORT, "-m", "{ckpt}", "{t}/ct2"],
        {"ct2": directory, "ct2/model.bin": b"an older export"},
        r"ct2: already exists \(use --force to replace it\)",
    ),
    Row("export-output-dir-created", [*EXPORT, "-m", "{ckpt}", "{t}/new/ct2"], check=ct2_model),
    # -- mtkit plot -------------------------------------------------------------------------
    Row("plot-missing-run", PLOT, error=r"run/metrics\.jsonl: no metrics log"),
    Row(
        "plot-empty-log",
        PLOT,
        {"run": directory, "run/metrics.jsonl": b""},
        r"metrics\.jsonl: no 'valid_bleu' records yet",
    ),
    Row(
        "plot-invalid-utf8",
        PLOT,
        {"run": directory, "run/metrics.jsonl": metrics(*VALID) + b"\xff\n"},
        r"metrics\.jsonl:3: invalid UTF-8 \(byte 0xff",
    ),
    Row(
        "plot-nul-byte",
        PLOT,
        {"run": directory, "run/metrics.jsonl": b"\x00\n"},
        r"metrics\.jsonl:1: not a JSON record",
    ),
    Row(
        "plot-not-an-object",
        PLOT,
        {"run": directory, "run/metrics.jsonl": b"[1, 2]\n"},
        r"metrics\.jsonl:1: not a JSON object, but list",
    ),
    Row(
        "plot-wrong-type",
        PLOT,
        {"run": directory, "run/metrics.jsonl": metrics({"valid_bleu": "high", "elapsed": 1})},
        r"metrics\.jsonl:1: 'valid_bleu' and 'elapsed' must be numbers",
    ),
    Row(
        "plot-output-dir-missing",
        ["plot", "{t}/run", "-o", "{t}/nodir/c.png"],
        {"run": directory, "run/metrics.jsonl": metrics(*VALID)},
        check=made("nodir/c.png", b"\x89PNG"),
    ),
    Row(
        "plot-output-is-a-directory",
        ["plot", "{t}/run", "-o", "{t}/d"],
        {"run": directory, "run/metrics.jsonl": metrics(*VALID), "d": directory},
        r"/d: is a directory",
    ),
    Row(
        "plot-crlf-bom",
        PLOT,
        {"run": directory, "run/metrics.jsonl": windows(metrics(*VALID))},
        check=png,
    ),
    Row(
        "plot-last-line-cut-by-a-kill",
        PLOT,
        {"run": directory, "run/metrics.jsonl": metrics(*VALID) + b'{"update": 6, "valid_bl'},
        check=png,
    ),
]
