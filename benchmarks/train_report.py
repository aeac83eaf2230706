"""bench_train.py's report: the table of each run's window, the ratios to JoeyNMT and to mtkit
fp32, and the notes defining every column."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from train_runs import Result

HEADER = (
    "round",
    "tool",
    "updates",
    "tgt tok/update",
    "tgt padding",
    "tgt tok/s",
    "tool's own",
    "vs JoeyNMT",
    "MFU",
)


def table(rows: list[tuple[str, ...]]) -> str:
    """Columns padded to width: the first two left-aligned, numbers right-aligned."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        pairs = enumerate(zip(row, widths, strict=True))
        cells = [c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in pairs]
        lines.append("  ".join(cells).rstrip())
    return "\n".join([lines[0], "-" * max(map(len, lines)), *lines[1:]])


def report(results: list[Result], flops_per_token: float, peak: float) -> str:
    joey = {r.round: r.tok_s for r in results if r.tool.startswith("JoeyNMT")}
    rows = [HEADER]
    for r in results:
        ratio = f"{r.tok_s / joey[r.round]:.2f}x" if r.round in joey else "-"
        own = f"{r.own_tok_s:,.0f}" if r.own_tok_s else "-"
        mfu = r.tok_s * flops_per_token / peak
        per_update = f"{r.tgt_tokens / len(r.tokens):,.0f}"
        padding = f"{1 - r.tgt_tokens / r.padded:.0%}"
        rows.append(
            (
                str(r.round),
                r.tool,
                str(len(r.tokens)),
                per_update,
                padding,
                f"{r.tok_s:,.0f}",
                own,
                ratio,
                f"{mfu:.1%}",
            )
        )
    mtkit = [r.tok_s for r in results if r.tool == "mtkit"]
    if joey and mtkit:
        total = sum(mtkit) / sum(joey.values())
        rows.append(("all", "mtkit / JoeyNMT", "", "", "", "", "", f"{total:.2f}x", ""))
    lines = [table(rows)]
    fp32 = {r.round: r.tok_s for r in results if r.tool == "mtkit"}
    for r in results:
        if r.tool == "mtkit bf16" and r.round in fp32:
            lines.append(f"round {r.round}: mtkit bf16 / mtkit fp32 {r.tok_s / fp32[r.round]:.2f}x")
    return "\n".join(lines)


NOTES = """\
tgt tok/s: non-padding target tokens (EOS included, BOS not) of the measured updates / wall
  seconds from the start of the first measured update to the start of the one after the last,
  the same definition for both tools. JoeyNMT: start times and batch.ntokens from a probe around
  TrainManager._train_step. mtkit: the window's wall time from the `elapsed` field of its
  metrics.jsonl, its tokens counted by replaying its (deterministic) batch order.
tool's own: what each tool logs itself ("Tokens per Sec" in JoeyNMT's train.log,
  tgt_tokens_per_s in mtkit's metrics.jsonl; both count non-padding target tokens incl. EOS),
  per logging interval, combined time-weighted over the window.
MFU: tgt tok/s x model FLOPs per target token / fp32 matmul peak measured in this run.
batch size: both tools fill batches to {max_tokens} tokens of max(src+1, tgt+1) x sentences
  (JoeyNMT until the first batch at or above it, in random order; mtkit up to it, in length
  buckets), hence the different real tokens per update."""
