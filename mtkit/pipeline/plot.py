"""`mtkit plot`: validation BLEU against wall-clock time (or updates), from runs' JSONL logs."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from mtkit.data.lines import decode_line
from mtkit.errors import MtkitError
from mtkit.staging import staged_file

METRICS_LOG = "metrics.jsonl"
# x axis name -> (the log record's field, divisor, axis label)
X_AXES: dict[str, tuple[str, float, str]] = {
    "hours": ("elapsed", 3600.0, "wall-clock time (hours)"),
    "updates": ("update", 1.0, "updates"),
}


def read_curve(
    run_dir: str | Path, metric: str = "valid_bleu", x: str = "hours"
) -> list[tuple[float, float]]:
    """(x, metric) for every validation record of a run, in log order; ``x`` is one of
    :data:`X_AXES`: elapsed hours (default) or the update number.

    Lines are decoded as :mod:`mtkit.data.lines` decodes text (a BOM and CRLF are accepted,
    invalid UTF-8 names the line). A last line without its newline is a record still being
    written (or cut by a kill): it is skipped unless it is complete.
    """
    if x not in X_AXES:
        raise MtkitError(f"--x {x!r}: one of {', '.join(X_AXES)}")
    path = Path(run_dir) / METRICS_LOG
    if not path.is_file():
        raise MtkitError(f"{path}: no metrics log (is {run_dir} an mtkit run directory?)")
    *lines, last = path.read_bytes().split(b"\n")
    points = []
    for number, raw in enumerate(lines, start=1):
        point = _point(decode_line(raw, str(path), number), metric, x, f"{path}:{number}")
        if point is not None:
            points.append(point)
    if last.strip():
        with contextlib.suppress(MtkitError):
            text = decode_line(last, str(path), len(lines) + 1)
            point = _point(text, metric, x, f"{path}:{len(lines) + 1}")
            if point is not None:
                points.append(point)
    if not points:
        raise MtkitError(f"{path}: no '{metric}' records yet (has the run validated?)")
    return points


def _point(line: str, metric: str, x: str, where: str) -> tuple[float, float] | None:
    """(x, value) of one log line, None when it has no ``metric``; errors name the line."""
    field, divisor, _ = X_AXES[x]
    if not line.strip():
        return None
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        raise MtkitError(f"{where}: not a JSON record") from None
    if not isinstance(record, dict):
        raise MtkitError(f"{where}: not a JSON object, but {type(record).__name__}")
    if record.get(metric) is None or record.get(field) is None:
        return None
    try:
        return float(record[field]) / divisor, float(record[metric])
    except (TypeError, ValueError):
        raise MtkitError(
            f"{where}: '{metric}' and '{field}' must be numbers, got {record[metric]!r} and "
            f"{record[field]!r}"
        ) from None


def run_labels(run_dirs: list[str]) -> list[str]:
    """Legend labels: each run's last path components, as few as tell all the runs apart.

    >>> run_labels(["w/base/en-de/run", "w/modern/en-de/run"])
    ['base/en-de/run', 'modern/en-de/run']
    >>> run_labels(["runs/a", "runs/b"])
    ['a', 'b']
    """
    parts = [Path(run).resolve().parts for run in run_dirs]
    longest = max(len(p) for p in parts)
    for depth in range(1, longest + 1):
        labels = ["/".join(p[-depth:]) for p in parts]
        if len(set(labels)) == len(labels):
            return labels
    return [str(run) for run in run_dirs]  # the same directory twice


def plot_runs(
    run_dirs: list[str], output: str = "curve.png", metric: str = "valid_bleu", x: str = "hours"
) -> str:
    """Draw one curve per run into a PNG at ``output`` (written atomically), ``metric`` against
    ``x`` (:data:`X_AXES`); returns the path."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MtkitError("mtkit plot needs matplotlib: pip install 'mtkit[plot]'") from None
    out = Path(output)
    curves = [read_curve(run, metric, x) for run in run_dirs]
    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    for label, points in zip(run_labels(run_dirs), curves, strict=True):
        xs, values = zip(*points, strict=True)
        ax.plot(xs, values, marker="o", markersize=3, label=label)
    ax.set_xlabel(X_AXES[x][2])
    ax.set_ylabel(metric.replace("_", " "))
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    with staged_file(out) as handle:
        fig.savefig(handle, format="png")
        plt.close(fig)
    return str(out)
