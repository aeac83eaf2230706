"""`mtkit train` and `mtkit average`: every bad option or missing file is a one-line error."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from training_helpers import TINY_MODEL, train_args

from mtkit.checkpoint import load_checkpoint
from mtkit.config import MODEL_PRESETS


def assert_one_line_error(result, *culprits: str) -> None:
    assert result.exit_code not in (0, None), result.output
    assert (
        "Traceback" not in result.output
        and result.exception is None
        or isinstance(result.exception, SystemExit)
    ), result.exception
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("Error:"), result.output
    assert len([line for line in lines if line.startswith("Error")]) == 1
    for culprit in culprits:
        assert culprit in lines[-1], (culprit, result.output)


@pytest.mark.parametrize(
    "extra, culprits",
    [
        (["--set", "max_tokens=0"], ["max_tokens", "> 0"]),
        (["--max-tokens", "8"], ["exceeds max_tokens=8"]),
        (["--lr", "-1"], ["lr"]),
        (["--label-smoothing", "1.5"], ["label_smoothing"]),
        (["--update-freq", "0"], ["update_freq"]),
        (["--max-updates", "abc"], ["--max-updates", "abc"]),
        (["--precision", "fp64"], ["--precision", "fp64"]),
        (["--device", "tpu"], ["tpu"]),
        (["--preset", "transformer-huge"], ["transformer-huge", "transformer-small"]),
        (["--set", "nosuchkey=1"], ["nosuchkey"]),
        (["--set", "lr"], ["--set", "KEY=VALUE"]),
        (["--set", "warmup_updates=many"], ["warmup_updates", "many"]),
        (["--set", "model.nosuch=3"], ["nosuch"]),
        (["--set", "model.heads=5"], ["heads"]),
        (["--set", "model.src_vocab_size=10"], ["src_vocab_size", "dataset"]),
        (["--set", "nan_policy=ignore"], ["nan_policy"]),
        (["--set", "compile=maybe"], ["compile", "maybe", "off or on or auto"]),
        (["--compile", "fast"], ["--compile", "fast"]),
    ],
)
def test_bad_options(tmp_path: Path, tiny_dataset: Path, mtkit, extra, culprits) -> None:
    result = mtkit(*train_args(tiny_dataset, tmp_path / "run", "--max-updates", "1", *extra))
    assert_one_line_error(result, *culprits)


def test_help_lists_every_preset(mtkit) -> None:
    result = mtkit("train", "--help")
    assert result.exit_code == 0, result.output
    text = re.sub(r"-\s+", "-", result.output)  # click wraps the help after hyphens too
    for name in MODEL_PRESETS:
        assert name in text, (name, result.output)


def test_missing_things(tmp_path: Path, tiny_dataset: Path, mtkit) -> None:
    assert_one_line_error(mtkit("train", "--run-dir", str(tmp_path / "r"), "-q"), "--data")
    missing = tmp_path / "nodata"
    assert_one_line_error(mtkit(*train_args(missing, tmp_path / "r")), str(missing))
    config = tmp_path / "none.yaml"
    result = mtkit(*train_args(tiny_dataset, tmp_path / "r", "--config", str(config)))
    assert_one_line_error(result, str(config))


@pytest.mark.parametrize(
    "text, culprits",
    [
        ("lr: [1, 2\n", ["invalid YAML"]),
        ("- just\n- a list\n", ["mapping"]),
        ("max_updates: 1\nbogus: 2\n", ["bogus"]),
        ("max_updates: 1\nmodel: 3\n", ["model"]),
        ("max_updates: 1\nmodel:\n  d_model: sixteen\n", ["d_model", "sixteen"]),
    ],
)
def test_bad_yaml(tmp_path: Path, tiny_dataset: Path, mtkit, text: str, culprits) -> None:
    config = tmp_path / "train.yaml"
    config.write_text(text)
    result = mtkit(*train_args(tiny_dataset, tmp_path / "r", "--config", str(config)))
    assert_one_line_error(result, *culprits)


def test_yaml_with_model_section_and_cli_precedence(tmp_path: Path, tiny_dataset, mtkit) -> None:
    config = tmp_path / "train.yaml"
    config.write_text(
        f"data: {tiny_dataset}\nmax_updates: 5\nlr: 1e-3\nseed: 4\n"
        "model:\n  d_model: 16\n  ffn_dim: 32\n  heads: 2\n  encoder_layers: 1\n"
        "  decoder_layers: 1\n"
    )
    run = tmp_path / "run"
    result = mtkit(
        "train",
        "--config",
        str(config),
        "--run-dir",
        str(run),
        "--device",
        "cpu",
        "--max-updates",
        "2",
        "--set",
        "model.ffn_dim=48",
        "-q",
    )
    assert result.exit_code == 0, result.output
    ckpt = load_checkpoint(run / "checkpoint_last.pt")
    assert ckpt["update"] == 2 and ckpt["train_config"]["lr"] == 1e-3
    assert ckpt["train_config"]["seed"] == 4
    assert ckpt["model_config"]["d_model"] == 16 and ckpt["model_config"]["ffn_dim"] == 48


def test_average_two_checkpoints_is_their_mean(tmp_path: Path, tiny_dataset, mtkit) -> None:
    run = tmp_path / "run"
    result = mtkit(*train_args(tiny_dataset, run, "--max-updates", "3", "--save-every", "1"))
    assert result.exit_code == 0, result.output
    out = tmp_path / "avg.pt"
    result = mtkit("average", "--last", "2", str(run), "-o", str(out))
    assert result.exit_code == 0 and "checkpoint_2.pt, checkpoint_3.pt" in result.output
    avg, a, b = (
        load_checkpoint(p) for p in (out, run / "checkpoint_2.pt", run / "checkpoint_3.pt")
    )
    for name, tensor in avg["model"].items():
        torch.testing.assert_close(tensor, (a["model"][name] + b["model"][name]) / 2)
    assert avg["spm"] == a["spm"] and avg["model_config"] == a["model_config"]
    assert avg["train_config"] == a["train_config"] and "optimizer" not in avg
    same = mtkit(
        "average",
        "-c",
        str(run / "checkpoint_2.pt"),
        "-c",
        str(run / "checkpoint_3.pt"),
        "-o",
        str(tmp_path / "avg2.pt"),
    )
    assert same.exit_code == 0
    assert all(
        torch.equal(t, load_checkpoint(tmp_path / "avg2.pt")["model"][n])
        for n, t in avg["model"].items()
    )


def test_average_errors(tmp_path: Path, tiny_dataset: Path, mtkit) -> None:
    run, other = tmp_path / "run", tmp_path / "other"
    one = ["--max-updates", "1", "--save-every", "1"]
    assert mtkit(*train_args(tiny_dataset, run, *one)).exit_code == 0
    wider = [*TINY_MODEL, "--set", "model.ffn_dim=48"]
    assert mtkit(*train_args(tiny_dataset, other, *one, *wider)).exit_code == 0
    out = str(tmp_path / "avg.pt")
    result = mtkit(
        "average",
        "-c",
        str(run / "checkpoint_1.pt"),
        "-c",
        str(other / "checkpoint_1.pt"),
        "-o",
        out,
    )
    assert_one_line_error(result, "ffn_dim", "model config differs")
    assert_one_line_error(mtkit("average", "--last", "3", str(run), "-o", out), "fewer than 3")
    assert_one_line_error(mtkit("average", "-o", out), "--last")
    assert_one_line_error(
        mtkit("average", "--last", "1", str(tmp_path / "nope"), "-o", out), "nope"
    )
    missing = str(tmp_path / "missing.pt")
    assert_one_line_error(mtkit("average", "-c", missing, "-o", out), "missing.pt")
    assert not Path(out).exists()


def test_max_tokens_is_documented_as_counted(mtkit) -> None:
    """A batch costs its pairs x (max(source, target) + 1) of its longest pair: --help, the
    config's comment and docs/train.md say so (not "target tokens")."""
    import inspect

    from mtkit import config

    phrase = "max(source, target) + 1"
    help_text = " ".join(mtkit("train", "--help").output.split())
    assert f"--max-tokens INTEGER Per batch and process: pairs x ({phrase}) of its" in help_text
    source = inspect.getsource(config.TrainConfig)
    assert f"pairs x ({phrase}) of its longest pair" in source and "target tokens" not in source
    readme = (Path(__file__).parents[2] / "docs" / "train.md").read_text()
    assert f"| `--max-tokens` | 4096 | per batch and process: pairs × ({phrase})" in readme


def test_a_second_train_on_a_run_directory_in_use_is_refused_and_changes_nothing(
    tmp_path: Path, tiny_dataset: Path, mtkit
) -> None:
    from mtkit.pipeline.rundir import run_dir_lock

    run = tmp_path / "run"
    assert mtkit(*train_args(tiny_dataset, run, "--max-updates", "1")).exit_code == 0
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    with run_dir_lock(run):  # what a running `mtkit train` holds
        result = mtkit(*train_args(tiny_dataset, run, "--max-updates", "2"))
    assert_one_line_error(result, str(run), "another mtkit train")
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before
    result = mtkit(*train_args(tiny_dataset, run, "--max-updates", "2"))  # released: resumes
    assert result.exit_code == 0, result.output
    assert load_checkpoint(run / "checkpoint_last.pt")["update"] == 2
    assert sorted(p.name for p in run.iterdir()) == sorted(before)  # the lock adds no file
