"""`mtkit plot`: reads validation records from the metrics log and writes a PNG."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtkit.cli import cli
from mtkit.errors import MtkitError
from mtkit.pipeline.plot import plot_runs, read_curve, run_labels


def write_log(run: Path, records: list[dict]) -> None:
    run.mkdir(parents=True, exist_ok=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_curve_keeps_validation_records(tmp_path: Path) -> None:
    write_log(
        tmp_path / "r",
        [
            {"update": 50, "loss": 5.0, "elapsed": 60},
            {"update": 100, "valid_bleu": 10.5, "elapsed": 3600},
            {"update": 200, "valid_bleu": 20.0, "elapsed": 7200},
        ],
    )
    assert read_curve(tmp_path / "r") == [(1.0, 10.5), (2.0, 20.0)]
    assert read_curve(tmp_path / "r", x="updates") == [(100.0, 10.5), (200.0, 20.0)]
    with pytest.raises(MtkitError, match="--x 'epochs'"):
        read_curve(tmp_path / "r", x="epochs")


def test_labels_tell_runs_apart(tmp_path: Path) -> None:
    # recipes name every run directory "run": the legend goes up the path until the names differ
    runs = [str(tmp_path / name / "en-de" / "run") for name in ("base", "modern")]
    assert run_labels(runs) == ["base/en-de/run", "modern/en-de/run"]
    assert run_labels([str(tmp_path / "a"), str(tmp_path / "b")]) == ["a", "b"]
    assert run_labels([str(tmp_path / "x" / "run")]) == ["run"]


def test_png_legend_and_axis(tmp_path: Path, monkeypatch) -> None:
    plt = pytest.importorskip("matplotlib.pyplot")
    runs = [tmp_path / name / "run" for name in ("base", "modern")]
    for run in runs:
        write_log(run, [{"update": 500, "valid_bleu": 1.0, "elapsed": 7200}])
    seen = {}
    savefig = plt.Figure.savefig

    def spy(fig, *args, **kwargs):
        ax = fig.axes[0]
        seen["labels"] = [line.get_label() for line in ax.get_lines()]
        seen["x"] = [list(line.get_xdata()) for line in ax.get_lines()]
        seen["xlabel"] = ax.get_xlabel()
        return savefig(fig, *args, **kwargs)

    monkeypatch.setattr(plt.Figure, "savefig", spy)
    result = CliRunner().invoke(
        cli, ["plot", *map(str, runs), "--x", "updates", "-o", str(tmp_path / "c.png")]
    )
    assert result.exit_code == 0, result.output
    assert seen == {
        "labels": ["base/run", "modern/run"],
        "x": [[500.0], [500.0]],
        "xlabel": "updates",
    }


def test_png_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    write_log(
        tmp_path / "r", [{"valid_bleu": 1.0, "elapsed": 10}, {"valid_bleu": 2, "elapsed": 20}]
    )
    result = CliRunner().invoke(cli, ["plot", str(tmp_path / "r"), "-o", str(tmp_path / "c.png")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "lines, message",
    [
        (None, "no metrics log"),
        ('{"loss": 1, "elapsed": 3}\n', "no 'valid_bleu' records"),
        ('{"valid_bleu": 1, "elapsed": 3}\nnot json\n', "metrics.jsonl:2: not a JSON record"),
    ],
)
def test_errors(tmp_path: Path, lines: str | None, message: str) -> None:
    run = tmp_path / "r"
    run.mkdir()
    if lines is not None:
        (run / "metrics.jsonl").write_text(lines)
    with pytest.raises(MtkitError, match=message):
        plot_runs([str(run)], str(tmp_path / "c.png"))
    assert not (tmp_path / "c.png").exists()
    result = CliRunner().invoke(cli, ["plot", str(run), "-o", str(tmp_path / "c.png")])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert message.split(":")[-1].strip() in result.output
