"""The variant ablation's tables (bench_variants.py --report and --markdown): one line per
(variant, seed) with ratios to the same seed's baseline, and the README's one row per variant
with the mean and range over seeds."""

from __future__ import annotations

from typing import Any

from variants import BASELINE, TRAIN_SETTINGS, VARIANTS, value_text


def _ratio(row: dict[str, Any], base: dict[str, Any], key: str) -> float:
    return (row[key] or 0) / base[key] if base.get(key) else float("nan")


def report(rows: dict[tuple[str, int], dict[str, Any]], baseline: str = BASELINE) -> str:
    """One line per (variant, seed): the figures and their ratios to the same seed's
    ``baseline``."""
    head = (
        f"{'variant':<16}{'seed':>5}{'params':>11}{'updates':>8}{'train tok/s':>12}{'x':>6}"
        f"{'beam5 tok/s':>12}{'x':>6}{'state KiB':>10}{'BLEU':>7}{'chrF':>7}"
        f"{'BLEU@base':>10}{'cpu':>6}{'val BLEU':>9}"
    )
    lines = [head]
    for (name, seed), r in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0] != baseline)):
        base = rows.get((baseline, seed), r)
        at = r.get("equal_updates", {}).get("bleu", r["bleu"] if name == baseline else None)
        share = r.get("cpu_share")
        valid = f"{r['valid']['bleu']:.1f}" if "valid" in r else ""
        lines.append(
            f"{name:<16}{seed:>5}{r['params']:>11,}{r['update']:>8}"
            f"{(r['train_tok_s'] or 0):>12,.0f}{_ratio(r, base, 'train_tok_s'):>6.2f}"
            f"{r['decode_tok_s']:>12,.0f}{_ratio(r, base, 'decode_tok_s'):>6.2f}"
            f"{r['state_bytes'] / 1024:>10,.0f}{r['bleu']:>7.1f}{r['chrf']:>7.1f}"
            f"{'' if at is None else f'{at:.1f}':>10}"
            f"{'' if share is None else f'{share:.2f}':>6}"
            f"{valid:>9}"
        )
    return "\n".join(lines)


def _mean_range(values: list[float]) -> str:
    """'30.1' for one value; 'mean (min-max)' over seeds."""
    mean = sum(values) / len(values)
    return (
        f"{mean:.1f}" if len(values) == 1 else f"{mean:.1f} ({min(values):.1f}-{max(values):.1f})"
    )


def markdown(rows: dict[tuple[str, int], dict[str, Any]]) -> str:
    """The README table: one row per variant, BLEU and chrF as the mean (and range) over its
    seeds, speeds and state as ratios to the baseline."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for (name, _seed), row in sorted(rows.items(), key=lambda kv: kv[0][1]):
        by_name.setdefault(name, []).append(row)
    base = by_name[BASELINE][0]
    valid = all("valid" in r for r in rows.values())  # the --updates rows: val BLEU as well
    heads = [
        "variant",
        "setting",
        "params",
        "updates",
        "train tok/s",
        "beam-5 tok/s",
        "state/sent.",
        "BLEU",
        "chrF",
        "BLEU at the baseline's updates",
        *(["val BLEU"] if valid else []),
        "seeds",
    ]
    lines = ["| " + " | ".join(heads) + " |", "|---|---|" + "--:|" * (len(heads) - 2)]
    order = [BASELINE] + [n for n in VARIANTS if n != BASELINE and n in by_name]
    for name in order:
        runs, first = by_name[name], by_name[name][0]
        preset, overrides = VARIANTS[name]
        settings = {**overrides, **TRAIN_SETTINGS.get(name, {})}
        setting = ", ".join(f"{k}={value_text(v)}" for k, v in settings.items())
        if preset != BASE_PRESET:
            setting = f"{preset} {setting}".strip()
        at = [r.get("equal_updates", {}).get("bleu", r["bleu"]) for r in runs]
        bleu, chrf = (_mean_range([r[key] for r in runs]) for key in ("bleu", "chrf"))
        lines.append(
            f"| {name} | {setting or DEFAULTS} | {first['params'] / 1e6:.2f} M "
            f"| {first['update']} "
            f"| {first['train_tok_s']:,.0f} ({_ratio(first, base, 'train_tok_s'):.2f}x) "
            f"| {first['decode_tok_s']:,.0f} ({_ratio(first, base, 'decode_tok_s'):.2f}x) "
            f"| {first['state_bytes'] / 1024:,.0f} KiB "
            f"| {bleu} | {chrf} | {_mean_range(at)} |"
            + (f" {_mean_range([r['valid']['bleu'] for r in runs])} |" if valid else "")
            + f" {len(runs)} |"
        )
    return "\n".join(lines)


BASE_PRESET = VARIANTS[BASELINE][0]
DEFAULTS = "post-LN, sinusoidal, ReLU (the defaults)"
