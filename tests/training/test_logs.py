"""Run reporting: JSONL records, truncation on resume, the progress bar on a terminal."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from mtkit.training.logs import METRICS_LOG, RunLog, format_duration, truncate_metrics


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("seconds, text", [(0, "0m00s"), (59.9, "0m59s"), (3725, "1h02m")])
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_records_and_bar_on_a_terminal(tmp_path: Path, monkeypatch) -> None:
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    log = RunLog(tmp_path, enabled=True, quiet=False, total=10, initial=0)
    log.progress({"loss": "3.210", "lr": "1.00e-03", "tok/s": "1234", "eta": "0m09s"})
    log.record("train", {"update": 1, "loss": 3.21, "elapsed": 0.5})
    log.close()
    shown = terminal.getvalue()
    assert "loss=3.210" in shown and "eta=0m09s" in shown and "1/10" in shown
    assert "train update 1" not in shown  # records are echoed only without a bar
    records = [json.loads(line) for line in (tmp_path / METRICS_LOG).read_text().splitlines()]
    assert records == [{"update": 1, "loss": 3.21, "elapsed": 0.5}]


def test_records_echoed_without_terminal_and_silent_when_quiet(tmp_path, monkeypatch) -> None:
    pipe = io.StringIO()
    monkeypatch.setattr(sys, "stderr", pipe)
    log = RunLog(tmp_path, enabled=True, quiet=False, total=None, initial=0)
    log.progress({"loss": "3.2"})
    log.record("valid", {"update": 4, "valid_bleu": 12.5})
    log.close()
    assert pipe.getvalue() == "valid update 4 | valid_bleu 12.5\n"
    quiet = io.StringIO()
    monkeypatch.setattr(sys, "stderr", quiet)
    log = RunLog(tmp_path, enabled=True, quiet=True, total=None, initial=0)
    log.record("valid", {"update": 5, "valid_bleu": 13.0})
    log.message("hello")
    log.close()
    assert quiet.getvalue() == ""


def test_truncate_drops_records_after_the_checkpoint(tmp_path: Path) -> None:
    lines = [{"update": u, "loss": 1.0} for u in (2, 4, 6)] + [{"update": 4, "valid_loss": 2.0}]
    text = "".join(json.dumps(r) + "\n" for r in lines) + '{"update": 8, "lo'  # cut by a kill
    (tmp_path / METRICS_LOG).write_text(text)
    truncate_metrics(tmp_path, 4, validated=4)
    kept = [json.loads(x) for x in (tmp_path / METRICS_LOG).read_text().splitlines()]
    assert [r["update"] for r in kept] == [2, 4, 4]
    # the checkpoint of update 4 was written before its validation: that record goes too
    truncate_metrics(tmp_path, 4, validated=2)
    kept = [json.loads(x) for x in (tmp_path / METRICS_LOG).read_text().splitlines()]
    assert kept == lines[:2]
    truncate_metrics(tmp_path / "nowhere", 3, validated=0)  # no log yet: nothing to do
