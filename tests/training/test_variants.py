"""Every variant of the model (tests/variants.py) trains, resumes bitwise and averages.

Three short runs per variant (6 updates straight; 3, then resumed to 6), about half a second in
all on one thread; heads=4 so that kv_heads 1 and 2 are grouped-query attention."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from subprocess_helpers import assert_same_run
from training_helpers import train_args
from variants import VARIANTS

from mtkit.checkpoint import Checkpoint
from mtkit.config import SearchConfig
from mtkit.data.tokenizer import EOS_ID
from mtkit.decoding.search import generate
from mtkit.training.average import average_checkpoints


def model_options(overrides: dict) -> list[str]:
    """``--set model.NAME=VALUE`` for each override, values spelled as YAML."""
    options = ["--set", "model.heads=4"]
    for name, value in overrides.items():
        spelled = str(value).lower() if isinstance(value, bool) else value
        options += ["--set", f"model.{name}={spelled}"]
    return options


@pytest.mark.parametrize("name", list(VARIANTS))
def test_variant_resumes_bitwise_and_averages(
    name: str, tmp_path: Path, tiny_dataset: Path, mtkit
) -> None:
    options = [
        *model_options(VARIANTS[name]),
        "--save-every",
        "3",
        "--keep-last",
        "3",
        "--set",
        "log_every=1",
    ]
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    for run, updates in ((straight, "6"), (stopped, "3"), (stopped, "6")):
        result = mtkit(*train_args(tiny_dataset, run, "--max-updates", updates, *options))
        assert result.exit_code == 0, result.output
    a, _ = assert_same_run(straight, stopped)
    assert a["update"] == 6
    for key, value in VARIANTS[name].items():
        assert a["model_config"][key] == value

    average_checkpoints(
        [straight / "checkpoint_3.pt", straight / "checkpoint_6.pt"], tmp_path / "averaged.pt"
    )
    three = Checkpoint.load(straight / "checkpoint_3.pt")
    mean = {
        key: ((tensor.double() + a["model"][key].double()) / 2).to(tensor.dtype)
        for key, tensor in three.model.items()
    }
    by_hand = three.build_model()
    by_hand.load_state_dict(mean)
    averaged = Checkpoint.load(tmp_path / "averaged.pt")
    got, expected, first = (
        decode(m) for m in (averaged.build_model(), by_hand, three.build_model())
    )
    assert got == expected  # the file decodes as the mean of the two models' weights does
    assert got != first  # ... which is not what the first of them decodes
    for key, tensor in averaged.model.items():
        torch.testing.assert_close(tensor, mean[key], rtol=0, atol=0)


def decode(model: torch.nn.Module) -> list[list[tuple[list[int], float]]]:
    """Each sentence's 2-best (tokens, score) by beam search."""
    src = torch.tensor([[5, 6, 7, EOS_ID], [8, 9, 10, 11]])
    hyps = generate([model.eval()], src, SearchConfig(beam=2, nbest=2))
    return [[(list(h.tokens), h.score) for h in nbest] for nbest in hyps]
