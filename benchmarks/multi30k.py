"""The Multi30k files the benchmarks read, and a random model with a Multi30k vocabulary.

Stdlib imports only at module level: bench_engines.py's peer processes (in another virtual
environment, without mtkit) import this module too.
"""

from __future__ import annotations

import gzip
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "recipes" / "multi30k" / "data"  # gzipped, in the repository
SHARED = Path("/work/shared/data/multi30k")
DATA_DIRS = (SHARED, SHIPPED)
# what `make demo` and `make -C recipes/multi30k student` leave, the benchmarks' default models
DEMO_CHECKPOINT = ROOT / "work" / "demo" / "en-de" / "demo-run" / "checkpoint_last.pt"
DEMO_DATA = ROOT / "work" / "demo" / "en-de" / "data"
RECIPE_STUDENT = ROOT / "recipes" / "multi30k" / "work" / "en-de" / "student" / "checkpoint_avg.pt"


def existing(path: str | Path, made_by: str) -> str:
    """``path`` when it exists, else exit naming what makes it."""
    if not Path(path).exists():
        raise SystemExit(f"{path}: not found (run `{made_by}` first, or give another)")
    return str(path)


def find(stem: str, lang: str, dirs: tuple[Path, ...] = DATA_DIRS) -> Path | None:
    """``stem.lang`` or ``stem.lang.gz`` in the first directory that has either, else None."""
    for directory in dirs:
        for path in (directory / f"{stem}.{lang}", directory / f"{stem}.{lang}.gz"):
            if path.is_file():
                return path
    return None


def read_lines(path: Path) -> list[str]:
    """The file's lines without their newline (gzip by the .gz suffix)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle]


def read_text(stem: str, lang: str) -> list[str]:
    """Lines of Multi30k ``stem`` (train, val, test_2016_flickr) in ``lang``; exits if absent."""
    path = find(stem, lang)
    if path is None:
        raise SystemExit(f"Multi30k {stem}.{lang} not found in {', '.join(map(str, DATA_DIRS))}")
    return read_lines(path)


def bleu(hyps: list[str], refs: list[str], lowercase: bool = False) -> float:
    """sacrebleu's corpus BLEU of ``hyps`` against one reference each (case-insensitive with
    ``lowercase``), every benchmark's one scorer."""
    import sacrebleu

    return sacrebleu.corpus_bleu(hyps, [refs], lowercase=lowercase).score


def random_checkpoint(work: Path) -> Path:
    """A random transformer-small with a joint 8k spm trained on Multi30k train, cached in
    ``work``: raw decoding speed where no trained model is given."""
    import torch

    from mtkit.checkpoint import Checkpoint
    from mtkit.data.tokenizer import Tokenizer, train_spm
    from mtkit.languages import Languages
    from mtkit.model.transformer import build_model, resolve_model_config

    path = work / "random-small.pt"
    if path.is_file():
        return path
    work.mkdir(parents=True, exist_ok=True)
    print("training a joint 8k spm on Multi30k train for the random model ...", flush=True)
    spm = train_spm(read_text("train", "en") + read_text("train", "de"), vocab_size=8000)
    n = len(Tokenizer(spm))
    cfg = resolve_model_config("transformer-small", n, n, {"share_all_embeddings": True})
    torch.manual_seed(0)
    model = build_model(cfg)
    tok = Tokenizer(spm)
    Checkpoint.of(model, tok, tok, languages=Languages(("en",), ("de",))).save(path)
    return path
