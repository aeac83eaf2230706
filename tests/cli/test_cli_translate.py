"""`mtkit translate` through click: streams, files, n-best, and one-line errors."""

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from translate_helpers import FAST, WORDS, make_checkpoint, run

from mtkit.config import TranslateConfig


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny.pt")


@pytest.fixture(autouse=True, scope="module")
def restore_threads():
    before = torch.get_num_threads()  # --threads sets torch's global thread count
    yield
    torch.set_num_threads(before)


def test_stdin_to_stdout_keeps_one_line_per_line(ckpt: str) -> None:
    result = run(["-m", ckpt, *FAST], b"a man\n\n  \nthe dog \xff runs\r\nlast")
    assert result.exit_code == 0, result.output
    lines = result.stdout.split("\n")
    assert len(lines) == 6 and lines[1:3] == ["", ""] and lines[-1] == ""
    assert ":4: invalid UTF-8 (byte 0xff at byte 9 of the line)" in result.stderr
    assert "translated 5 lines" in result.stderr


def test_files_and_quiet(ckpt: str, tmp_path: Path) -> None:
    source, target = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("a man\nthe dog\n\n", encoding="utf-8")
    result = run(["-m", ckpt, "-i", str(source), "-o", str(target), "-q", *FAST])
    assert result.exit_code == 0, result.output
    assert result.stdout == "" and result.stderr == ""
    assert target.read_text(encoding="utf-8").count("\n") == 3


def test_nbest_prints_tsv_rows(ckpt: str) -> None:
    result = run(["-m", ckpt, "--beam", "3", "--nbest", "3", "--max-len-b", "4", "-q"], b"a\nb\n")
    assert result.exit_code == 0, result.output
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert [r[:2] for r in rows] == [[str(i), str(k)] for i in (1, 2) for k in (1, 2, 3)]


def test_sampling_needs_no_beam_option_and_is_seeded(ckpt: str) -> None:
    args = ["-m", ckpt, "--sampling", "--seed", "5", "--max-len-b", "5", "-q"]
    first, again = run(args, b"a man\nthe dog\n"), run(args, b"a man\nthe dog\n")
    assert first.exit_code == 0, first.output
    assert first.stdout == again.stdout and first.stdout.count("\n") == 2


def test_ensemble_and_int8(ckpt: str) -> None:
    result = run(["-m", ckpt, "-m", ckpt, "--quantize", "int8", "--device", "cpu", *FAST], b"a\n")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-m", "{tmp}/missing.pt"], "no such checkpoint"),
        (["-m", "{tmp}/garbage.pt"], "garbage.pt: "),
        (["-m", "{ckpt}", "-i", "{tmp}/missing.txt"], "no such input file"),
        (["-m", "{ckpt}", "-o", "{tmp}"], "is a directory"),
        (["-m", "{ckpt}", "--beam", "2", "--nbest", "3"], "exceeds --beam"),
        (["-m", "{ckpt}", "--sampling", "--beam", "2"], "takes no --beam"),
        (["-m", "{ckpt}", "--dtype", "fp16", "--device", "cpu"], "fp16 needs a CUDA device"),
        (["-m", "{ckpt}", "--device", "tpu"], "--device"),
        (["-m", "{ckpt}", "-m", "{other}"], "sentencepiece model differs"),
        (["-m", "{ckpt}", "--format", "html", "--word-scores"], "cannot be combined with --scores"),
        # --compile alone is on, which refuses a shortlist; auto goes on (eager), to the file
        (
            ["-m", "{ckpt}", "--compile", "--shortlist", "{tmp}/sl.tsv"],
            "--compile cannot be combined with --shortlist",
        ),
        (["-m", "{ckpt}", "--compile", "auto", "--shortlist", "{tmp}/sl.tsv"], "sl.tsv"),
    ],
)
def test_user_errors_are_one_line_without_output_file(
    ckpt: str, tmp_path: Path, args: list[str], message: str
) -> None:
    (tmp_path / "garbage.pt").write_bytes(b"\x00not a checkpoint")
    other = make_checkpoint(tmp_path / "other.pt", spm_seed=9) if "{other}" in args else ""
    args = [a.format(tmp=tmp_path, ckpt=ckpt, other=other) for a in args]
    target = tmp_path / "out.txt"
    if "-o" not in args:
        args += ["-o", str(target)]
    result = run(args, b"a man\n")
    assert result.exit_code == 1
    assert (
        "Traceback" not in result.output
        and result.exception is None
        or isinstance(result.exception, SystemExit)
    )
    error = result.stderr.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("Error: ") and message in error[0], error
    assert not target.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.txt")]


SCORED = b"a man runs\n\nthe dog sits on the red ball\n  \nplays\n"


def test_scores_equal_the_nbest_lists_score(ckpt: str) -> None:
    nbest = run(["-m", ckpt, *FAST, "--nbest", "2", "-q"], SCORED)
    scored = run(["-m", ckpt, *FAST, "--scores", "-q"], SCORED)
    assert nbest.exit_code == 0 and scored.exit_code == 0, nbest.output + scored.output
    best = [row.split("\t") for row in nbest.stdout.splitlines() if row.split("\t")[1] == "1"]
    assert [row.split("\t") for row in scored.stdout.splitlines()] == [
        [score, text] for _, _, score, _, text in best
    ]
    assert scored.stdout.splitlines()[1] == "0.0000\t"  # nothing to translate: as the n-best


@pytest.mark.parametrize("split", [[], ["--split-sentences"]])
def test_word_scores_are_one_per_word(ckpt: str, split: list[str]) -> None:
    lines = SCORED + b"the cat. a dog \xf0\x9f\x98\x80 runs on https://x.org now!\r\nlast"
    words = run(["-m", ckpt, *FAST, "--word-scores", "-q", *split], lines)
    scored = run(["-m", ckpt, *FAST, "--scores", "-q", *split], lines)
    assert words.exit_code == 0, words.output
    rows = [row.split("\t") for row in words.stdout.split("\n")[:-1]]
    assert len(rows) == 7 and all(len(row) == 3 for row in rows)
    assert [row[:2] for row in rows] == [r.split("\t") for r in scored.stdout.splitlines()]
    for score, text, per_word in rows:
        assert len(per_word.split()) == len(text.split())
        assert all(float(x) <= 0 for x in per_word.split()) and float(score) <= 0
    assert "https://x.org" in rows[5][1]  # a span: copied verbatim, certain
    assert per_word_of(rows[5], "https://x.org") == 0.0


def per_word_of(row: list[str], word: str) -> float:
    return float(row[2].split()[row[1].split().index(word)])


@pytest.mark.parametrize("signum, to_file", [(signal.SIGTERM, False), (signal.SIGINT, True)])
def test_signal_keeps_whole_chunks_on_stdout_and_no_output_file(
    ckpt: str, tmp_path: Path, signum: int, to_file: bool
) -> None:
    """The input pipe stays open after a chunk and a half, so the run waits in the middle of the
    second chunk when the signal comes. Stdout keeps the first chunk, whole and correct; a file
    output is not written (an old one keeps its contents) and leaves no temporary."""
    chunk = TranslateConfig().chunk_lines
    lines = [" ".join(random.Random(i).choices(WORDS, k=3)) for i in range(chunk * 3 // 2)]
    target = tmp_path / "out.txt"
    target.write_text("old\n")
    command = [sys.executable, "-m", "mtkit", "translate", "-m", ckpt, *FAST, "--beam", "1"]
    command += ["-o", str(target)] if to_file else []
    pipes = dict(stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process = subprocess.Popen(command, **pipes, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert process.stdin is not None and process.stdout is not None
    feeder = threading.Thread(target=process.stdin.write, args=("\n".join(lines).encode(),))
    feeder.start()  # and never close stdin: the run cannot finish on its own
    if to_file:  # the first chunk is in the temporary file
        while not [p for p in tmp_path.glob(".out.txt.*.tmp") if p.stat().st_size]:
            assert process.poll() is None
            time.sleep(0.01)
    else:
        first = [process.stdout.readline() for _ in range(chunk)]
    process.send_signal(signum)
    rest, error = process.communicate(timeout=60)
    feeder.join()
    name = signal.Signals(signum).name
    assert process.returncode == 128 + signum, error
    if to_file:
        assert rest == b"" and target.read_text() == "old\n"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]
        assert error.decode() == (
            f"mtkit translate: interrupted by {name}: {target} was not "
            f"written ({chunk} lines were translated)\n"
        )
    else:
        assert rest == b""  # nothing of the second chunk
        assert error.decode() == (
            f"mtkit translate: interrupted by {name}: the first {chunk} lines were written\n"
        )
        sample = list(range(0, chunk, 997))
        expected = run(
            ["-m", ckpt, *FAST, "--beam", "1", "-q"], "\n".join(lines[i] for i in sample).encode()
        )
        assert [first[i].decode() for i in sample] == expected.stdout.splitlines(keepends=True)


# ---------------------------------------------------------------------------------------------
# Multilingual models: --tgt-lang and the target-language tags (issue 16)


def test_tgt_lang_switches_the_output_language(multi_run: Path, multi_dataset: Path) -> None:
    ckpt = str(multi_run / "checkpoint_best.pt")
    src = (multi_dataset / "valid.src.txt").read_text().splitlines()
    refs = (multi_dataset / "valid.tgt.txt").read_text().splitlines()
    english = [line.split(" ", 1)[1] for line in src[:8]]  # the same 8 sources per direction
    for k, lang in enumerate(("de", "fr", "cs")):
        result = run(["-m", ckpt, "--tgt-lang", lang, "-q"], "\n".join(english).encode())
        assert result.exit_code == 0, result.output
        assert result.stdout.splitlines() == refs[8 * k : 8 * (k + 1)]
    # a line that carries a tag keeps it; the others get --tgt-lang's
    mixed = [f">>cs<< {english[0]}", english[0], f"  >>fr<< {english[0]}", ""]
    result = run(["-m", ckpt, "--tgt-lang", "de", "-q"], "\n".join(mixed).encode())
    assert result.exit_code == 0, result.output
    assert result.stdout.split("\n")[:4] == [refs[16], refs[0], refs[8], ""]


@pytest.mark.parametrize(
    "multi, args, stdin, message",
    [
        (
            False,
            ["--tgt-lang", "de"],
            "a man\n",
            "Error: --tgt-lang de: this model was not "
            "trained multilingual (its vocabulary has no >>xx<< target-language tags)\n",
        ),
        (
            True,
            ["--tgt-lang", "es"],
            "a man\n",
            "Error: --tgt-lang es: unknown target language (known: cs, de, fr)\n",
        ),
        (
            True,
            ["--tgt-lang", "de"],
            "a man\n>>es<< a dog\n",
            "Error: line 2: unknown target-language tag >>es<< (known: cs, de, fr)\n",
        ),
    ],
)
def test_target_language_errors_are_one_line_and_write_nothing(
    tmp_path: Path, ckpt: str, multi_run: Path, multi: bool, args: list, stdin: str, message: str
) -> None:
    model = str(multi_run / "checkpoint_best.pt") if multi else ckpt
    out = tmp_path / "out.txt"
    result = run(["-m", model, "-o", str(out), "-q", *args], stdin.encode())
    assert (result.exit_code, result.output) == (1, message)
    assert list(tmp_path.iterdir()) == []


def caps_garbage(self, rows, search, phrases=None):
    """NativeEngine.decode_batch as the demo model behaves on case: garbage for a line that
    holds a character its lowercase vocabulary lacks (" ⁇ "), else one word per word."""
    from mtkit.engines.base import Translation

    texts = self.src_tokenizer.decode(rows)
    return [
        [
            Translation(
                "Ein „" + "G" * 12 + "…" if "⁇" in text else " ".join("wort" for _ in text.split()),
                -1.0,
                -2.0,
                3,
            )
        ]
        for text in texts
    ]


def test_a_degenerate_line_is_translated_again_with_a_warning(ckpt: str, monkeypatch) -> None:
    from mtkit.engines.native import NativeEngine

    monkeypatch.setattr(NativeEngine, "decode_batch", caps_garbage)
    lines = b"a man\nA MAN RIDES\n\nThe Red Ball\nA Man\n"
    result = run(["-m", ckpt, *FAST, "-q"], lines)
    assert result.exit_code == 0, result.output
    # ALL CAPS and Title Case lowercased from the start; the two-word Title Case line degenerates
    assert result.stdout == "wort wort\nWORT WORT WORT\n\nWort Wort Wort\nWort Wort\n"
    warning = (
        "mtkit translate: warning: line {}: a degenerate translation (a run of 12 'G'); "
        "translated again lowercased, its case put back\n"
    )
    assert result.stderr == warning.format(5)
    result = run(["-m", ckpt, *FAST, "-q", "--no-guard"], lines)
    assert result.exit_code == 0 and result.stderr == ""
    assert result.stdout.splitlines()[1] == "Ein „" + "G" * 12 + "…"
