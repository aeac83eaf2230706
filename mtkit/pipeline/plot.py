"""`mtkit plot`: validation BLEU against wall-clock time, from a run's JSONL metrics log."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from mtkit.errors import MtkitError

METRICS_LOG = "metrics.jsonl"


def read_curve(run_dir: str | Path, metric: str = "valid_bleu") -> list[tuple[float, float]]:
    """(elapsed hours, metric) for every validation record of a run, in log order."""
    path = Path(run_dir) / METRICS_LOG
    if not path.is_file():
        raise MtkitError(f"{path}: no metrics log (is {run_dir} an mtkit run directory?)")
    points = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                raise MtkitError(f"{path}:{number}: not a JSON record") from None
            if record.get(metric) is not None and "elapsed" in record:
                points.append((float(record["elapsed"]) / 3600.0, float(record[metric])))
    if not points:
        raise MtkitError(f"{path}: no '{metric}' records yet (has the run validated?)")
    return points


def plot_runs(run_dirs: list[str], output: str, metric: str = "valid_bleu") -> str:
    """Draw one curve per run into a PNG at ``output`` (written atomically); returns the path."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MtkitError("mtkit plot needs matplotlib: pip install 'mtkit[plot]'") from None
    out = Path(output)
    if not out.parent.is_dir():
        raise MtkitError(f"{out.parent}: directory does not exist")
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
    fd, tmp = tempfile.mkstemp(suffix=".png", dir=out.parent)
    os.close(fd)
    try:
        fig.savefig(tmp, format="png")
        os.replace(tmp, out)
    finally:
        Path(tmp).unlink(missing_ok=True)
        plt.close(fig)
    return str(out)
