"""Fine-tuning an imported OPUS-MT-like model: prepare --tokenizer-from, train --init-from;
the loss falls, resuming is bitwise, the new checkpoints average and export back to HF."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from export_helpers import TEST_LINES, corpus
from hf_import_helpers import BOUND, load_hf, ours
from marian_helpers import hf_generate

from mtkit.checkpoint import load_checkpoint
from mtkit.cli import cli
from mtkit.export.hf_import import import_hf

pytest.importorskip("transformers", reason="needs the 'hf' extra: pip install -e '.[hf]'")
pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")


def run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def setup(marian_joint: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("finetune")
    import_hf(marian_joint, root / "model.pt")
    for split, n, seed in (("train", 200, 5), ("valid", 20, 6)):
        pairs = corpus(n, seed)
        (root / f"{split}.en").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
        (root / f"{split}.de").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    run(
        "prepare",
        "--src-lang",
        "en",
        "--tgt-lang",
        "de",
        "--tokenizer-from",
        str(root / "model.pt"),
        "--train",
        str(root / "train"),
        "--valid",
        str(root / "valid"),
        "-o",
        str(root / "data"),
        "--workers",
        "0",
    )
    return root


def train(root: Path, run_dir: Path, updates: int) -> None:
    run(
        "train",
        "--data",
        str(root / "data"),
        "--run-dir",
        str(run_dir),
        "--init-from",
        str(root / "model.pt"),
        "--device",
        "cpu",
        "--max-tokens",
        "256",
        "--lr",
        "1e-3",
        "--warmup-updates",
        "1",
        "--max-updates",
        str(updates),
        "--validate-every",
        "0",
        "--save-every",
        "3",
        "-q",
        "--set",
        "log_every=1",
    )


def test_data_is_encoded_with_the_checkpoints_vocabulary(setup: Path) -> None:
    table = json.loads((setup / "data" / "vocab.json").read_text(encoding="utf-8"))
    ckpt = load_checkpoint(setup / "model.pt")
    assert table == {"vocab": ckpt["vocab"], "special_ids": ckpt["special_ids"]}


def test_finetune_loss_falls_resumes_bitwise_and_exports(setup: Path) -> None:
    train(setup, setup / "run", 6)
    records = [json.loads(line) for line in (setup / "run" / "metrics.jsonl").open()]
    losses = [r["loss"] for r in records if "loss" in r]
    assert len(losses) == 6 and losses[-1] < losses[0]
    last = load_checkpoint(setup / "run" / "checkpoint_last.pt")
    assert last["special_ids"] == load_checkpoint(setup / "model.pt")["special_ids"]

    train(setup, setup / "resumed", 3)  # stop, then the same command further
    train(setup, setup / "resumed", 6)
    again = load_checkpoint(setup / "resumed" / "checkpoint_last.pt")
    assert all(torch.equal(again["model"][k], v) for k, v in last["model"].items())

    run("average", "--last", "2", str(setup / "run"), "-o", str(setup / "avg.pt"))
    assert load_checkpoint(setup / "avg.pt")["vocab"] == last["vocab"]
    assert ours(setup / "avg.pt", TEST_LINES, 4, 1.0)  # translates

    run("export", "-m", str(setup / "run" / "checkpoint_last.pt"), "-f", "hf", str(setup / "hf"))
    hf, tok = load_hf(setup / "hf")
    for beam in (1, 4):
        got = hf_generate(hf, tok, TEST_LINES, BOUND, num_beams=beam, early_stopping=True)
        assert got == ours(setup / "run" / "checkpoint_last.pt", TEST_LINES, beam, 1.0)


def test_init_from_refuses_another_vocabulary_size(setup: Path) -> None:
    from mtkit.data.tokenizer import train_spm

    (setup / "other.model").write_bytes(train_spm([s for s, _ in corpus(200, 5)], 40))
    run(
        "prepare",
        "--src-lang",
        "en",
        "--tgt-lang",
        "de",
        "--spm",
        str(setup / "other.model"),
        "--train",
        str(setup / "train"),
        "-o",
        str(setup / "other"),
        "--workers",
        "0",
    )
    result = CliRunner().invoke(
        cli,
        [
            "train",
            "--data",
            str(setup / "other"),
            "--run-dir",
            str(setup / "bad"),
            "--init-from",
            str(setup / "model.pt"),
            "--device",
            "cpu",
            "-q",
        ],
    )
    assert result.exit_code == 1 and "--tokenizer-from" in result.output
    assert not (setup / "bad").exists()
