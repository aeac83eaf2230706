"""The bad-input matrix's checks of legitimate input: what a row that must succeed asserts
about its output (the rows are in bad_input_rows*.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import sentencepiece
from bad_input_world import DE, EN, Check, Outcome, World, invoke

from mtkit.checkpoint import load_checkpoint


def out_lines(path: Path) -> list[str]:
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n")
    return data.decode().split("\n")[:-1]


def translated_as(*source: str, out: str = "out.txt") -> Check:
    def check(w: World, t: Path, r: Outcome) -> None:
        assert out_lines(t / out) == w.translate(list(source))

    return check


def translated_with_warning(count: int, warning: str) -> Check:
    def check(w: World, t: Path, r: Outcome) -> None:
        assert len(out_lines(t / "out.txt")) == count
        assert re.fullmatch(warning, r.stderr.strip()), r.stderr

    return check


def spm_like_lf(w: World, t: Path, r: Outcome) -> None:
    (t / "lf.txt").write_bytes(EN + DE)
    again = invoke(
        ["spm", "train", "--model-prefix", str(t / "lf"), "--vocab-size", "40", str(t / "lf.txt")]
    )
    assert again.code == 0 and (t / "m.model").read_bytes() == (t / "lf.model").read_bytes()


def spm_written(pattern: str) -> Check:
    def check(w: World, t: Path, r: Outcome) -> None:
        assert re.fullmatch(pattern, r.stdout.strip()), r.stdout
        assert sentencepiece.SentencePieceProcessor(model_file=str(next(t.rglob("*.model"))))

    return check


def prepared_like_lf(w: World, t: Path, r: Outcome) -> None:
    for lang, text in (("en", EN), ("de", DE)):
        (t / f"lf.{lang}").write_bytes(text)
    again = invoke(
        [
            "prepare",
            "--spm",
            str(w.spm),
            "--workers",
            "0",
            "--train",
            str(t / "lf"),
            "--valid",
            str(t / "lf"),
            "-o",
            str(t / "lf-bin"),
        ]
    )
    assert again.code == 0
    names = ["train.src.bin", "train.tgt.idx", "valid.src.txt", "valid.tgt.txt"]
    assert all((t / "bin" / n).read_bytes() == (t / "lf-bin" / n).read_bytes() for n in names)


def prepared(split: str, **counts: object) -> Check:
    def check(w: World, t: Path, r: Outcome) -> None:
        manifest = json.loads(next(t.rglob("manifest.json")).read_text())
        got = manifest["splits"][split]
        assert {k: got[k] for k in counts} == counts, got

    return check


def prepared_nul(w: World, t: Path, r: Outcome) -> None:
    prepared("valid", read=2, kept=2)(w, t, r)
    assert (t / "bin" / "valid.src.txt").read_bytes() == b"a\x00b\nc\n"  # kept as a character


def trained(update: int, **config: object) -> Check:
    def check(w: World, t: Path, r: Outcome) -> None:
        ckpt = load_checkpoint(next(t.rglob("checkpoint_last.pt")))
        assert ckpt["update"] == update
        assert {k: ckpt["train_config"][k] for k in config} == config

    return check


def evaluated_like(hyp: bytes, ref: bytes) -> Check:
    def check(w: World, t: Path, r: Outcome) -> None:
        (t / "h2.txt").write_bytes(hyp)
        (t / "r2.txt").write_bytes(ref)
        again = invoke(["evaluate", "-i", str(t / "h2.txt"), "-r", str(t / "r2.txt"), "--json"])
        assert again.code == 0 and json.loads(r.stdout) == json.loads(again.stdout)

    return check


def scored_as_sacrebleu(hyps: list[str], refs: list[str]) -> Check:
    def check(w: World, t: Path, r: Outcome) -> None:
        import sacrebleu

        expected = sacrebleu.corpus_bleu(hyps, [refs]).score
        assert json.loads(r.stdout)[0]["score"] == pytest.approx(expected)

    return check


def made(relative: str, prefix: bytes) -> Check:
    """The command wrote ``relative``, making its missing directories; it starts with
    ``prefix`` (a zip's for checkpoints, PNG's for plots)."""

    def check(w: World, t: Path, r: Outcome) -> None:
        assert (t / relative).read_bytes().startswith(prefix)

    return check


def png(w: World, t: Path, r: Outcome) -> None:
    assert (t / "curve.png").read_bytes().startswith(b"\x89PNG")


def ct2_model(w: World, t: Path, r: Outcome) -> None:
    assert (t / "new" / "ct2" / "model.bin").is_file()


def untouched_run(w: World, t: Path, r: Outcome) -> None:
    """After a failed save: the newest checkpoint is still the one of update 4, and loads."""
    assert load_checkpoint(t / "run" / "checkpoint_last.pt")["update"] == 4
