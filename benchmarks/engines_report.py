"""bench_engines.py's report: a table per thread count, each engine at its best thread setting,
the speed ratios between engines, and how many outputs two engines agree on."""

from __future__ import annotations

OURS = ("mtkit fp32", "mtkit bf16", "mtkit int8")
COMPILED = tuple(f"{ours} compiled" for ours in OURS)  # --compile's rows
PEERS = ("CTranslate2 float32", "CTranslate2 int8", "HF transformers")


def _table(rows: list[dict]) -> list[str]:
    lines = [
        f"{'engine':<24} {'threads':<8} {'sent/s':>8} {'tok/s':>8} {'BLEU':>6}  "
        f"{'seconds':>7}  passes"
    ]
    for r in rows:
        passes = " ".join(f"{s:.1f}" for s in r["passes"])
        lines.append(
            f"{r['engine']:<24} {r['setting']:<8} {r['sent_s']:8.1f} {r['tok_s']:8.0f} "
            f"{r['bleu']:6.1f}  {r['seconds']:7.1f}  {passes}"
        )
    return lines


def best_rates(rows: list[dict], threads: int | None = None) -> dict[str, dict]:
    """Each engine's fastest row (at ``threads`` total threads only, when given)."""
    best: dict[str, dict] = {}
    for r in rows:
        if threads is not None and r["threads"] != threads:
            continue
        if r["engine"] not in best or r["tok_s"] > best[r["engine"]]["tok_s"]:
            best[r["engine"]] = r
    return best


def _ratios(best: dict[str, dict], label: str) -> list[str]:
    lines = []
    rate = {name: r["tok_s"] for name, r in best.items()}
    pairs = [(a, b) for a in OURS + COMPILED for b in PEERS]
    pairs += [(f"{ours} compiled", ours) for ours in OURS]
    pairs += [("mtkit bf16", "mtkit fp32"), ("mtkit fp32", "mtkit fp32 torch matmul")]
    pairs += [(f"mtkit ct2 {q}", f"CTranslate2 {q}") for q in ("float32", "int8")]
    for ours, peer in pairs:
        if ours in rate and peer in rate:
            how = "" if label else f" ({best[ours]['setting']} vs {best[peer]['setting']})"
            lines.append(f"  {ours} / {peer}: {rate[ours] / rate[peer]:.2f}x{how}")
    return [f"ratios {label or 'at each engine best'} (target tok/s):", *lines]


def report(rows: list[dict], random_model: bool) -> str:
    """A table per thread count, each engine's best setting, and ratios at equal threads (the
    peer at its better split of those threads) and between bests."""
    lines: list[str] = []
    counts = sorted({r["threads"] for r in rows})
    for t in counts:
        title = f"-- {t} thread{'s' if t > 1 else ''}"
        lines += [title, *_table([r for r in rows if r["threads"] == t])]
    best = best_rates(rows)
    lines += ["-- each engine at its best thread setting", *_table(list(best.values()))]
    for t in counts:
        lines += _ratios(best_rates(rows, t), f"at {t} thread{'s' if t > 1 else ''}")
    lines += _ratios(best, "")
    bleu = {r["engine"]: r["bleu"] for r in rows}
    for other in ("mtkit bf16", "mtkit ct2 int8"):
        if other in bleu and "mtkit fp32" in bleu:
            lines.append(f"BLEU of {other} - mtkit fp32: {bleu[other] - bleu['mtkit fp32']:+.2f}")
    if random_model:
        lines.append("random model, outputs forced to equal length: BLEU is meaningless")
    return "\n".join(lines)


def agreement(rows: list[dict], a: str, b: str) -> str | None:
    """How many outputs of engines ``a`` and ``b`` are equal (first row of each)."""
    first = {}
    for r in rows:
        first.setdefault(r["engine"], r["hyps"])
    if a not in first or b not in first:
        return None
    same = sum(x == y for x, y in zip(first[a], first[b], strict=True))
    return f"{a} and {b}: {same}/{len(first[a])} outputs equal ({same / len(first[a]):.1%})"
