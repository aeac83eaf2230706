"""What a run reports: a JSONL metrics log, TensorBoard when installed, and a progress bar.

``metrics.jsonl`` in the run directory holds one JSON object per line:

* train records every ``log_every`` updates: update, epoch, loss, nll, ppl, lr, gnorm,
  tgt_tokens_per_s, elapsed (training wall-clock seconds, across resumes); with fp16 also
  loss_scale and overflows (steps the gradient scaler skipped so far: not updates);
* valid records: update, epoch, valid_loss, valid_nll, valid_ppl, valid_bleu (null without
  BLEU), bleu_signature, elapsed; with several directions (issue 16) valid_bleu is the mean of
  their valid_bleu_SRC-TGT, which the records also hold (and TensorBoard shows).

The progress bar (tqdm, on stderr) is shown only on a terminal; otherwise, unless quiet, each
record is echoed to stderr as one line.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from mtkit.staging import staged_file

METRICS_LOG = "metrics.jsonl"


def truncate_metrics(run_dir: str | Path, update: int, validated: int) -> None:
    """Drop records written after the checkpoint a resumed run starts from: train records after
    ``update``, valid records after ``validated`` (the last update in its history)."""
    path = Path(run_dir) / METRICS_LOG
    if not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
            last = validated if "valid_loss" in record else update
            if int(record.get("update", 0)) <= last:
                kept.append(line)
        except (json.JSONDecodeError, AttributeError, TypeError, ValueError):
            continue  # a line cut short by a kill
    with staged_file(path) as handle:
        handle.write("".join(f"{line}\n" for line in kept).encode("utf-8"))


def format_duration(seconds: float) -> str:
    """>>> format_duration(3725)
    '1h02m'"""
    seconds = max(0, int(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s"


def _tensorboard(run_dir: Path) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # tensorboard is optional
        return None
    return SummaryWriter(str(run_dir / "tensorboard"))


class RunLog:
    """Records for rank 0; every method is a no-op on the other ranks (``enabled`` False)."""

    def __init__(
        self, run_dir: str | Path, enabled: bool, quiet: bool, total: int | None, initial: int
    ) -> None:
        self.enabled, self.quiet = enabled, quiet
        self.run_dir = Path(run_dir)
        self._file = None
        self._tb = None
        show_bar = enabled and not quiet and sys.stderr.isatty()
        self.bar = tqdm(
            total=total,
            initial=initial,
            file=sys.stderr,
            disable=not show_bar,
            unit="upd",
            dynamic_ncols=True,
        )
        if enabled:
            self._file = (self.run_dir / METRICS_LOG).open("a", encoding="utf-8")
            self._tb = _tensorboard(self.run_dir)

    def record(self, kind: str, record: dict[str, Any]) -> None:
        """Append a train/valid record to the log (and TensorBoard); echo it without a bar."""
        if not self.enabled or self._file is None:
            return
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        if self._tb is not None:
            for key, value in record.items():
                if isinstance(value, int | float) and key != "update" and math.isfinite(value):
                    self._tb.add_scalar(f"{kind}/{key}", value, record["update"])
        if self.bar.disable:
            self.message(f"{kind} " + " | ".join(_fmt(k, v) for k, v in record.items()))

    def progress(self, postfix: dict[str, str]) -> None:
        if not self.bar.disable:
            self.bar.update(1)
            self.bar.set_postfix(postfix, refresh=False)

    def message(self, text: str) -> None:
        if self.enabled and not self.quiet:
            self.bar.write(text, file=sys.stderr)

    def close(self) -> None:
        self.bar.close()
        if self._file is not None:
            self._file.close()
        if self._tb is not None:
            self._tb.close()


def _fmt(key: str, value: Any) -> str:
    if isinstance(value, float):
        return f"{key} {value:.4g}"
    return f"{key} {value}"


class Meter:
    """Target tokens and training time since the last train record: the speed it reports."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.ntokens = 0
        self.start = time.monotonic()
        self.paused = 0.0  # seconds spent validating and saving since ``start``

    def add(self, ntokens: int) -> None:
        self.ntokens += ntokens

    def tokens_per_s(self) -> float:
        return self.ntokens / max(time.monotonic() - self.start - self.paused, 1e-9)
