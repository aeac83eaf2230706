"""`mtkit plot`: validation BLEU against wall-clock time, from a run's JSONL metrics log."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from mtkit.data.lines import decode_line
from mtkit.errors import MtkitError
from mtkit.staging import staged_file

METRICS_LOG = "metrics.jsonl"


def read_curve(run_dir: str | Path, metric: str = "valid_bleu") -> list[tuple[float, float]]:
    """(elapsed hours, metric) for every validation record of a run, in log order.

    Lines are decoded as :mod:`mtkit.data.lines` decodes text (a BOM and CRLF are accepted,
    invalid UTF-8 names the line). A last line without its newline is a record still being
    written (or cut by a kill): it is skipped unless it is complete.
    """
    path = Path(run_dir) / METRICS_LOG
    if not path.is_file():
        raise MtkitError(f"{path}: no metrics log (is {run_dir} an mtkit run directory?)")
    *lines, last = path.read_bytes().split(b"\n")
    points = []
    for number, raw in enumerate(lines, start=1):
        point = _point(decode_line(raw, str(path), number), metric, f"{path}:{number}")
        if point is not None:
            points.append(point)
    if last.strip():
        with contextlib.suppress(MtkitError):
            text = decode_line(last, str(path), len(lines) + 1)
            point = _point(text, metric, f"{path}:{len(lines) + 1}")
            if point is not None:
                points.append(point)
    if not points:
        raise MtkitError(f"{path}: no '{metric}' records yet (has the run validated?)")
    return points


def _point(line: str, metric: str, where: str) -> tuple[float, float] | None:
    """(hours, value) of one log line, None when it has no ``metric``; errors name the line."""
    if not line.strip():
        return None
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        raise MtkitError(f"{where}: not a JSON record") from None
    if not isinstance(record, dict):
        raise MtkitError(f"{where}: not a JSON object, but {type(record).__name__}")
    if record.get(metric) is None or record.get("elapsed") is None:
        return None
    try:
        return float(record["elapsed"]) / 3600.0, float(record[metric])
    except (TypeError, ValueError):
        raise MtkitError(
            f"{where}: '{metric}' and 'elapsed' must be numbers, got {record[metric]!r} and "
            f"{record['elapsed']!r}"
        ) from None


def plot_runs(run_dirs: list[str], output: str = "curve.png", metric: str = "valid_bleu") -> str:
    """Draw one curve per run into a PNG at ``output`` (written atomically); returns the path."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MtkitError("mtkit plot needs matplotlib: pip install 'mtkit[plot]'") from None
    out = Path(output)
    curves = {run: read_curve(run, metric) for run in run_dirs}
    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    for run, points in curves.items():
        hours, values = zip(*points, strict=True)
        ax.plot(hours, values, marker="o", markersize=3, label=Path(run).name)
    ax.set_xlabel("wall-clock time (hours)")
    ax.set_ylabel(metric.replace("_", " "))
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    with staged_file(out) as handle:
        fig.savefig(handle, format="png")
        plt.close(fig)
    return str(out)
