"""bench_train.py's pieces that need no peer venv and no training: Eole's config matches the
shared settings, its log lines parse, and the report prints ratios to both peers."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))

import train_configs as tc  # noqa: E402
from train_report import report  # noqa: E402
from train_runs import EOLE_PARAMS, EOLE_RATE, Result  # noqa: E402

ARGS = argparse.Namespace(
    warmup=20, updates=100, log_every=10, max_tokens=4096, eole_max_tokens=None
)


def test_eole_config_matches_the_shared_model_and_optimiser() -> None:
    cfg = tc.eole_config(Path("w"), Path("d"), ARGS)
    model, training = cfg["model"], cfg["training"]
    assert (model["layers"], model["hidden_size"], model["heads"]) == (3, 256, 4)
    assert (model["transformer_ff"], model["mlp_activation_fn"]) == (1024, "relu")
    assert model["share_embeddings"] and model["share_decoder_embeddings"]
    assert cfg["src_vocab_size"] == tc.VOCAB_SIZE and cfg["transforms"] == []
    assert training["train_steps"] == 121  # the window ends at the start of update W+N+1
    assert (training["batch_type"], training["batch_size"]) == ("tokens", 4096)
    assert training["gpu_ranks"] == [] and training["num_workers"] == 0
    assert (training["adam_beta1"], training["adam_beta2"]) == tuple(tc.BETAS)
    assert training["compute_dtype"] == "fp32"
    # noam: learning_rate * d^-0.5 * min(step^-0.5, step * warmup^-1.5) peaks at LR
    peak = training["learning_rate"] * tc.D_MODEL**-0.5 * tc.WARMUP**-0.5
    assert math.isclose(peak, tc.LR)


@pytest.mark.parametrize(
    ("extra", "precision", "batch"), [({}, "bf16", 4096), ({"eole_max_tokens": 5000}, "fp32", 5000)]
)
def test_eole_config_variants(extra: dict, precision: str, batch: int) -> None:
    args = argparse.Namespace(**(vars(ARGS) | extra))
    training = tc.eole_config(Path("w"), Path("d"), args, precision)["training"]
    assert (training["compute_dtype"], training["batch_size"]) == (precision, batch)


def test_mtkit_compiled_config_differs_in_compile_only() -> None:
    plain, compiled = tc.mtkit_config(ARGS), tc.mtkit_config(ARGS, compile=True)
    assert "compile" not in plain and compiled == plain | {"compile": "on"}


def test_eole_log_lines_parse() -> None:
    line = (
        "[2026-11-28 08:11:18,322 INFO] Step 20/  121; acc: 0.0; ppl: 8643.34; xent: 9.06; "
        "aux: 0.000; mtp: 0.000; attn_ent: 2.772; lr: 7.00e-07; sents:     413; bsz: "
        "3604/3698/206; 1295/1303 tok/s;     68 sec;"
    )
    assert [(m[1], m[2]) for m in EOLE_RATE.finditer(line)] == [("20", "1303")]
    assert EOLE_PARAMS.search("[x INFO] * number of parameters: 7578624")[1] == "7578624"


def result(tool: str, rnd: int, tokens: int, seconds: float) -> Result:
    return Result(tool, rnd, {1: tokens}, seconds, tokens, None, 1)


def test_report_gives_ratios_to_both_peers_and_to_each_fp32_row() -> None:
    rows = [
        result("JoeyNMT 2.3.0", 1, 1000, 1.0),
        result("Eole 0.6.4", 1, 2000, 1.0),
        result("Eole 0.6.4 bf16", 1, 3000, 1.0),
        result("mtkit", 1, 4000, 1.0),
        result("mtkit compiled", 1, 5000, 1.0),
    ]
    text = report(rows, 1e6, 1e10)
    mtkit = next(line for line in text.splitlines() if line.split()[:3] == ["1", "mtkit", "1"])
    assert mtkit.split()[-3:] == ["4.00x", "2.00x", "40.0%"]
    assert "mtkit / Eole" in text and "mtkit / JoeyNMT" in text
    assert "round 1: Eole 0.6.4 bf16 / Eole 0.6.4 fp32 1.50x" in text
    assert "round 1: mtkit compiled / mtkit fp32 1.25x" in text
