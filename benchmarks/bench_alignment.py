"""Word alignments (issue 27): how well the model's attention alignments agree with eflomal's.

The checkpoint translates test_2016_flickr (en) with ``--alignment`` once per decoder layer.
eflomal (Östling & Tiedemann 2016; on PyPI, run in its own virtual environment,
``.bench/venv-eflomal``, created here once) aligns the same pairs (each source with the
model's own translation), with the Multi30k training set (29,000 pairs) beside them so that
its statistics have enough text; its forward and reverse links of the test pairs give two
references: their intersection (precise) and their union (generous). For each layer the table
gives precision and recall against each, and the alignment error rate with the intersection as
sure links and the union as possible ones (AER, Och & Ney 2003; with eflomal as the
annotator, not a human: no gold en-de set with a usable licence is at hand). Words are
whitespace words, lowercased for eflomal.

    .venv/bin/python benchmarks/bench_alignment.py CKPT [--threads 2] [--beam 5] [--out DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from machine import print_machine
from multi30k import DEMO_CHECKPOINT, existing, read_text

from mtkit.config import TranslateConfig
from mtkit.engines import load_engine

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".bench" / "venv-eflomal"
Pairs = set[tuple[int, int]]


def eflomal_python() -> Path:
    """The eflomal venv's python (created and filled once)."""
    python = VENV / "bin" / "python"
    if not (VENV / "bin" / "eflomal-align").exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "eflomal"], check=True)
    return python


def eflomal_links(src: list[str], tgt: list[str], work: Path) -> tuple[list[Pairs], list[Pairs]]:
    """eflomal's forward and reverse links of every pair (lowercased whitespace words)."""
    python = eflomal_python()
    (work / "src.txt").write_text("".join(s.lower() + "\n" for s in src), encoding="utf-8")
    (work / "tgt.txt").write_text("".join(t.lower() + "\n" for t in tgt), encoding="utf-8")
    files = ["-s", "src.txt", "-t", "tgt.txt", "-f", "fwd.txt", "-r", "rev.txt"]
    names = [name if name.startswith("-") else str(work / name) for name in files]
    subprocess.run(
        [str(python), str(VENV / "bin" / "eflomal-align"), "--overwrite", *names], check=True
    )
    return [read_links(work / name) for name in ("fwd.txt", "rev.txt")]  # type: ignore[return-value]


def read_links(path: Path) -> list[Pairs]:
    return [parse(line) for line in path.read_text(encoding="utf-8").splitlines()]


def parse(line: str) -> Pairs:
    return {(int(i), int(j)) for i, j in (pair.split("-") for pair in line.split())}


def scores(ours: list[Pairs], sure: list[Pairs], possible: list[Pairs]) -> dict[str, float]:
    a = sum(len(x) for x in ours)
    a_s = sum(len(x & s) for x, s in zip(ours, sure, strict=True))
    a_p = sum(len(x & p) for x, p in zip(ours, possible, strict=True))
    s = sum(len(x) for x in sure)
    p = sum(len(x) for x in possible)
    return {
        "P(sure)": a_s / a,
        "R(sure)": a_s / s,
        "P(poss)": a_p / a,
        "R(poss)": a_p / p,
        "AER": 1 - (a_s + a_p) / (a + s),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", nargs="?", default=str(DEMO_CHECKPOINT))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / ".bench" / "alignment")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print_machine()
    src = read_text("test_2016_flickr", "en")
    train_src, train_tgt = read_text("train", "en"), read_text("train", "de")
    config = TranslateConfig.from_flat(
        {"threads": args.threads, "device": "cpu", "beam": args.beam, "alignment": True}
    )
    engine = load_engine([existing(args.checkpoint, "make demo")], config)
    layers = engine.models[0].cfg.decoder_layers
    found, text = {}, []
    for layer in range(layers):
        engine.config.alignment_layer = layer
        start = time.perf_counter()
        results = engine.translate(src)
        seconds = time.perf_counter() - start
        text = [hyps[0].text if hyps else "" for hyps in results]
        found[layer] = [set(hyps[0].alignment or ()) if hyps else set() for hyps in results]
        print(
            f"layer {layer}: translated {len(src)} lines with alignments in {seconds:.1f} s",
            flush=True,
        )
    (args.out / "test.de").write_text("".join(t + "\n" for t in text), encoding="utf-8")
    start = time.perf_counter()
    fwd, rev = eflomal_links(train_src + src, train_tgt + text, args.out)
    fwd, rev = fwd[-len(src) :], rev[-len(src) :]
    print(
        f"eflomal: {len(train_src) + len(src)} pairs aligned in "
        f"{time.perf_counter() - start:.1f} s",
        flush=True,
    )
    sure = [f & r for f, r in zip(fwd, rev, strict=True)]
    possible = [f | r for f, r in zip(fwd, rev, strict=True)]
    default = layers - 1
    print(f"\n{'layer':<14}" + "".join(f"{k:>9}" for k in scores(found[0], sure, possible)))
    for layer, ours in found.items():
        row = scores(ours, sure, possible)
        name = f"{layer}{' (default)' if layer == default else ''}"
        print(f"{name:<14}" + "".join(f"{v:>9.3f}" for v in row.values()))
    for name, ref in (("eflomal fwd", fwd), ("eflomal rev", rev)):
        row = scores(ref, sure, possible)
        print(f"{name:<14}" + "".join(f"{v:>9.3f}" for v in row.values()))


if __name__ == "__main__":
    main()
