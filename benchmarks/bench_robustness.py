"""Robustness to the text people write (issue 50): a model on perturbed Multi30k, and the
augmentation ablation that decides the demo's default.

A checkpoint translates test_2016_flickr and val (beam 5, `mtkit translate`'s text path) as
they are and perturbed with fixed seeds, through mtkit.data.augment's modifiers, the ones
training uses: UPPERCASE, Title Case, lowercase, typos (15 % of the words of 3+ letters, at
least one a line), and run-ons (the sentences joined four to a line without their final
punctuation). Per set it reports case-insensitive BLEU (sacrebleu, ``lowercase=True``; the
clean row also cased), its difference to the clean row, and the share of outputs holding a run
of 10 or more identical characters that their source lacks. Run-ons are scored against the
four references joined, beside the same sentences translated one by one and joined the same
way (``sentence by sentence``), with the share of words the run-on outputs keep of those.

    .venv/bin/python benchmarks/bench_robustness.py work/demo/en-de/demo-run/checkpoint_last.pt
    .venv/bin/python benchmarks/bench_robustness.py CKPT --no-guard      # the model alone

By default as `mtkit translate` reads input (the decoding guard, sentence ends the input leaves
out: mtkit.text.sentence_ends, typos: mtkit.text.spelling), the run-on lines as paragraphs
(``--split-sentences``);
``--no-guard``: the model alone, every line one sentence as it is.

The ablation (``--ablation``) trains the `make demo` configuration (recipes/multi30k/demo.yaml,
fp32) for a fixed number of updates (``--updates``, default 600: about what its 480 s buy on a
2-core CPU, and the same weights whatever the machine's load) once per augmentation setting and
seed, then scores each model as above without the guard (the models, not the guard, compared).
Settings: ``none``, ``all`` (every modifier: case changes, typos and merges at 0.05, noise at
0.005), ``robust`` (`--augment default`: lowercase 0.1, typos, merge, noise: what the guard's
recasing leaves to the model), each modifier alone (``uppercase``, ...) and all but one
(``-uppercase``, ...). Rows go to
benchmarks/results/robustness-ablation.jsonl as they finish (a (setting, seed, updates) already
there is skipped; a run directory left by an interrupted sitting resumes, checkpoints every 100
updates).

    .venv/bin/python benchmarks/bench_robustness.py --ablation --only none,all --seeds 1,2
    .venv/bin/python benchmarks/bench_robustness.py --ablation --only uppercase,-uppercase
    .venv/bin/python benchmarks/bench_robustness.py --report
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import machine_lines  # noqa: E402
from multi30k import DEMO_CHECKPOINT, bleu, existing, read_text  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "recipes" / "multi30k"
WORK = ROOT / ".bench" / "robustness"
RESULTS = Path(__file__).resolve().parent / "results" / "robustness-ablation.jsonl"
SETS = ("test_2016_flickr", "val")
PERTURBATIONS = ("clean", "upper", "title", "lower", "typos", "run-on")
RUN = re.compile(r"(.)\1{9,}")  # 10 or more identical characters
JOIN = 4  # sentences per run-on line
# every modifier (the first `--augment default`); "robust" is today's default: what the guard's
# recasing leaves to the model (lower case, typos, run-ons, noise; no upper-cased pairs)
ALL = {
    "uppercase": 0.05,
    "titlecase": 0.05,
    "lowercase": 0.05,
    "typos": 0.05,
    "merge": 0.05,
    "noise": 0.005,
}


def longest_runs(text: str) -> dict[str, int]:
    """The longest run of each character repeated 10 times or more."""
    found: dict[str, int] = {}
    for match in RUN.finditer(text):
        found[match[1]] = max(found.get(match[1], 0), len(match[0]))
    return found


def degenerate(source: str, output: str) -> bool:
    """A run of 10+ identical characters in ``output`` longer than any of its source's."""
    mine = longest_runs(source)
    return any(n > mine.get(ch, 0) for ch, n in longest_runs(output).items())


def perturbed(kind: str, sources: list[str]) -> list[str]:
    from mtkit.data import augment as modify

    if kind == "upper":
        return [modify.uppercase(s) for s in sources]
    if kind == "title":
        return [modify.titlecase(s) for s in sources]
    if kind == "lower":
        return [modify.lowercase(s) for s in sources]
    if kind == "typos":
        return [modify.typos(s, random.Random(i), 0.15) for i, s in enumerate(sources)]
    return list(sources)


def groups(lines: list[str], strip: bool) -> list[str]:
    from mtkit.data import augment as modify

    return [modify.merge(lines[i : i + JOIN], strip) for i in range(0, len(lines), JOIN)]


def evaluate(ckpt: str, guard: bool, beam: int, limit: int) -> dict[str, Any]:
    """Every set and perturbation of one checkpoint: {set: {kind: figures}}. With ``guard``
    as `mtkit translate` reads input by default (the decoding guard, sentence ends the input
    leaves out, typos corrected), a run-on line as a paragraph (``--split-sentences``);
    without, the model alone, every line one sentence as it is."""
    from dataclasses import replace

    from mtkit.config import SearchConfig, TranslateConfig
    from mtkit.engines import load_engine
    from mtkit.pipeline.translate import translate_with

    search = SearchConfig(beam=beam, guard=guard)
    config = TranslateConfig(search=search, threads=0, sentence_ends=guard, spelling=guard)
    engine = load_engine([ckpt], config)
    paragraphs = engine
    if guard:
        paragraphs = load_engine([ckpt], replace(config, split_sentences=True))
        if not engine.sentence_style and not engine.source_words:
            recorded(engine, paragraphs)
    table: dict[str, Any] = {}
    for name in SETS:
        sources, refs = read_text(name, "en"), read_text(name, "de")
        if limit:
            sources, refs = sources[:limit], refs[:limit]
        rows: dict[str, Any] = {}
        clean = None
        for kind in PERTURBATIONS:
            start = time.perf_counter()
            if kind == "run-on":
                inputs, kind_refs = groups(sources, strip=True), groups(refs, strip=False)
            else:
                inputs, kind_refs = perturbed(kind, sources), refs
            outputs = translate_with(paragraphs if kind == "run-on" else engine, inputs)
            row = {
                "bleu": bleu(outputs, kind_refs, lowercase=True),
                "degenerate": sum(map(degenerate, inputs, outputs)) / len(outputs),
                "seconds": time.perf_counter() - start,
            }
            if kind == "clean":
                clean = outputs
                row["cased_bleu"] = bleu(outputs, refs, lowercase=False)
            else:
                row["delta"] = row["bleu"] - rows["clean"]["bleu"]
            if kind == "run-on":
                one_by_one = groups(clean, strip=False)
                row["sentence_bleu"] = bleu(one_by_one, kind_refs, lowercase=True)
                row["delta"] = row["bleu"] - row["sentence_bleu"]
                words = sum(len(o.split()) for o in one_by_one)
                row["words_kept"] = sum(len(o.split()) for o in outputs) / max(words, 1)
            rows[kind] = row
            print(f"  {name} {kind}: BLEU {row['bleu']:.1f}", file=sys.stderr, flush=True)
        table[name] = rows
    return table


def recorded(*engines: Any) -> None:
    """Engines of a checkpoint trained before checkpoints recorded their sources' sentence
    style and words: those of the data it was trained on (the ablation's, prepared here), as
    training records them now (a function of the data alone: the weights would be the same)."""
    from mtkit.data.binarized import ParallelData
    from mtkit.data.sentence_style import source_records

    data = WORK / "data" / "en-de" / "data"
    if not (data / "manifest.json").is_file():
        print(f"no sentence style recorded, and no {data} to read it from", file=sys.stderr)
        return
    style, words = source_records(ParallelData(data, "train"), engines[0].src_tokenizer)
    print(f"no sentence style or words recorded: the training data's, {data}", file=sys.stderr)
    for engine in engines:
        engine.sentence_style, engine.source_words = style, words


def print_table(table: dict[str, Any]) -> None:
    print("| set | input | BLEU (uncased) | vs clean | degenerate | words kept |")
    print("|---|---|--:|--:|--:|--:|")
    for name, rows in table.items():
        for kind, row in rows.items():
            delta = f"{row['delta']:+.1f}" if "delta" in row else ""
            if kind == "run-on":
                delta += f" (vs {row['sentence_bleu']:.1f} one by one)"
            cased = f" (cased {row['cased_bleu']:.1f})" if "cased_bleu" in row else ""
            kept = f"{100 * row['words_kept']:.1f} %" if "words_kept" in row else ""
            print(
                f"| {name} | {kind} | {row['bleu']:.1f}{cased} | {delta} | "
                f"{100 * row['degenerate']:.1f} % | {kept} |"
            )


# --- the ablation -------------------------------------------------------------------------------


def settings() -> dict[str, str]:
    """Ablation setting -> `--augment` spec."""
    found = {"none": "none", "all": spec(ALL), "robust": "default"}
    for name, p in ALL.items():
        found[name] = f"{name}={p}"
        found[f"-{name}"] = spec({k: v for k, v in ALL.items() if k != name})
    return found


def spec(rates: dict[str, float]) -> str:
    return ",".join(f"{k}={v}" for k, v in rates.items())


def mtkit(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "mtkit", *args], check=True)


def prepare_data() -> Path:
    """The `make demo` data (the recipe's raw, spm and prepare stages), made once."""
    work = WORK / "data"
    make = [
        "make",
        "-s",
        "-C",
        str(RECIPE),
        "prepare",
        f"WORK={work}",
        f"MTKIT={sys.executable} -m mtkit",
    ]
    subprocess.run(make, check=True)
    return work / "en-de" / "data"


def done_rows() -> set[tuple[str, int, int]]:
    if not RESULTS.is_file():
        return set()
    rows = [json.loads(line) for line in RESULTS.read_text().splitlines() if line.strip()]
    return {(r["setting"], r["seed"], r["updates"]) for r in rows}


def ablation(args: argparse.Namespace) -> None:
    specs = settings()
    names = args.only.split(",") if args.only else list(specs)
    unknown = [n for n in names if n not in specs]
    if unknown:
        raise SystemExit(f"--only: unknown {unknown} (known: {', '.join(specs)})")
    data = prepare_data()
    finished = done_rows()
    for seed in [int(s) for s in args.seeds.split(",")]:
        for name in names:
            if (name, seed, args.updates) in finished:
                continue
            run = WORK / "runs" / f"{name}-seed{seed}-{args.updates}"
            start = time.monotonic()
            mtkit(
                "train",
                "--config",
                str(RECIPE / "demo.yaml"),
                "--data",
                str(data),
                "--run-dir",
                str(run),
                "--augment",
                specs[name],
                "--seed",
                str(seed),
                "--max-time",
                "0",
                "--max-updates",
                str(args.updates),
                "--save-every",
                "100",
                "--precision",
                "fp32",
                "-q",
            )
            trained = time.monotonic() - start
            table = evaluate(str(run / "checkpoint_last.pt"), False, args.beam, args.limit)
            row = {
                "setting": name,
                "augment": specs[name],
                "seed": seed,
                "updates": args.updates,
                "beam": args.beam,
                "limit": args.limit,
                "train_seconds": trained,
                "sets": table,
                "machine": machine_lines()[0],
                "time": time.strftime("%Y-%m-%d %H:%M:%S"),
            }
            RESULTS.parent.mkdir(parents=True, exist_ok=True)
            with RESULTS.open("a", encoding="utf-8") as out:
                out.write(json.dumps(row) + "\n")
            print(
                f"{name} seed {seed}: test clean {table[SETS[0]]['clean']['bleu']:.1f}", flush=True
            )


def report() -> None:
    """Per setting (mean over seeds): clean BLEU on each set and every perturbation's."""
    rows = [json.loads(line) for line in RESULTS.read_text().splitlines() if line.strip()]
    by: dict[tuple[str, int], list[dict]] = {}
    for r in rows:
        by.setdefault((r["setting"], r["updates"]), []).append(r)
    kinds = PERTURBATIONS[1:]
    head = ["setting", "updates", "seeds", "test clean", "val clean"]
    head += [f"test {k}" for k in kinds] + ["run-on words"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * 3 + "--:|" * (len(head) - 3))

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    for (name, updates), found in sorted(by.items(), key=lambda x: (x[0][1], x[0][0])):
        test = [r["sets"][SETS[0]] for r in found]
        val = [r["sets"][SETS[1]] for r in found]
        cells = [name, str(updates), ",".join(str(r["seed"]) for r in found)]
        cells += [
            f"{mean([t['clean']['bleu'] for t in test]):.1f}",
            f"{mean([v['clean']['bleu'] for v in val]):.1f}",
        ]
        cells += [f"{mean([t[k]['bleu'] for t in test]):.1f}" for k in kinds]
        cells.append(f"{100 * mean([t['run-on']['words_kept'] for t in test]):.1f} %")
        print("| " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "checkpoint",
        nargs="?",
        default=str(DEMO_CHECKPOINT),
        help="a checkpoint to score (default: the `make demo` model)",
    )
    parser.add_argument("--no-guard", action="store_true", help="the model without the guard")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--limit", type=int, default=0, help="first N lines of each set")
    parser.add_argument("--json", help="write the table as JSON here too")
    parser.add_argument("--ablation", action="store_true", help="train and score the settings")
    parser.add_argument("--only", help="ablation settings, comma-separated (default: all)")
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--updates", type=int, default=600)
    parser.add_argument("--report", action="store_true", help="the ablation table so far")
    args = parser.parse_args()
    print("\n".join(machine_lines()), flush=True)
    if args.report:
        report()
    elif args.ablation:
        ablation(args)
    else:
        ckpt = existing(args.checkpoint, "make demo")
        table = evaluate(ckpt, not args.no_guard, args.beam, args.limit)
        print_table(table)
        if args.json:
            Path(args.json).write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
