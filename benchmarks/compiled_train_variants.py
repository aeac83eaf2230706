"""Every model variant (tests/variants.py) trained through the compiled step with inductor,
against eager (issue 53): the loss and the largest gradient difference on three batch shapes
(equal source and target lengths first), dropout on, the same random state for both.

The tests (tests/training/test_compiled_train.py) run a covering subset on dynamo's
``aot_eager`` backend, bitwise; this runs inductor's kernels, where compiling takes a minute or
more per variant on 2 cores (about 30 minutes in all).

    .venv/bin/python benchmarks/compiled_train_variants.py [NAME,...]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from variants import VARIANTS  # noqa: E402

from mtkit.config import ModelConfig  # noqa: E402
from mtkit.model.transformer import build_model  # noqa: E402
from mtkit.training.compiled import compile_graph, loss_function  # noqa: E402

SHAPES = [(3, 7, 7), (5, 4, 9), (2, 11, 3)]  # (rows, source, target)
CPU = torch.device("cpu")


def batch(rows: int, source: int, target: int) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(rows * 1000 + source * 10 + target)
    src = torch.randint(4, 40, (rows, source), generator=gen)
    tgt_in = torch.randint(4, 40, (rows, target), generator=gen)
    tgt_out = torch.randint(4, 40, (rows, target), generator=gen)
    src[0, -2:] = 1
    tgt_out[1, -1] = 1
    return src, tgt_in, tgt_out


def check(name: str) -> str:
    torch._dynamo.reset()
    torch.manual_seed(0)
    cfg = ModelConfig(
        40,
        40,
        d_model=32,
        ffn_dim=64,
        heads=4,
        encoder_layers=2,
        decoder_layers=2,
        **VARIANTS[name],
    )
    model = build_model(cfg)
    eager = loss_function(model, 0.1, 1, CPU, None)
    compiled = compile_graph(eager)
    began, diffs = time.perf_counter(), []
    for shape in SHAPES:
        results = []
        for fn in (eager, compiled):
            torch.manual_seed(5)
            loss = fn(*batch(*shape))[0]
            loss.backward()
            results.append((loss.item(), [p.grad.clone() for p in model.parameters()]))
            model.zero_grad()
        (a, ga), (b, gb) = results
        grad = max((x - y).abs().max().item() for x, y in zip(ga, gb, strict=True))
        diffs.append(f"loss {abs(a - b):.1e} (of {a:.1f}) grad {grad:.1e}")
    return f"{name:24s} {time.perf_counter() - began:6.1f} s  " + " | ".join(diffs)


def main() -> None:
    names = sys.argv[1].split(",") if len(sys.argv) > 1 else list(VARIANTS)
    print(
        "torch",
        torch.__version__,
        "| inductor, dynamic shapes, fallback_random; CPU threads",
        torch.get_num_threads(),
    )
    for name in names:
        print(check(name), flush=True)


if __name__ == "__main__":
    main()
