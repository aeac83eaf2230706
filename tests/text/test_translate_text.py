"""translate_text() and `mtkit translate --split-sentences` with a real (tiny, trained) model."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from text_helpers import HOSTILE

from mtkit.cli import cli
from mtkit.engines.base import Engine, best_texts
from mtkit.text import TextOptions, segment, translate_text, translate_texts
from mtkit.text.translate import source_limit

pytestmark = pytest.mark.usefixtures("one_thread")

TEXTS = [
    "man man. cat in on runs. a cat small big blue house.",
    "  the dog runs.\r\n\r\n\ta woman walks on the street",
    "",
    " \t ",
    "\ufeffred house 😀. שלום. big cat",
]


def one_by_one(engine: Engine, text: str) -> str:
    """What translate_text must give: every sentence translated alone, the gaps kept."""
    annotated = segment(text, "en")
    sentences = annotated.all_sentences()
    return annotated.rebuild(best_texts(engine.translate(sentences)) if sentences else [])


def test_a_text_is_its_sentences_translated_alone(engine: Engine) -> None:
    out = translate_text(engine, TEXTS[:1], "en")
    sentences = best_texts(
        engine.translate(["man man.", "cat in on runs.", "a cat small big blue house."])
    )
    assert all(sentences) and len(set(sentences)) == 3
    assert out == [" ".join(sentences)]


def test_texts_keep_their_layout_and_count(engine: Engine) -> None:
    found = translate_texts(engine, TEXTS, TextOptions("en", spans=False))
    out = [t.text for t in found]
    assert out == [one_by_one(engine, text) for text in TEXTS]
    assert out[2:4] == ["", " \t "]
    assert out[1].startswith("  ") and "\r\n\r\n\t" in out[1]
    # with the spans kept (the default), the emoji comes back where the model dropped it
    spans = translate_text(engine, TEXTS, "en")
    assert "😀" in spans[4] and "😀" not in out[4] and spans[:4] == out[:4]


def test_one_engine_call_for_all_texts(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    translate = engine.translate

    def counted(lines, *args, **kwargs):
        calls.append(list(lines))
        return translate(lines, *args, **kwargs)

    monkeypatch.setattr(engine, "translate", counted)
    translate_text(engine, TEXTS, "en")
    assert len(calls) == 1 and len(calls[0]) == 8  # 3 + 2 + 0 + 0 + 3 sentences


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_texts_keep_lines_and_gaps(engine: Engine, name: str) -> None:
    text = HOSTILE[name]
    (out,) = translate_text(engine, [text], "en")
    annotated = segment(text, "en")
    assert out.count("\n") == text.count("\n") and out.count("\r") == text.count("\r")
    assert out.startswith(annotated.gap(0)) and out.endswith(annotated.gap(len(annotated)))


def test_a_long_sentence_is_cut_and_every_part_translated(
    engine: Engine, capsys: pytest.CaptureFixture
) -> None:
    words = "the man runs on the street, a cat walks in the house; a big dog"
    long = " ".join([words] * 6)  # far more than the model's 31 pieces
    limit = source_limit(engine)
    assert len(engine.src_tokenizer.encode_one(long)) > 3 * limit
    (out,) = translate_text(engine, ["short one. " + long], "en", first_number=7)
    err = capsys.readouterr().err
    assert err.count("warning") == 1 and "line 7: a sentence of" in err
    assert "truncated" not in err  # every part fits: the engine cuts nothing
    first = best_texts(engine.translate(["short one."]))[0]
    assert out.startswith(first + " ")
    assert len(out.split()) > 3 * len(best_texts(engine.translate([long]))[0].split())


# the CLI's input lines (a line holds no "\n"; the BOM would be dropped at the file's start)
LINES = [
    "man man. cat in on runs. a cat small big blue house.",
    "",
    " \t ",
    "  the dog runs.  \ta woman walks on the street",
    "red house 😀. שלום. big cat",
]


def run_cli(ckpt: Path, tmp_path: Path, *flags: str) -> tuple[int, str]:
    source = tmp_path / "in.txt"
    source.write_bytes("\n".join(LINES).encode("utf-8"))  # no final newline
    result = CliRunner().invoke(
        cli,
        [
            "translate",
            "-m",
            str(ckpt),
            "-i",
            str(source),
            "-q",
            "--beam",
            "2",
            "--max-len-a",
            "1",
            "--max-len-b",
            "2",
            "--threads",
            "1",
            *flags,
        ],
    )
    return result.exit_code, result.output


def test_cli_split_sentences(text_ckpt: Path, engine: Engine, tmp_path: Path) -> None:
    code, output = run_cli(text_ckpt, tmp_path, "--split-sentences")
    assert code == 0, output
    assert output == "".join(text + "\n" for text in translate_text(engine, LINES, "en"))
    code, plain = run_cli(text_ckpt, tmp_path)
    assert code == 0 and plain.count("\n") == output.count("\n") == len(LINES)
    assert plain != output  # one sentence per line translates the first text differently


def test_cli_split_sentences_refuses_nbest(text_ckpt: Path, tmp_path: Path) -> None:
    code, output = run_cli(text_ckpt, tmp_path, "--split-sentences", "--nbest", "2")
    assert code != 0
    assert "--split-sentences gives one translation per line" in output
    assert len(output.strip().splitlines()) == 1


def test_cli_split_sentences_on_hostile_lines(text_ckpt: Path, tmp_path: Path) -> None:
    """BOM, CRLF, blank and whitespace lines, a 5,000-character line without a full stop,
    emoji, right-to-left script, no final newline: one output line per input line."""
    lines = [
        "\ufeffthe man runs. a dog walks.",
        "",
        "   ",
        "cat " * 1250,
        "red 😀 house. שלום.",
        "\tthe woman runs on the street",
    ]
    source = tmp_path / "hostile.txt"
    source.write_bytes("\r\n".join(lines).encode("utf-8"))
    result = CliRunner().invoke(
        cli,
        [
            "translate",
            "-m",
            str(text_ckpt),
            "-i",
            str(source),
            "-q",
            "--beam",
            "1",
            "--threads",
            "1",
            "--split-sentences",
        ],
    )
    assert result.exit_code == 0, result.output
    out = result.stdout.split("\n")
    assert len(out) == len(lines) + 1 and out[-1] == ""
    assert out[1:3] == ["", "   "] and out[5].startswith("\t") and out[0][0] != "\ufeff"
    assert "line 4: a sentence of" in result.stderr and "truncated" not in result.stderr
