"""`mtkit spm train` and `mtkit prepare` from the command line: CliRunner and the real command."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtkit.cli import cli
from mtkit.data.tokenizer import UNK_ID, Tokenizer

LANGS = ("en", "de")


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def mtkit_command() -> list[str]:
    """The installed `mtkit` script (on PATH under `make test`), else `python -m mtkit`."""
    found = shutil.which("mtkit")
    return [found] if found else [sys.executable, "-m", "mtkit"]


def test_spm_train_then_prepare(tmp_path: Path, write_corpus, corpus_pairs) -> None:
    train = write_corpus("text", corpus_pairs[:200], "train")
    valid = write_corpus("tsv", corpus_pairs[200:], "valid")
    prefix = str(tmp_path / "spm" / "joint")
    options = "--vocab-size 90 --src-lang en --tgt-lang de".split()
    code, output = invoke(
        "spm", "train", *options, "--model-prefix", prefix, "--train-prefix", train
    )
    assert code == 0, output
    assert output == f"wrote {prefix}.model and {prefix}.vocab: 90 pieces from 400 sentences\n"
    out = tmp_path / "bin"
    code, output = invoke(
        "prepare",
        "--src-lang",
        "en",
        "--tgt-lang",
        "de",
        "--train-prefix",
        train,
        "--valid",
        valid,
        "--spm",
        prefix,
        "-o",
        str(out),
        "--dedup",
        "--workers",
        "2",
        "--chunk-size",
        "50",
    )
    assert code == 0, output
    lines = output.splitlines()
    assert lines[0] == f"prepared {out}: en-de, joint vocabulary 90, uint16"
    assert lines[1].startswith("  train read 200, kept ")
    assert lines[2].startswith("  valid read 40, kept 40, dropped 0; tokens en ")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["filters"]["dedup"] and manifest["config"]["chunk_size"] == 50


def test_separate_models_from_the_command_line(tmp_path: Path, write_corpus, corpus_pairs):
    train = write_corpus("jsonl", corpus_pairs)
    prefix = str(tmp_path / "sep")
    options = "--vocab-size 60 --src-lang en --tgt-lang de --separate".split()
    code, output = invoke("spm", "train", *options, "--model-prefix", prefix, "--train", train)
    assert code == 0, output
    assert [line.split(" and ")[0] for line in output.splitlines()] == [
        f"wrote {prefix}.en.model",
        f"wrote {prefix}.de.model",
    ]
    models = ["--src-spm", f"{prefix}.en.model", "--tgt-spm", f"{prefix}.de.model"]
    code, output = invoke("prepare", "--train", train, *models, "-o", str(tmp_path / "bin"))
    assert code == 0, output
    assert "vocabularies 60/60" in output


@pytest.mark.parametrize(
    "files, args, message",
    [
        (
            {"c.en": "a\nb\n", "c.de": "x\n"},
            ["--train", "c"],
            "Error: line counts differ: c.en has 2 lines, c.de has 1",
        ),
        (
            {"c.tsv": "a\tb\nno tab\n"},
            ["--train", "c.tsv"],
            "Error: c.tsv: line 2: expected 2 tab-separated columns, found 1",
        ),
        (
            {"c.en": "a\n", "c.de": "\xff\n"},
            ["--train", "c"],
            "Error: c.de:1: invalid UTF-8 (byte 0xff at byte 1 of the line)",
        ),
        (
            {"c.en": "a\n", "c.de": "b\n"},
            ["--train", "c", "--spm", "nope.model"],
            "Error: nope.model: no such sentencepiece model",
        ),
        ({}, ["--train", "c"], "Error: c: no such corpus (looked for c.en and c.de;"),
    ],
)
def test_errors_are_one_line_and_leave_no_output(
    tmp_path: Path, monkeypatch, corpus_spm: Path, files: dict, args: list, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    for name, text in files.items():
        data = text.encode("latin-1") if "\xff" in text else text.encode()
        (tmp_path / name).write_bytes(data)
    code, output = invoke("prepare", "--spm", str(corpus_spm), "-o", "out/bin", *args)
    assert code == 1
    assert output.count("\n") == 1 and output.startswith(message), output
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(files)


def test_existing_output_needs_force(tmp_path: Path, write_corpus, corpus_pairs, corpus_spm):
    train = write_corpus("text", corpus_pairs[:10])
    args = ["prepare", "--train", train, "--spm", str(corpus_spm), "-o", str(tmp_path / "bin")]
    assert invoke(*args)[0] == 0
    code, output = invoke(*args)
    assert code == 1 and "already exists (use --force to replace it)" in output
    assert invoke(*args, "--force")[0] == 0


def test_help() -> None:
    for command in (["spm", "train"], ["prepare"]):
        code, output = invoke(*command, "--help")
        assert code == 0 and "--train-prefix" in output


def run_mtkit(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*mtkit_command(), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def test_installed_command(tmp_path: Path, write_corpus, corpus_pairs) -> None:
    train = write_corpus("text", corpus_pairs)
    done = run_mtkit(
        "spm",
        "train",
        "--model-prefix",
        "m",
        "--vocab-size",
        "80",
        f"{train}.en",
        f"{train}.de",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    done = run_mtkit("prepare", "--train", train, "--spm", "m", "-o", "bin", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "bin" / "manifest.json").read_text())["splits"]["train"]["read"]
    Path(f"{train}.de").write_text("\n".join(t for _, t in corpus_pairs[:-1]) + "\n")
    done = run_mtkit("prepare", "--train", train, "--spm", "m", "-o", "bin2", cwd=tmp_path)
    assert done.returncode == 1
    assert (
        done.stderr == f"Error: line counts differ: {train}.en has 240 lines, {train}.de has 239\n"
    )
    assert not (tmp_path / "bin2").exists()


def test_unknown_hf_dataset(tmp_path: Path, corpus_spm: Path) -> None:
    done = run_mtkit(
        "prepare",
        "--train",
        "hf:nobody-xyz/no-such-dataset",
        "--hf-config",
        "de-en",
        "--spm",
        str(corpus_spm),
        "-o",
        "bin",
        cwd=tmp_path,
        env={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"},
    )
    assert done.returncode == 1
    assert done.stderr.startswith("Error: unknown dataset nobody-xyz/no-such-dataset")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_killed_prepare_leaves_no_dataset(
    tmp_path: Path, corpus_pairs, corpus_spm: Path, signum: int
) -> None:
    """A signal mid-run (the corpus arrives through pipes, so the run cannot finish first):
    no dataset that `mtkit train` would take, no worker left; a new run then succeeds and
    removes what a killed run left. SIGTERM and SIGINT clean up at once and say so."""
    from mtkit.data.binarized import read_manifest
    from mtkit.errors import MtkitError

    pairs = corpus_pairs * 250  # 60,000 pairs, over 2 MB a side: read in 1 MB blocks
    data = {lang: "".join(f"{p[i]}\n" for p in pairs).encode() for i, lang in enumerate(LANGS)}
    release = threading.Event()

    def feed(path: Path, payload: bytes) -> None:  # 1.5 MB now, the rest never
        with contextlib.suppress(BrokenPipeError), open(path, "wb") as pipe:
            pipe.write(payload[: 3 << 19])
            release.wait(60)

    feeders = []
    for lang, payload in data.items():
        os.mkfifo(tmp_path / f"c.{lang}")
        feeders.append(threading.Thread(target=feed, args=(tmp_path / f"c.{lang}", payload)))
        feeders[-1].start()
    out = tmp_path / "out" / "bin"
    args = [
        "prepare",
        "--train",
        str(tmp_path / "c"),
        "--spm",
        str(corpus_spm),
        "-o",
        str(out),
        "--workers",
        "2",
        "--chunk-size",
        "500",
    ]
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}  # SIGABRT: every thread's stack
    process = subprocess.Popen(
        [*mtkit_command(), *args], cwd=tmp_path, stderr=subprocess.PIPE, env=env
    )
    try:
        deadline = time.monotonic() + 60
        while not [p for p in out.parent.glob(".bin.*.tmp/train.src.bin") if p.stat().st_size]:
            assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
            time.sleep(0.01)
        workers = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
        process.send_signal(signum)
        code = _wait_or_dump(process, 30)
        assert code == (-signal.SIGKILL if signum == signal.SIGKILL else 128 + signum)
    finally:
        release.set()
        for feeder in feeders:
            feeder.join()
    assert len(workers) == 2 and not out.exists()
    assert not list(tmp_path.rglob("manifest.json"))
    left = list(out.parent.iterdir()) if out.parent.exists() else []
    for directory in [out, *left]:  # a staging directory left behind is no dataset
        with pytest.raises(MtkitError, match="not an mtkit dataset"):
            read_manifest(directory)
    deadline = time.monotonic() + 10  # the workers die with the main process
    while any(_alive(int(pid)) for pid in workers):
        assert time.monotonic() < deadline, workers
        time.sleep(0.05)
    message = process.stderr.read().decode()  # no BrokenPipeError tracebacks from workers
    if signum == signal.SIGKILL:
        assert message == ""
        assert [p.name for p in out.parent.iterdir()][0].startswith(".bin.")  # staging left
    else:
        name = signal.Signals(signum).name
        assert message == f"mtkit prepare: interrupted by {name}: {out} was not written\n"
        assert not out.parent.exists()  # staging directory and the parent it made: gone
    for lang, payload in data.items():
        (tmp_path / f"c.{lang}").unlink()
        (tmp_path / f"c.{lang}").write_bytes(payload)
    done = run_mtkit(*args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert read_manifest(out)["splits"]["train"]["read"] == len(pairs)
    assert [p.name for p in out.parent.iterdir()] == ["bin"]  # stale staging removed


def _wait_or_dump(process: subprocess.Popen, timeout: float) -> int:
    """``process``'s exit status; one still running after ``timeout`` is aborted, and the test
    fails with the Python stack of each of its threads (faulthandler, on SIGABRT)."""
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        process.wait(timeout=30)
        stacks = process.stderr.read().decode(errors="replace")
        pytest.fail(f"still running {timeout} s after the signal; its threads:\n{stacks}")


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_pairs_from_the_command_line(tmp_path: Path, multi_corpus) -> None:
    train, valid = multi_corpus(40), multi_corpus(5, seed=9, name="valid")
    prefix = str(tmp_path / "multi")
    pairs = [a for name, spec in train.items() for a in ("--pair", f"{name}={spec}")]
    code, output = invoke("spm", "train", "--model-prefix", prefix, "--vocab-size", "80", *pairs)
    assert code == 0, output
    assert output.endswith("from 240 sentences, tags >>de<< >>fr<< >>cs<<\n")
    valid_pairs = [a for name, spec in valid.items() for a in ("--valid-pair", f"{name}={spec}")]
    out = tmp_path / "bin"
    code, output = invoke(
        "prepare", "--spm", prefix, "-o", str(out), "--max-ratio", "0", *pairs, *valid_pairs
    )
    assert code == 0, output
    lines = output.splitlines()
    assert lines[0] == f"prepared {out}: en-de,fr,cs, joint vocabulary 80, uint16"
    assert lines[1].startswith("  train read 120, kept 120, dropped 0; tokens en ")
    assert lines[2].startswith("    en-de read 40, kept 40, dropped 0; tokens en ")
    assert lines[5].startswith("  valid read 15, kept 15, dropped 0; tokens en ")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--pair", "en-de=c", "--pair", "en-de=c"], "Error: --pair en-de is given twice\n"),
        (
            ["--pair", "en-de=c", "--pair", "en-fr=u"],
            "Error: line counts differ: u.en has 2 lines, u.fr has 1\n",
        ),
        (
            ["--pair", "en-de"],
            "Error: --pair en-de: expected SRC-TGT=SOURCE, e.g. en-de=data/train\n",
        ),
    ],
)
def test_pair_errors_are_one_line_and_write_nothing(
    tmp_path: Path, monkeypatch, args: list, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    files = {"c.en": "a b\n", "c.de": "x y\n", "u.en": "a\nb\n", "u.fr": "x\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    for command in (
        ["spm", "train", "--model-prefix", "m", "--vocab-size", "12"],
        ["prepare", "--spm", "m.model", "-o", "bin"],
    ):
        if command[0] == "prepare":
            assert (
                invoke(
                    "spm",
                    "train",
                    "--model-prefix",
                    "m",
                    "--vocab-size",
                    "12",
                    "--pair",
                    "en-de=c",
                    "--pair",
                    "en-fr=c.tsv",
                )[0]
                != 0
            )
            (tmp_path / "c.tsv").write_text("a\tx\n")
            assert (
                invoke(
                    "spm",
                    "train",
                    "--model-prefix",
                    "m",
                    "--vocab-size",
                    "12",
                    "--pair",
                    "en-de=c",
                    "--pair",
                    "en-fr=c.tsv",
                )[0]
                == 0
            )
        before = sorted(p.name for p in tmp_path.iterdir())
        code, output = invoke(*command, *args)
        assert (code, output) == (1, message)
        assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("flag", [[], ["--byte-fallback"]])
def test_spm_byte_fallback_then_prepare(
    tmp_path: Path, write_corpus, corpus_pairs, flag: list
) -> None:
    """`--byte-fallback` reaches the model (SpmConfig.byte_fallback; off without the flag), and
    `mtkit prepare` keeps characters the model never saw: bytes in, the same text back."""
    from mtkit.data.binarized import ParallelData

    train = write_corpus("text", corpus_pairs[:200], "train")
    odd = [(f"{s} 🐶 ≈", f"{t} 犬 ☃") for s, t in corpus_pairs[200:210]]
    valid = write_corpus("tsv", odd, "valid")
    prefix = str(tmp_path / "spm")
    options = [*flag, "--vocab-size", "300", "--src-lang", "en", "--tgt-lang", "de"]
    code, output = invoke("spm", "train", *options, "--model-prefix", prefix, "--train", train)
    assert code == 0, output
    assert ("300 pieces (256 of them bytes: byte fallback) from 400" in output) == bool(flag)
    out = str(tmp_path / "bin")
    code, output = invoke("prepare", "--train", train, "--valid", valid, "--spm", prefix, "-o", out)
    assert code == 0, output
    data = ParallelData(tmp_path / "bin", "valid")
    unk = [UNK_ID in data.side(side, i) for side in ("src", "tgt") for i in range(len(data))]
    decoded = Tokenizer.from_file(f"{prefix}.model").decode(data.side("tgt", i) for i in range(10))
    assert (decoded == data.text("tgt") == [t for _, t in odd]) == bool(flag)
    assert any(unk) != bool(flag)
