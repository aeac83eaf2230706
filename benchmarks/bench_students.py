"""Teacher and students side by side: speed, size and quality in one run (issue 30's table).

The models `make -C recipes/multi30k student` leaves (the teacher, its averaged checkpoint; the
student trained on the teacher's beam-5 translations of the training corpus) translate Multi30k
test_2016_flickr (en, 1,000 lines) on CPU, each row at every ``--threads`` count:

- teacher, beam 5, fp32 (the reference every speed is divided by), int8, and greedy fp32;
- student, greedy: native fp32, bf16 and int8, each without and with a lexical shortlist
  (`mtkit shortlist build` on the student's training data, ``--shortlist-size``);
- student on CTranslate2 (`mtkit export --format ctranslate2`, float32 and int8, without and
  with the shortlist as its vocabulary map), through `mtkit translate --engine ctranslate2`'s
  engine, so tokenization and batching are mtkit's;
- speculative decoding: the teacher's greedy search (or an ensemble of the teacher's last
  checkpoints, ``--ensemble``) with the student proposing ``--draft-tokens`` tokens, batched,
  and one sentence per call (the interactive case) beside the teacher's greedy one per call,
  on the first ``--single-limit`` lines; one sentence per call also with the draft in int8
  guessing within the shortlist (``--draft-quantize int8 --draft-shortlist``, and
  ``--draft-confidence``).

Batch size (``--max-tokens``, source tokens) changes engines' speeds unequally: with
``--also-max-tokens 1024,512`` the teacher's beam-5 fp32 row and the fastest student row
(CTranslate2 int8 with the shortlist) run again at those sizes (rows named "... @1024"), so
each can be taken at its own best batch size as well as at the table's.

Columns: parameters, the size of the weights each row loads (a checkpoint's fp32 tensors, or
the CTranslate2 export's model.bin; native int8 quantizes the fp32 checkpoint when it loads),
sentences/s and target tokens/s (EOS included), BLEU and chrF (sacreBLEU), each speed as a
ratio to the teacher's beam-5 fp32 row at the same thread count, and BLEU on the validation
set (1,014 lines; decoded once, at the last thread count).

Rows run in ``--rounds`` interleaved rounds (every row once per round, in order); the figures
are medians over rounds, so a shared machine disturbs them less. Engines are loaded once.

    .venv/bin/python benchmarks/bench_students.py [--teacher CKPT] [--student CKPT] \\
        [--threads 1,2] [--rounds 2] [--json benchmarks/results/students.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import sacrebleu
import torch
from machine import machine_lines
from multi30k import RECIPE_STUDENT, ROOT, existing, read_text

from mtkit.checkpoint.inference import load_for_inference
from mtkit.config import SearchConfig, TranslateConfig
from mtkit.data.binarized import ParallelData, load_tokenizers
from mtkit.data.lexicon import learn_shortlist
from mtkit.engines import load_engine
from mtkit.engines.base import Engine
from mtkit.export.ct2 import export_ct2

RECIPE_WORK = ROOT / "recipes" / "multi30k" / "work" / "en-de"
TEACHER = RECIPE_WORK / "teacher" / "checkpoint_avg.pt"
STUDENT_DATA = RECIPE_WORK / "student-data"
WORK = ROOT / ".bench" / "students"
MADE_BY = "make -C recipes/multi30k student"
INT8 = {"quantize": "int8"}


@dataclass
class Row:
    name: str
    models: list[str]
    config: TranslateConfig
    files: list[Path]  # what the row loads: their size on disk
    params: int
    single: bool = False  # one sentence per call
    engines: dict[int, Engine] = field(default_factory=dict)  # by thread count
    seconds: dict[int, list[float]] = field(default_factory=dict)
    tokens: int = 0
    outputs: list[str] = field(default_factory=list)
    valid: list[str] = field(default_factory=list)


def parameters(checkpoint: str | Path) -> int:
    return sum(p.numel() for p in load_for_inference(checkpoint).model.parameters())


def size_of(paths: list[Path]) -> int:
    """Bytes of the weights: a checkpoint's model tensors as stored (not its optimizer state,
    which a numbered checkpoint also holds), or an export's model.bin on disk."""
    total = 0
    for path in paths:
        if path.is_dir():
            total += (path / "model.bin").stat().st_size
        else:
            state = load_for_inference(path).model.state_dict()
            unique = {t.data_ptr(): t.nbytes for t in state.values()}  # tied weights once
            total += sum(unique.values())
    return total


def build_shortlist(data: Path, top_k: int, frequent: int) -> Path:
    """The student's shortlist (its training split, IBM model 1), written once per size and
    vocabulary."""
    src, tgt = load_tokenizers(data)
    path = WORK / f"shortlist-{top_k}-{frequent}-{src.sha256[:12]}.json.gz"
    if not path.is_file():
        WORK.mkdir(parents=True, exist_ok=True)
        shortlist = learn_shortlist(ParallelData(data, "train"), src, tgt, top_k, frequent)
        with path.open("wb") as handle:
            shortlist.write(handle)
    return path


def exports(student: str, shortlist: Path) -> dict[str, Path]:
    """The student exported to CTranslate2: float32 and int8, without and with the vmap."""
    out = {}
    for quant in ("float32", "int8"):
        for vmap in (False, True):
            name = f"ct2-{quant}" + ("-vmap" if vmap else "")
            out[name] = export_ct2(
                student, WORK / name, quant, force=True, shortlist=shortlist if vmap else ""
            )
    return out


def rows_for(args: argparse.Namespace) -> list[Row]:
    base = TranslateConfig(search=SearchConfig(beam=1), device="cpu", max_tokens=args.max_tokens)
    beam5 = replace(base, search=SearchConfig(beam=5))
    teacher, student = [args.teacher], [args.student]
    t_params, s_params = parameters(args.teacher), parameters(args.student)
    t_file, s_file = [Path(args.teacher)], [Path(args.student)]
    shortlist = build_shortlist(args.data, *map(int, args.shortlist_size.split("/")))
    rows = [
        Row("teacher beam 5 fp32", teacher, beam5, t_file, t_params),
        Row("teacher beam 5 int8", teacher, replace(beam5, quantize="int8"), t_file, t_params),
        Row("teacher greedy fp32", teacher, base, t_file, t_params),
    ]
    for sl in ("", str(shortlist)):
        tail = " +shortlist" if sl else ""
        for name, extra in (("fp32", {}), ("bf16", {"dtype": "bf16"}), ("int8", INT8)):
            if name in args.skip:
                continue
            config = replace(base, shortlist=sl, **extra)
            rows.append(Row(f"student greedy {name}{tail}", student, config, s_file, s_params))
    if "compiled" not in args.skip:  # --compile (no shortlist: its output layer is not compiled)
        for name, extra in (("bf16", {"dtype": "bf16"}), ("int8", INT8)):
            if name not in args.skip:
                config = replace(base, compile="on", **extra)
                rows.append(
                    Row(f"student greedy {name} --compile", student, config, s_file, s_params)
                )
    if "ct2" not in args.skip:
        for name, path in exports(args.student, shortlist).items():
            config = replace(base, engine="ctranslate2")
            label = name.replace("ct2-", "student greedy ct2 ").replace("-vmap", " +shortlist")
            rows.append(Row(label, [str(path)], config, [path], s_params))
    rows += batch_rows(rows, args.also_max_tokens)
    if "draft" not in args.skip:
        ensemble = teacher_ensemble(args)
        draft = replace(base, draft=args.student, draft_tokens=args.draft_tokens)
        label = f"teacher x{len(ensemble)}" if len(ensemble) > 1 else "teacher"
        params = sum(parameters(m) for m in ensemble)
        files = [Path(m) for m in ensemble]
        rows.append(
            Row(
                f"{label} greedy + student draft k={args.draft_tokens}",
                ensemble,
                draft,
                files,
                params,
            )
        )
        if len(ensemble) > 1:
            rows.append(Row(f"{label} greedy fp32", ensemble, base, files, params))
        rows.append(
            Row(
                f"{label} greedy fp32, one sentence a call",
                ensemble,
                base,
                files,
                params,
                single=True,
            )
        )
        rows.append(
            Row(
                f"{label} greedy + draft, one sentence a call",
                ensemble,
                draft,
                files,
                params,
                single=True,
            )
        )
        fast = replace(
            draft,
            draft_quantize="int8",
            draft_shortlist=str(shortlist),
            draft_confidence=args.draft_confidence,
        )
        gate = f" c={args.draft_confidence:g}" if args.draft_confidence else ""
        rows.append(
            Row(
                f"{label} greedy + draft int8 +shortlist{gate}, one sentence a call",
                ensemble,
                fast,
                files,
                params,
                single=True,
            )
        )
    return rows


def batch_rows(rows: list[Row], sizes: str) -> list[Row]:
    """The reference row and the fastest student configuration (CTranslate2 int8 with the
    shortlist, else the last student row) again at each batch size of ``sizes`` (source tokens,
    comma-separated): each at its own best batch size as well as at the table's."""
    if not sizes:
        return []
    best = next((r for r in rows if r.name == "student greedy ct2 int8 +shortlist"), rows[-1])
    out = []
    for size in (int(x) for x in sizes.split(",")):
        for row in (rows[0], best):
            config = replace(row.config, max_tokens=size)
            out.append(
                replace(
                    row,
                    name=f"{row.name} @{size}",
                    config=config,
                    engines={},
                    seconds={},
                    outputs=[],
                    valid=[],
                )
            )
    return out


def teacher_ensemble(args: argparse.Namespace) -> list[str]:
    """The teacher, or its run's last ``--ensemble`` numbered checkpoints."""
    if args.ensemble <= 1:
        return [args.teacher]
    numbered = sorted(
        Path(args.teacher).parent.glob("checkpoint_[0-9]*.pt"),
        key=lambda p: int(p.stem.split("_")[1]),
    )
    if len(numbered) < args.ensemble:
        raise SystemExit(
            f"--ensemble {args.ensemble}: {Path(args.teacher).parent} has "
            f"{len(numbered)} numbered checkpoints"
        )
    return [str(p) for p in numbered[-args.ensemble :]]


def run(row: Row, threads: int, lines: list[str]) -> None:
    torch.set_num_threads(threads)
    engine = row.engines[threads]
    start = time.perf_counter()
    if row.single:
        found = [hyps for line in lines for hyps in engine.translate([line])]
    else:
        found = engine.translate(lines)
    row.seconds.setdefault(threads, []).append(time.perf_counter() - start)
    row.outputs = [hyps[0].text if hyps else "" for hyps in found]
    row.tokens = sum(hyps[0].tokens + 1 for hyps in found if hyps)
    took = row.seconds[threads][-1]
    print(f"  {row.name:<50} {threads} thr {len(lines) / took:8.1f} sent/s", flush=True)


def score(hyps: list[str], refs: list[str]) -> tuple[float, float]:
    bleu = sacrebleu.corpus_bleu(hyps, [refs]).score
    return bleu, sacrebleu.corpus_chrf(hyps, [refs]).score


def table(
    rows: list[Row],
    threads: list[int],
    lines: dict[bool, list[str]],
    refs: dict[bool, list[str]],
    valid_refs: list[str],
) -> list[dict]:
    """The rows as dicts, and the table printed (speed ratios to row 0 at equal threads; the
    one-sentence rows to the first one-sentence row)."""
    out = []
    for row in rows:
        bleu, chrf = score(row.outputs, refs[row.single])
        item = {
            "row": row.name,
            "params": row.params,
            "bytes": size_of(row.files),
            "bleu": bleu,
            "chrf": chrf,
            "lines": len(lines[row.single]),
            "valid_bleu": score(row.valid, valid_refs)[0] if row.valid else None,
        }
        for t in threads:
            seconds = statistics.median(row.seconds[t])
            ref = next(r for r in rows if r.single == row.single)
            item[f"sent_s_{t}"] = len(lines[row.single]) / seconds
            item[f"tok_s_{t}"] = row.tokens / seconds
            item[f"ratio_{t}"] = statistics.median(
                a / b for a, b in zip(ref.seconds[t], row.seconds[t], strict=True)
            )
            item[f"seconds_{t}"] = row.seconds[t]
        out.append(item)
    head = f"{'row':<50} {'params':>6} {'MB':>5}"
    for t in threads:
        head += f" {f'sent/s {t}t':>10} {f'tok/s {t}t':>9} {'x':>6}"
    print(f"\n{head} {'BLEU':>5} {'chrF':>5} {'val':>5}")
    for item in out:
        line = f"{item['row']:<50} {item['params'] / 1e6:5.2f}M {item['bytes'] / 1e6:5.1f}"
        for t in threads:
            speed = item[f"sent_s_{t}"], item[f"tok_s_{t}"], item[f"ratio_{t}"]
            line += " {:10.1f} {:9.0f} {:6.2f}".format(*speed)
        valid = f"{item['valid_bleu']:5.1f}" if item["valid_bleu"] is not None else "    -"
        print(f"{line} {item['bleu']:5.1f} {item['chrf']:5.1f} {valid}")
    return out


def markdown(results: dict) -> str:
    threads = results["threads"]
    head = (
        "| row | params | MB | "
        + " | ".join(f"sent/s ({t} thr) | tok/s ({t} thr) | x teacher ({t} thr)" for t in threads)
        + " | BLEU | chrF | val BLEU |"
    )
    lines = [head, "|" + "---|" + "--:|" * (head.count("|") - 2)]
    for item in results["rows"]:
        cells = [item["row"], f"{item['params'] / 1e6:.2f} M", f"{item['bytes'] / 1e6:.1f}"]
        for t in threads:
            cells += [
                f"{item[f'sent_s_{t}']:,.1f}",
                f"{item[f'tok_s_{t}']:,.0f}",
                f"{item[f'ratio_{t}']:.2f}x",
            ]
        valid = item["valid_bleu"]
        cells += [
            f"{item['bleu']:.1f}",
            f"{item['chrf']:.1f}",
            f"{valid:.1f}" if valid is not None else "-",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> None:
    if args.markdown:
        results = json.loads(Path(args.markdown).read_text(encoding="utf-8"))
        print("\n".join(results["machine"]) + "\n\n" + markdown(results))
        return
    machine = machine_lines()
    print("\n".join(machine), flush=True)
    threads = [int(t) for t in args.threads.split(",")]
    test = read_text("test_2016_flickr", "en")[: args.limit]
    lines = {False: test, True: test[: args.single_limit]}
    refs_all = read_text("test_2016_flickr", "de")
    refs = {single: refs_all[: len(lines[single])] for single in (False, True)}
    valid, valid_refs = read_text("val", "en"), read_text("val", "de")
    rows = rows_for(args)
    for row in rows:
        for t in threads:
            row.engines[t] = load_engine(row.models, replace(row.config, threads=t))
            torch.set_num_threads(t)
            row.engines[t].translate(test[:16])  # warm-up
    print(
        f"{len(test)} lines ({args.single_limit} one a call), {args.rounds} interleaved "
        f"rounds (medians)",
        flush=True,
    )
    for r in range(args.rounds):
        print(f"round {r + 1} of {args.rounds}", flush=True)
        for t in threads:
            for row in rows:
                run(row, t, lines[row.single])
    for row in rows:
        if not row.single:
            found = row.engines[threads[-1]].translate(valid)
            row.valid = [hyps[0].text if hyps else "" for hyps in found]
    results = {
        "machine": machine,
        "threads": threads,
        "rounds": args.rounds,
        "teacher": args.teacher,
        "student": args.student,
        "rows": table(rows, threads, lines, refs, valid_refs),
    }
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        print(f"\nwritten to {args.json}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teacher", default=str(TEACHER), help="the teacher checkpoint")
    parser.add_argument("--student", default=str(RECIPE_STUDENT), help="the student checkpoint")
    parser.add_argument(
        "--data", type=Path, default=STUDENT_DATA, help="the student's prepared data: its shortlist"
    )
    parser.add_argument("--shortlist-size", default="50/100", help="TOP_K/FREQUENT")
    parser.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds")
    parser.add_argument("--limit", type=int, default=1000, help="lines of the test set")
    parser.add_argument(
        "--single-limit", type=int, default=200, help="lines translated one per call"
    )
    parser.add_argument("--max-tokens", type=int, default=4096, help="source tokens per batch")
    parser.add_argument(
        "--also-max-tokens",
        default="",
        help="the teacher's beam-5 fp32 row and the fastest student row again "
        "at these batch sizes (comma-separated), rows named '... @N'",
    )
    parser.add_argument("--draft-tokens", type=int, default=4, help="speculative: k")
    parser.add_argument(
        "--draft-confidence",
        type=float,
        default=0.0,
        help="the int8 +shortlist draft's confidence threshold",
    )
    parser.add_argument(
        "--ensemble",
        type=int,
        default=1,
        help="speculative rows: the teacher run's last N checkpoints",
    )
    parser.add_argument("--skip", default="", help="rows to leave out: bf16, ct2, draft, compiled")
    parser.add_argument("--json", default="", help="also write the results here")
    parser.add_argument("--markdown", default="", help="print a --json file as a table")
    args = parser.parse_args()
    if not args.markdown:
        existing(args.teacher, MADE_BY)
        existing(args.student, MADE_BY)
        existing(args.data, MADE_BY)
    return args


if __name__ == "__main__":
    main(parse_args())
