"""bench_train.py's report: the table of each run's window, the ratios to the peers (JoeyNMT,
Eole fp32) and of each variant row to its own fp32 row, and the notes defining every column."""

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
    "vs Eole",
    "MFU",
)
PEERS = ("JoeyNMT", "Eole")  # a ratio column each, against the peer's fp32 row of the round


def table(rows: list[tuple[str, ...]]) -> str:
    """Columns padded to width: the first two left-aligned, numbers right-aligned."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        pairs = enumerate(zip(row, widths, strict=True))
        cells = [c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in pairs]
        lines.append("  ".join(cells).rstrip())
    return "\n".join([lines[0], "-" * max(map(len, lines)), *lines[1:]])


def base_tool(tool: str) -> str:
    """The fp32 row a variant row is compared with: "mtkit bf16" -> "mtkit", "Eole 0.6.4 bf16"
    -> "Eole 0.6.4", "mtkit compiled" -> "mtkit"; a plain tool is its own base."""
    return tool.removesuffix(" compiled").removesuffix(" bf16")


def by_round(results: list[Result], tool: str) -> dict[int, float]:
    return {r.round: r.tok_s for r in results if r.tool == tool}


def report(results: list[Result], flops_per_token: float, peak: float) -> str:
    names = {r.tool for r in results}
    peers = {
        peer: by_round(results, tool)
        for peer in PEERS
        for tool in names
        if tool.startswith(peer) and base_tool(tool) == tool
    }
    rows = [HEADER]
    for r in results:
        ratios = [
            f"{r.tok_s / peers[p][r.round]:.2f}x" if r.round in peers.get(p, {}) else "-"
            for p in PEERS
        ]
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
                *ratios,
                f"{mfu:.1%}",
            )
        )
    mtkit = by_round(results, "mtkit")
    for i, peer in enumerate(PEERS):
        rounds = set(mtkit) & set(peers.get(peer, {}))
        if rounds:
            total = sum(mtkit[k] for k in rounds) / sum(peers[peer][k] for k in rounds)
            ratios = ["", ""]
            ratios[i] = f"{total:.2f}x"
            rows.append(("all", f"mtkit / {peer}", "", "", "", "", "", *ratios, ""))
    lines = [table(rows)]
    for r in results:
        fp32 = by_round(results, base_tool(r.tool))
        if base_tool(r.tool) != r.tool and r.round in fp32:
            ratio = r.tok_s / fp32[r.round]
            lines.append(f"round {r.round}: {r.tool} / {base_tool(r.tool)} fp32 {ratio:.2f}x")
    return "\n".join(lines)


NOTES = """\
tgt tok/s: non-padding target tokens (EOS included, BOS not) of the measured updates / wall
  seconds from the start of the first measured update to the start of the one after the last,
  the same definition for all tools. JoeyNMT: start times and batch.ntokens from a probe around
  TrainManager._train_step. Eole: start times and the non-padding positions of batch["tgt"][:,
  1:] from a probe around Trainer._train_step. mtkit: the window's wall time from the
  `elapsed` field of its metrics.jsonl, its tokens counted by replaying its (deterministic)
  batch order.
tool's own: what each tool logs itself ("Tokens per Sec" in JoeyNMT's train.log, the target
  "tok/s" of Eole's "Step" lines, tgt_tokens_per_s in mtkit's metrics.jsonl; all count
  non-padding target tokens incl. EOS), per logging interval, combined time-weighted over the
  window.
vs JoeyNMT, vs Eole: tgt tok/s over the peer's fp32 row of the same round; "all": the mtkit
  fp32 rows' tokens/s summed over the peer's, over the rounds both ran.
MFU: tgt tok/s x model FLOPs per target token / fp32 matmul peak measured in this run.
batch size: the tools fill batches to {max_tokens} tokens of max(src+1, tgt+1) x sentences
  (JoeyNMT until the first batch at or above it, in random order; mtkit up to it, in length
  buckets); Eole up to it, of max(src, BOS+tgt+EOS) x sentences (its source has no EOS, its
  target tensor holds BOS, so a target-bound batch holds a few % fewer sentences than mtkit's
  at the same setting; --eole-max-tokens sets it apart), sorted in buckets of 262,144 pairs
  (Eole's default, refilled from the corpus ~9 times over), hence nearly no padding. Hence
  the different real tokens per update."""
