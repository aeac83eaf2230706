"""The tokenizer on the text people write (issue 50): UNK, pieces and round trips, by variant.

Trains joint 8k BPE models on Multi30k train (en+de, the shipped gzip files) the way the multi30k
recipe does (`mtkit spm train --train ... --src-lang en --tgt-lang de --vocab-size 8000`, every
other option at its default), one per variant:

    baseline        the recipe's model as it is
    byte-fallback   `--byte-fallback`: characters outside the vocabulary become UTF-8 byte
                    pieces <0x00>..<0xFF> (256 of the 8000) instead of UNK
    split-digits    byte fallback and sentencepiece's split_digits (each digit its own piece)
    casefold        byte fallback and the normalization rule nmt_nfkc_cf (case folded: every
                    text is lowercased before it is encoded)

(split-digits and casefold are not mtkit options: sentencepiece's trainer is called with the one
option added; measured here only.)

and encodes test_2016_flickr, English (the source side) and German (the target side), as written
and perturbed: UPPERCASE, Title Case (each word's first letter up, the rest down), lowercase,
emoji and symbols (two per line, from NOISE, inserted at seeded random places, half of them glued
to a word) and typos (two adjacent letters swapped in one word of five, 4 letters or more).

Per variant, side and text: the share of pieces that are UNK, the share of lines holding one, the
pieces per sentence, and the share of lines whose round trip is exact: decode(encode(x)) equals x
as mtkit's models normalize it (sentencepiece's nmt_nfkc: NFKC, whitespace runs as one space).

    .venv/bin/python benchmarks/bench_tokenizer_robustness.py            # ~5 s on 2 cores
    .venv/bin/python benchmarks/bench_tokenizer_robustness.py --quick    # 3,000 sampled sentences
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent))

from multi30k import SHIPPED, read_lines  # noqa: E402

if TYPE_CHECKING:
    from mtkit.data.tokenizer import Tokenizer

# emoji, arrows, maths, currency, typography: what social-media text and product listings hold
NOISE = list("🙂😂👍❤🐶🚲🎉🔥🌞⚽→★♪✓€£©°±×∞≈•¿¡«»„“”‘’–—") + ["❤️", "👨‍👩‍👧", "🇩🇪", "日本", "…"]
VARIANTS: dict[str, tuple[bool, dict[str, object]]] = {
    "baseline": (False, {}),
    "byte-fallback": (True, {}),
    "split-digits": (True, {"split_digits": True}),
    "casefold": (True, {"normalization_rule_name": "nmt_nfkc_cf"}),
}
SIDES = {"en": "English (source)", "de": "German (target)"}


def title_case(line: str) -> str:
    return " ".join(w[:1].upper() + w[1:].lower() for w in line.split(" "))


def noisy(line: str, rng: random.Random, count: int = 2) -> str:
    """``count`` items of NOISE inserted at random places: alone, or glued to a word's end."""
    words = line.split()
    for _ in range(count):
        item, at = rng.choice(NOISE), rng.randint(0, len(words))
        if words and at > 0 and rng.random() < 0.5:
            words[at - 1] += item
        else:
            words.insert(at, item)
    return " ".join(words)


def typos(line: str, rng: random.Random, rate: float = 0.2) -> str:
    """Two adjacent letters swapped in about ``rate`` of the words of 4 letters or more."""
    words = line.split()
    for i, word in enumerate(words):
        if len(word) >= 4 and word.isalpha() and rng.random() < rate:
            at = rng.randrange(len(word) - 1)
            words[i] = word[:at] + word[at + 1] + word[at] + word[at + 2 :]
    return " ".join(words)


def perturbations(seed: int) -> dict[str, Callable[[str], str]]:
    rng = random.Random(seed)
    return {
        "clean": lambda line: line,
        "UPPERCASE": str.upper,
        "Title Case": title_case,
        "lowercase": str.lower,
        "emoji/symbols": lambda line: noisy(line, rng),
        "typos": lambda line: typos(line, rng),
    }


@contextlib.contextmanager
def trainer_options(extra: dict[str, object]) -> Iterator[None]:
    """sentencepiece's trainer called with ``extra`` options added to mtkit's own."""
    import sentencepiece as spm

    real = spm.SentencePieceTrainer.Train
    if extra:
        spm.SentencePieceTrainer.Train = lambda **kw: real(**kw, **extra)
    try:
        yield
    finally:
        spm.SentencePieceTrainer.Train = real


def train(name: str, work: Path, sample: int) -> tuple[Tokenizer, float]:
    """The variant's model, trained as `mtkit spm train` does, and the seconds it took."""
    from mtkit.config import SpmConfig
    from mtkit.data.tokenizer import Tokenizer
    from mtkit.pipeline.spm import train_models

    byte_fallback, extra = VARIANTS[name]
    cfg = SpmConfig(
        train=str(SHIPPED / "train"),
        src_lang="en",
        tgt_lang="de",
        vocab_size=8000,
        model_prefix=str(work / name),
        byte_fallback=byte_fallback,
        input_sentence_size=sample,
    )
    start = time.perf_counter()
    with trainer_options(extra):
        (result,) = train_models(cfg)
    return Tokenizer.from_file(result["model"]), time.perf_counter() - start


def measure(tok: Tokenizer, lines: list[str]) -> dict[str, float]:
    """UNK share of pieces and of lines, pieces per line, exact round trips (percentages)."""
    import sentencepiece as spm

    from mtkit.data.tokenizer import UNK_ID

    normalizer = spm.SentencePieceNormalizer(rule_name="nmt_nfkc")  # mtkit's models' rule
    ids = tok.encode(lines)
    pieces = sum(map(len, ids))
    unk = sum(row.count(UNK_ID) for row in ids)
    back = tok.decode(ids)
    normal = [normalizer.normalize(line).replace("▁", " ").strip(" ") for line in lines]
    return {
        "unk_pieces": 100 * unk / max(pieces, 1),
        "unk_lines": 100 * sum(UNK_ID in row for row in ids) / len(lines),
        "pieces": pieces / len(lines),
        "exact": 100 * sum(a == b for a, b in zip(back, normal, strict=True)) / len(lines),
    }


COLUMNS = (
    ("unk_pieces", "UNK % of pieces", 2),
    ("unk_lines", "lines with UNK %", 1),
    ("pieces", "pieces per sentence", 2),
    ("exact", "round trip exact %", 1),
)


def table(results: dict[tuple[str, str, str], dict[str, float]], names: list[str]) -> str:
    """Markdown: a row per side and text, each cell the variants' figures (a / b / c)."""
    head = ["side", "text"] + [title for _, title, _ in COLUMNS]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for side, text in dict.fromkeys((s, t) for _, s, t in results):
        cells = [side, text]
        for key, _, digits in COLUMNS:
            cells.append(" / ".join(f"{results[n, side, text][key]:.{digits}f}" for n in names))
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--variants", default=",".join(VARIANTS), help="comma-separated, of: " + ", ".join(VARIANTS)
    )
    p.add_argument(
        "--sample", type=int, default=0, help="train on this many sampled sentences (0: all 58,000)"
    )
    p.add_argument("--quick", action="store_true", help="--sample 3000: a smoke test")
    p.add_argument("--seed", type=int, default=1, help="of the perturbations")
    args = p.parse_args(argv)
    names = args.variants.split(",")
    if unknown := [n for n in names if n not in VARIANTS]:
        p.error(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    sample = 3000 if args.quick else args.sample
    tests = {lang: read_lines(SHIPPED / f"test_2016_flickr.{lang}.gz") for lang in SIDES}
    results: dict[tuple[str, str, str], dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-tok-") as work:
        for name in names:
            tok, seconds = train(name, Path(work), sample)
            bytes_ = sum(tok.sp.IsByte(i) for i in range(len(tok)))
            print(
                f"{name}: {len(tok)} pieces ({bytes_} bytes), trained in {seconds:.1f} s",
                flush=True,
            )
            for lang, lines in tests.items():
                for text, change in perturbations(args.seed).items():
                    results[name, SIDES[lang], text] = measure(tok, [change(x) for x in lines])
    print(f"\ntest_2016_flickr, 1,000 lines a side; each cell: {' / '.join(names)}\n")
    print(table(results, names))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
