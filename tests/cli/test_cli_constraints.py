"""`mtkit translate --constraints / --constraints-ordered / --glossary` end to end."""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from translate_helpers import FAST, make_checkpoint, run

from mtkit.config import SearchConfig, TranslateConfig
from mtkit.engines import load_engine, parallel
from mtkit.engines.ct2 import check_search
from mtkit.errors import MtkitError

SLOW = ["--beam", "3", "--max-len-a", "0", "--max-len-b", "8", "--threads", "1"]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny.pt")


def has(text: str, phrase: str) -> bool:
    return f" {phrase} " in f" {text} "


def translate(ckpt: str, lines: list[str], *options: str) -> list[str]:
    result = run(["-m", ckpt, *SLOW, *options], ("\n".join(lines) + "\n").encode())
    assert result.exit_code == 0, result.output
    return result.stdout.split("\n")[:-1]


SOURCES = ["a man runs", "the dog sits on the red street", "a cat", "blue house"]


def test_every_line_contains_its_phrases_and_plain_lines_are_untouched(ckpt: str) -> None:
    plain = translate(ckpt, SOURCES)
    lines = [
        "a man runs\tdog\tred ball",
        "the dog sits on the red street\twoman",
        "a cat",
        "blue house\t\t",
    ]
    found = translate(ckpt, lines, "--constraints")
    assert len(found) == 4
    assert has(found[0], "dog") and has(found[0], "red ball")
    assert has(found[1], "woman")
    assert found[2:] == plain[2:]  # no tab, or only empty phrases: as without --constraints


def test_ordered_constraints_come_in_order(ckpt: str) -> None:
    phrases = [("street", "man"), ("ball", "dog", "ball")]
    lines = [f"{s}\t" + "\t".join(p) for s, p in zip(SOURCES, phrases, strict=False)]
    for line, out in zip(phrases, translate(ckpt, lines, "--constraints-ordered"), strict=True):
        words, at = out.split(), 0
        for phrase in line:
            at = words.index(phrase, at) + 1  # ValueError if missing or out of order


def test_nbest_rows_all_meet_the_constraints(ckpt: str) -> None:
    result = run(
        ["-m", ckpt, *SLOW, "--nbest", "3", "--constraints"],
        b"a man runs\tcat\nthe dog\tred ball\n",
    )
    assert result.exit_code == 0, result.output
    rows = [row.split("\t") for row in result.stdout.splitlines()]
    assert [row[:2] for row in rows] == [[n, r] for n in "12" for r in "123"]
    for row in rows:  # fewer hypotheses than nbest meet the constraints: rows of -inf
        assert has(row[4], "cat" if row[0] == "1" else "red ball") or row[2] == "-inf", row


def test_glossary_applies_on_word_boundaries_only(ckpt: str, tmp_path: Path) -> None:
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("# source\ttarget\ncat\tred dog\nBlue house\twoman\n", encoding="utf-8")
    lines = ["a cat sits", "a cats sits", "the blue house", "a man"]
    plain = translate(ckpt, lines)
    found = translate(ckpt, lines, "--glossary", str(glossary))
    assert has(found[0], "red dog")
    assert found[1:] == plain[1:]  # "cats" is not "cat"; "blue" is not "Blue"
    folded = translate(ckpt, lines, "--glossary", str(glossary), "--glossary-ignore-case")
    assert has(folded[2], "woman") and folded[0] == found[0] and folded[3] == plain[3]


def test_glossary_terms_are_found_per_sentence(ckpt: str, tmp_path: Path) -> None:
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("cat\tred dog\n", encoding="utf-8")
    alone = translate(ckpt, ["A man runs.", "A cat sits."], "--glossary", str(glossary))
    joined = translate(
        ckpt, ["A man runs. A cat sits."], "--split-sentences", "--glossary", str(glossary)
    )
    assert joined == [" ".join(alone)]


def test_workers_hand_each_batch_its_constraints(ckpt: str) -> None:
    """The --workers engine sends each batch's phrases with it (threads stand in for the
    worker processes here, each decoding with the engine `_start_worker` would load)."""
    config = TranslateConfig(
        search=SearchConfig(beam=3, max_len_a=0.0, max_len_b=8),
        threads=1,
        constraints_in_input=True,
        max_tokens=12,
    )
    native = load_engine([ckpt], config)
    lines = ["a man runs", "the dog sits on the red street", "a cat", "blue house"]
    phrases = [["dog"], ["woman", "ball"], [], ["man"]]
    with ThreadPoolExecutor(2) as pool:
        workers = parallel.ParallelEngine(
            config, native.src_tokenizer, native.tgt_tokenizer, native.max_positions, None, pool
        )
        parallel._worker = native
        try:
            found = workers.translate(lines, constraints=phrases)
        finally:
            parallel._worker = None
    assert found == native.translate(lines, constraints=phrases)
    assert all(
        has(hyps[0].text, p) for hyps, line in zip(found, phrases, strict=True) for p in line
    )


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (
            ["--constraints", "--max-len-b", "2"],
            b"a man\tred ball dog\n",
            "line 1: its constraints need 3 target pieces, more than the length limit of 2",
        ),
        (["--constraints", "--split-sentences"], b"a\n", "--constraints gives phrases per"),
        (
            ["--constraints", "--sampling", "--beam", "1"],
            b"a\n",
            "--sampling cannot honour constraints",
        ),
        (["--glossary", "missing.tsv"], b"a\n", "missing.tsv: cannot read the glossary"),
    ],
)
def test_bad_constraints_are_one_line_errors(ckpt: str, args, stdin: bytes, message: str) -> None:
    result = run(["-m", ckpt, *FAST, *args], stdin)
    assert result.exit_code != 0
    assert message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_bad_glossary_line_is_named(ckpt: str, tmp_path: Path) -> None:
    glossary = tmp_path / "g.tsv"
    glossary.write_text("cat\tdog\n\nonly one field\n", encoding="utf-8")
    result = run(["-m", ckpt, *FAST, "--glossary", str(glossary)], b"a\n")
    assert result.exit_code != 0
    assert f"{glossary}, line 3: expected source term<TAB>target term, found 1 field" in (
        result.output
    )


def test_ctranslate2_refuses_constraints_by_name() -> None:
    with pytest.raises(MtkitError, match="not available with the ctranslate2 engine"):
        check_search(SearchConfig(constraints="unordered"))


def test_a_multilingual_model_meets_constraints_in_the_tagged_direction(multi_run: Path) -> None:
    """The tiny multilingual model (fr: the source words reversed) with a word it would not
    write as a constraint: the tag still picks the direction, the word is there."""
    engine = load_engine(
        [str(multi_run / "checkpoint_best.pt")],
        TranslateConfig(device="cpu", threads=1, tgt_lang="cs", constraints_in_input=True),
    )
    corpus = multi_run.parent / "valid.en-fr"
    sources = Path(f"{corpus}.en").read_text("utf-8").splitlines()[:2]
    fr = Path(f"{corpus}.fr").read_text("utf-8").splitlines()[:2]
    word = next(w for w in fr[1].split() if w not in fr[0].split())
    plain, forced = (
        hyps[0].text
        for hyps in engine.translate([f">>fr<< {sources[0]}"] * 2, constraints=[[], [word]])
    )
    assert plain == fr[0]
    assert has(forced, word) and forced != plain


def test_a_line_no_hypothesis_can_meet_is_translated_without_and_named(ckpt: str) -> None:
    """--no-repeat-ngram 1 bans the second "red" of "red red": no hypothesis meets it."""
    lines = ["a man runs\tred red", "a cat\tdog"]
    result = run(
        ["-m", ckpt, *SLOW, "--no-repeat-ngram", "1", "--constraints"],
        ("\n".join(lines) + "\n").encode(),
    )
    assert result.exit_code == 0, result.output
    assert "line 1: no translation within the length limit meets its constraints" in (result.stderr)
    plain = translate(ckpt, ["a man runs"], "--no-repeat-ngram", "1")
    out = result.stdout.split("\n")
    assert out[0] == plain[0] and has(out[1], "dog")
