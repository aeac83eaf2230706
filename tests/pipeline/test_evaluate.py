"""pipeline.evaluate: the same numbers as the `sacrebleu` command, file checks, and -m wiring."""

import gzip
import io
import json
import os
import random
import subprocess
import sys
import types
from pathlib import Path

import pytest

from mtkit.config import EvaluateConfig, SearchConfig, TranslateConfig
from mtkit.errors import MtkitError
from mtkit.pipeline.evaluate import evaluate

DATA = Path(__file__).parents[2] / "recipes" / "multi30k" / "data" / "val.de.gz"
N_LINES = 120


def corrupt(lines: list[str], rate: float, seed: int) -> list[str]:
    """Drop, swap or re-case about ``rate`` of the words; some lines get trailing blanks."""
    rng = random.Random(seed)
    out = []
    for line in lines:
        words = line.split()
        for i in range(len(words)):
            roll = rng.random()
            if roll < rate / 3:
                words[i] = ""
            elif roll < 2 * rate / 3 and i + 1 < len(words):
                words[i], words[i + 1] = words[i + 1], words[i]
            elif roll < rate:
                words[i] = words[i].upper()
        out.append(" ".join(w for w in words if w) + (" \t" if rng.random() < 0.1 else ""))
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """ref, ref2 (a second reference), hyp, hyp2 (a worse system) and their text."""
    ref = gzip.decompress(DATA.read_bytes()).decode().splitlines()[:N_LINES]
    texts = {
        "ref": ref,
        "ref2": corrupt(ref, 0.3, 1),
        "hyp": corrupt(ref, 0.2, 2),
        "hyp2": corrupt(ref, 0.35, 3),
    }
    root = tmp_path_factory.mktemp("eval")
    paths = {}
    for name, lines in texts.items():
        paths[name] = root / name
        paths[name].write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return paths


def sacrebleu(*args: object) -> str:
    """The `sacrebleu` command's text output."""
    env = {k: v for k, v in os.environ.items() if k != "SACREBLEU_FORMAT"} | {"NO_COLOR": "1"}
    command = [sys.executable, "-m", "sacrebleu", *map(str, args), "-q", "-nc", "-f", "text"]
    return subprocess.run(command, capture_output=True, text=True, check=True, env=env).stdout


def lines(text: str) -> list[str]:
    return sorted(line.strip() for line in text.splitlines() if line.strip())


@pytest.mark.parametrize(
    "refs, options, sacrebleu_options",
    [
        (["ref"], {}, ["-m", "bleu", "chrf", "ter"]),
        (["ref", "ref2"], {}, ["-m", "bleu", "chrf", "ter"]),
        (
            ["ref"],
            {"tokenize": "intl", "lowercase": True},
            ["-m", "bleu", "chrf", "ter", "--tokenize", "intl", "--lowercase", "--chrf-lowercase"],
        ),
        (
            ["ref", "ref2"],
            {"tokenize": "none", "metrics": ["bleu"], "width": 3},
            ["-m", "bleu", "--tokenize", "none", "-w", "3"],
        ),
        (["ref"], {"tokenize": "char", "metrics": ["bleu"]}, ["--tokenize", "char"]),
        (
            ["ref"],
            {"tokenize": "zh", "metrics": ["bleu"], "lowercase": True},
            ["--tokenize", "zh", "--lowercase"],
        ),
        (
            ["ref", "ref2"],
            {"metrics": ["chrf++"], "width": 4},
            ["-m", "chrf", "--chrf-word-order", "2", "-w", "4"],
        ),
    ],
)
def test_same_output_as_sacrebleu_command(
    files: dict[str, Path], refs: list[str], options: dict, sacrebleu_options: list[str]
) -> None:
    ref_paths = [str(files[r]) for r in refs]
    report = evaluate(EvaluateConfig(input=str(files["hyp"]), refs=ref_paths, **options))
    expected = sacrebleu(*ref_paths, "-i", files["hyp"], *sacrebleu_options)
    assert lines(report.to_text()) == lines(expected)
    assert len(report.scores) == len(lines(expected))


def test_bom_and_crlf_give_the_same_scores(files: dict[str, Path], tmp_path: Path) -> None:
    dos = {}
    for name in ("hyp", "ref", "ref2"):
        dos[name] = tmp_path / f"{name}.dos"
        dos[name].write_bytes(b"\xef\xbb\xbf" + files[name].read_bytes().replace(b"\n", b"\r\n"))
    config = EvaluateConfig(input=str(dos["hyp"]), refs=[str(dos["ref"]), str(dos["ref2"])])
    expected = sacrebleu(
        files["ref"], files["ref2"], "-i", files["hyp"], "-m", "bleu", "chrf", "ter"
    )
    assert lines(evaluate(config).to_text()) == lines(expected)


def test_stdin(files: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(files["hyp"].read_bytes())))
    from_stdin = evaluate(EvaluateConfig(refs=[str(files["ref"])]))
    from_file = evaluate(EvaluateConfig(input=str(files["hyp"]), refs=[str(files["ref"])]))
    assert from_stdin.to_text() == from_file.to_text()


def test_stdin_terminal_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdin", Terminal())
    ref = write(tmp_path / "ref.txt", b"a\n")
    with pytest.raises(MtkitError, match="give -i HYP, or pipe them into stdin"):
        evaluate(EvaluateConfig(refs=[ref]))


def parse_table(text: str) -> dict[str, dict[str, list[str]]]:
    """sacrebleu's paired-test table: {system: {metric: [cell lines]}}."""
    rows = [
        [cell.strip() for cell in line.strip().strip("│").split("│")]
        for line in text.splitlines()
        if line.startswith("│")
    ]
    header = [cell.split(" (")[0] for cell in rows[0]]
    table: dict[str, dict[str, list[str]]] = {}
    system = ""
    for cells in rows[1:]:
        if cells[0]:
            system = cells[0].removeprefix("Baseline: ")
            table[system] = {metric: [] for metric in header[1:]}
        for metric, cell in zip(header[1:], cells[1:], strict=True):
            if cell:
                table[system][metric].append(cell.rstrip("*"))
    return table


@pytest.mark.parametrize("test, seed", [("bs", 12345), ("bs", 7), ("ar", 12345)])
def test_paired_same_as_sacrebleu_command(files: dict[str, Path], test: str, seed: int) -> None:
    n = {"bs": 200, "ar": 300}[test]
    config = EvaluateConfig(
        input=str(files["hyp"]),
        refs=[str(files["ref"])],
        compare=[str(files["hyp2"])],
        paired=test,
        seed=seed,
        **{f"paired_{test}_n": n},
    )
    report = evaluate(config)
    os.environ["SACREBLEU_SEED"] = str(seed)
    try:
        expected = parse_table(
            sacrebleu(
                files["ref"],
                "-i",
                files["hyp"],
                files["hyp2"],
                "-m",
                "bleu",
                "chrf",
                "ter",
                f"--paired-{test}",
                f"--paired-{test}-n",
                n,
                "-w",
                4,
            )
        )
    finally:
        del os.environ["SACREBLEU_SEED"]
    assert [r.name for r in report.paired] == ["BLEU", "chrF2", "TER"]
    for result in report.paired:
        for system in result.systems:
            cell = f"{system.score:.4f}"
            if test == "bs":  # sacrebleu's command prints no CI for 'ar'
                cell += f" ({system.mean:.4f} ± {system.ci:.4f})"
            cells = [cell] + ([] if system.p_value is None else [f"(p = {system.p_value:.4f})"])
            assert expected[system.system][result.name] == cells


def test_paired_json(files: dict[str, Path]) -> None:
    hyp, hyp2, ref = (str(files[name]) for name in ("hyp", "hyp2", "ref"))
    config = EvaluateConfig(
        input=hyp, refs=[ref], metrics=["bleu"], compare=[hyp2, hyp], paired_bs_n=100
    )
    data = json.loads(evaluate(config).to_json())
    (bleu,) = data
    assert bleu["name"] == "BLEU" and bleu["test"] == "bs" and bleu["samples"] == 100
    assert [s["baseline"] for s in bleu["systems"]] == [True, False, False]
    assert bleu["systems"][2]["p_value"] == 1.0  # the baseline compared with itself
    assert 0 <= bleu["systems"][1]["p_value"] <= 1


# --- errors ---------------------------------------------------------------------------------


def write(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def test_line_count_mismatches(tmp_path: Path) -> None:
    three = write(tmp_path / "three.txt", b"a\nb\nc\n")
    four = write(tmp_path / "four.txt", b"a\nb\nc\nd\n")
    with pytest.raises(
        MtkitError, match=f"^line count mismatch: {three} has 3 lines, {four} has 4$"
    ):
        evaluate(EvaluateConfig(input=three, refs=[four]))
    with pytest.raises(
        MtkitError, match=f"^line count mismatch: {three} has 3 lines, {four} has 4$"
    ):
        evaluate(EvaluateConfig(input=three, refs=[three, four]))
    with pytest.raises(MtkitError, match=f"{three} has 3 lines, {four} has 4$"):
        evaluate(EvaluateConfig(input=three, refs=[three], compare=[four]))


def test_file_errors(tmp_path: Path) -> None:
    good = write(tmp_path / "good.txt", b"a b c\n")
    bad = write(tmp_path / "bad.txt", b"x\n\xe4\n")
    with pytest.raises(MtkitError, match=f"^{tmp_path}/missing.txt: no such file$"):
        evaluate(EvaluateConfig(input=str(tmp_path / "missing.txt"), refs=[good]))
    with pytest.raises(MtkitError, match=f"^{bad}:2: invalid UTF-8"):
        evaluate(EvaluateConfig(input=good, refs=[bad]))
    empty = write(tmp_path / "empty.txt", b"")
    with pytest.raises(MtkitError, match="empty.txt: no lines, nothing to score"):
        evaluate(EvaluateConfig(input=empty, refs=[empty]))


@pytest.mark.parametrize(
    "options, message",
    [
        ({"refs": []}, "no reference given"),
        ({"metrics": ["bleu", "comet"]}, "--metrics: unknown metric 'comet'"),
        ({"tokenize": "moses"}, "--tokenize: unknown BLEU tokenizer 'moses'"),
        ({"src": "x.en"}, "--src is only used with -m"),
        ({"output": "out.de"}, "--output is only used with -m"),
        ({"checkpoints": ["m.pt"]}, "-m/--model needs --src"),
        ({"checkpoints": ["m.pt"], "src": "x.en", "input": "h.de"}, "either -i .* or -m"),
        ({"checkpoints": ["m.pt"], "src": "x.en", "output": "/"}, "/: is a directory"),
        ({"compare": ["b.de"], "paired": "t"}, "--paired: unknown test 't'"),
        ({"width": -1}, "--width must be between 0 and 10"),
    ],
)
def test_option_checks(tmp_path: Path, options: dict, message: str) -> None:
    ref = write(tmp_path / "ref.txt", b"a\n")
    with pytest.raises(MtkitError, match=message):
        evaluate(EvaluateConfig(**({"refs": [ref]} | options)))


# --- -m: translate, then score (translate engine faked here; see tests/cli for the real one) --


@pytest.fixture
def fake_translate(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """Install a fake mtkit.pipeline.translate whose translation upper-cases the source."""
    calls: list[tuple] = []

    def translate_lines(checkpoints: list[str], lines: list[str], config: TranslateConfig):
        calls.append((checkpoints, lines, config))
        return [line.upper() + "  " for line in lines]

    module = types.ModuleType("mtkit.pipeline.translate")
    module.translate_lines = translate_lines  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "mtkit.pipeline.translate", module)
    return calls


def test_model_translates_then_scores(tmp_path: Path, fake_translate: list[tuple]) -> None:
    src = write(tmp_path / "test.en", b"the cat\xc2\xa0sat on the mat\r\na dog runs\r\n")
    ref = write(tmp_path / "test.de", "THE CAT\u00a0SAT ON THE MAT\nA DOG RUNS\n".encode())
    out = tmp_path / "hyp.de"
    config = EvaluateConfig(checkpoints=["a.pt", "b.pt"], src=src, refs=[ref], output=str(out))
    report = evaluate(config, TranslateConfig(SearchConfig(beam=2)))
    scores = {r.name: r.score for r in report.scores}
    assert scores == pytest.approx({"BLEU": 100.0, "chrF2": 100.0, "TER": 0.0})
    ((checkpoints, lines, translate_config),) = fake_translate
    assert checkpoints == ["a.pt", "b.pt"] and translate_config.search.beam == 2
    assert lines == ["the cat\u00a0sat on the mat", "a dog runs"]  # decoded, no line ends
    assert out.read_text() == "THE CAT\u00a0SAT ON THE MAT  \nA DOG RUNS  \n"  # as translated


def test_model_checks_counts_before_translating(tmp_path: Path, fake_translate: list) -> None:
    src = write(tmp_path / "test.en", b"one\ntwo\n")
    ref = write(tmp_path / "test.de", b"eins\n")
    with pytest.raises(MtkitError, match=f"{src} has 2 lines, {ref} has 1"):
        evaluate(EvaluateConfig(checkpoints=["a.pt"], src=src, refs=[ref]))
    assert fake_translate == []


def test_model_with_compare(tmp_path: Path, fake_translate: list) -> None:
    src = write(tmp_path / "test.en", b"a b c d\ne f g h\n")
    ref = write(tmp_path / "test.de", b"A B C D\nE F G H\n")
    config = EvaluateConfig(
        checkpoints=["a.pt"], src=src, refs=[ref], compare=[ref], metrics=["bleu"], paired_bs_n=50
    )
    (bleu,) = evaluate(config).paired
    assert [s.system for s in bleu.systems] == ["a.pt", ref]
    assert bleu.systems[1].p_value == 1.0  # the translation equals the reference


def test_model_without_translation_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "mtkit.pipeline.translate", None)
    src = write(tmp_path / "test.en", b"a\n")
    with pytest.raises(MtkitError, match="no translation engine"):
        evaluate(EvaluateConfig(checkpoints=["a.pt"], src=src, refs=[src]))
