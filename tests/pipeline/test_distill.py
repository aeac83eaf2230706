"""mtkit distill (mtkit.pipeline.distill): a corpus translated in parts; stopped anywhere and run
again, the output equals an uninterrupted run's, lines in = lines out; other jobs' parts refused."""

from __future__ import annotations

import dataclasses
import random
import signal
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from mtkit.checkpoint import save_checkpoint
from mtkit.cli import cli
from mtkit.config import DistillConfig, ModelConfig
from mtkit.data.tokenizer import train_spm
from mtkit.errors import MtkitError
from mtkit.model.transformer import build_model
from mtkit.pipeline import distill
from mtkit.pipeline.distill import distill_corpus, part_path
from mtkit.pipeline.signals import Interrupted
from mtkit.pipeline.translate import translate_file

pytestmark = pytest.mark.usefixtures("one_thread")
WORDS = "a man woman dog cat runs sits on the red blue green street house ball plays with".split()
FAST = dict(beam=2, max_len_a=0.0, max_len_b=4, part_lines=7)  # 7 lines a part
OPTIONS = ["--beam", "2", "--max-len-a", "0", "--max-len-b", "4", "--part-lines", "7", "-q"]


def lines(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(1, 8))) for _ in range(n)]


@pytest.fixture(scope="module")
def teachers(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Two random-weight checkpoints sharing one spm model (an ensemble)."""
    spm = train_spm(lines(300, seed=9), vocab_size=60)
    paths = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        cfg = ModelConfig(
            src_vocab_size=60,
            tgt_vocab_size=60,
            d_model=16,
            ffn_dim=32,
            heads=2,
            encoder_layers=1,
            decoder_layers=1,
            dropout=0.0,
            max_positions=64,
        )
        path = tmp_path_factory.mktemp("teacher") / f"teacher{seed}.pt"
        save_checkpoint(
            {
                "model_config": dataclasses.asdict(cfg),
                "model": build_model(cfg).state_dict(),
                "spm": {"src": spm, "tgt": spm},
            },
            path,
        )
        paths.append(str(path))
    return paths


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "train.en"
    path.write_text("".join(f"{line}\n" for line in lines(30)) + "\n  \nno final newline")
    return path  # 33 lines: 4 parts of 7 and one of 5, an empty and a blank line among them


def cfg(**values: object) -> DistillConfig:
    return DistillConfig.from_flat({**FAST, **values})


def test_lines_in_equal_lines_out_and_parts_translate_as_translate_does(
    teachers: list[str], source: Path, tmp_path: Path
) -> None:
    out = tmp_path / "train.de"
    stats = distill_corpus(teachers, str(source), str(out), cfg())
    got = out.read_text().splitlines()
    assert (stats.lines, stats.parts, stats.translated) == (33, 5, 5) and len(got) == 33
    assert got[30] == got[31] == "" and not (tmp_path / "train.de.parts").exists()
    config = cfg().translate
    reference = tmp_path / "reference.de"  # mtkit translate reading 7 lines at a time
    translate_file(
        teachers, str(source), str(reference), dataclasses.replace(config, chunk_lines=7)
    )
    assert out.read_text() == reference.read_text()


def test_stopped_in_a_part_and_run_again_gives_the_uninterrupted_output(
    teachers: list[str], source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = tmp_path / "whole.de"
    distill_corpus(teachers, str(source), str(whole), cfg())
    real, calls = distill.translate_chunk, []

    def stop_in_part_three(engine, chunk, first, *args):  # noqa: ANN001, ANN002, ANN202
        calls.append(first)
        if len(calls) == 8:  # parts of 7 lines in chunks of 3, 3, 1: part 3, its second chunk
            raise Interrupted(signal.SIGTERM)
        return real(engine, chunk, first, *args)

    monkeypatch.setattr(distill, "translate_chunk", stop_in_part_three)
    out, parts = tmp_path / "train.de", tmp_path / "train.de.parts"
    config = cfg(chunk_lines=3)
    with pytest.raises(Interrupted) as stop:
        distill_corpus(teachers, str(source), str(out), config)
    assert stop.value.lines == 14 and not out.exists()
    assert sorted(p.name for p in parts.iterdir()) == [
        "job.json",
        part_path(parts, 0).name,
        part_path(parts, 1).name,
    ]
    monkeypatch.setattr(distill, "translate_chunk", real)
    part_path(parts, 1).write_text("a part cut short\n")  # lines in != lines out: redone
    stats = distill_corpus(teachers, str(source), str(out), config)
    assert (stats.parts, stats.translated) == (5, 4)
    assert out.read_bytes() == whole.read_bytes()


def test_the_parts_of_another_job_are_refused_by_name(
    teachers: list[str], source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "train.de"
    config = cfg(keep_parts=True)
    distill_corpus(teachers, str(source), str(out), config)
    for changed, kwargs, named in [
        (teachers[:1], {}, "models"),
        (teachers, {"beam": 3}, "search"),
        (teachers, {"part_lines": 8}, "part_lines"),
        (teachers, {"quantize": "int8"}, "quantize"),
    ]:
        with pytest.raises(MtkitError, match=rf"holds the parts of another job \(its {named} "):
            distill_corpus(changed, str(source), str(out), cfg(keep_parts=True, **kwargs))
    source.write_text("another corpus\n")
    with pytest.raises(MtkitError, match=r"\(its source differs\): remove it"):
        distill_corpus(teachers, str(source), str(out), config)
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "notes.txt").write_text("mine")
    with pytest.raises(MtkitError, match="not a parts directory"):
        distill_corpus(teachers, str(source), str(out), cfg(parts_dir=str(stray)))


def test_cli_stops_in_one_line_and_resumes(
    teachers: list[str], source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "train.de"
    models = [arg for path in teachers for arg in ("-m", path)]
    args = ["distill", *models, "-i", str(source), "-o", str(out), *OPTIONS]
    real = distill.translate_chunk
    calls = []

    def stop_at_second_part(*a, **kw):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        if len(calls) == 2:
            raise Interrupted(signal.SIGINT)
        return real(*a, **kw)

    monkeypatch.setattr(distill, "translate_chunk", stop_at_second_part)
    stopped = CliRunner().invoke(cli, args)
    assert stopped.exit_code == 128 + signal.SIGINT and not out.exists()
    assert stopped.output.strip().count("\n") == 0 and "first 7 lines are kept" in stopped.output
    monkeypatch.setattr(distill, "translate_chunk", real)
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    assert len(out.read_text().splitlines()) == 33


@pytest.mark.parametrize(
    "args, message",
    [
        (["-i", "-", "-o", "x"], "give files to -i and -o, not '-'"),
        (["-i", "{src}", "-o", "-"], "give files to -i and -o, not '-'"),
        (["-i", "missing.en", "-o", "x"], "missing.en: no such file"),
        (["-i", "{src}", "-o", "x", "--nbest", "2"], "No such option '--nbest'"),
        (["-i", "{src}", "-o", "x", "--part-lines", "0"], "0 is not in the range x>=1"),
    ],
)
def test_user_mistakes_are_one_line_and_write_nothing(
    teachers: list[str],
    source: Path,
    tmp_path: Path,
    args: list[str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    args = [a.replace("{src}", str(source)) for a in args]
    result = CliRunner().invoke(cli, ["distill", "-m", teachers[0], *args])
    assert result.exit_code != 0 and message in result.output
    assert result.output.strip().count("\n") == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.en"]
