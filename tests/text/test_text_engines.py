"""The text layer over every engine and over a multilingual model: one place, same output."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_helpers import engine_config

from mtkit.config import TranslateConfig
from mtkit.engines import load_engine
from mtkit.text import TextOptions, translate_texts

pytestmark = pytest.mark.usefixtures("one_thread")

TEXTS = [
    "man man. cat in on runs.\n\n  a cat small big blue house 😀 see https://x.org/a",
    "@bob the dog runs on 3 streets #cats",
]
DOCUMENT = (
    '<p>the <b>big dog</b> runs. a <a href="https://x.org/?a=1&amp;b=2">cat</a> '
    "walks</p>\n<ul><li>red house</li><li>the man <code>x = 1</code> walks</li></ul>"
)


def test_ctranslate2_gives_what_mtkit_gives(text_ckpt: Path, tmp_path: Path) -> None:
    pytest.importorskip("ctranslate2")
    from mtkit.export.ct2 import export_ct2

    ct2_dir = export_ct2(text_ckpt, tmp_path / "ct2")
    engines = [
        load_engine([str(text_ckpt)], engine_config("mtkit", beam=1)),
        load_engine([str(ct2_dir)], engine_config("ctranslate2", beam=1)),
    ]
    for options, texts in (
        (TextOptions(), TEXTS),
        (TextOptions(split=False), TEXTS),
        (TextOptions(format="html"), [DOCUMENT]),
    ):
        native, ct2 = (translate_texts(engine, texts, options) for engine in engines)
        assert native == ct2 and all(t.text for t in native)
    (html,) = translate_texts(engines[1], [DOCUMENT], TextOptions(format="html"))
    assert html.text.count("<b>") == 1 and "<code>x = 1</code>" in html.text


def test_a_leading_tag_applies_to_every_sentence(multi_run: Path) -> None:
    """The tiny multilingual model: de word by word, fr the same words reversed, cs a copy."""
    ckpt = str(multi_run / "checkpoint_best.pt")
    corpus = multi_run.parent / "valid.en-fr"  # the validation pairs it translates perfectly
    sources = Path(f"{corpus}.en").read_text("utf-8").splitlines()[:2]
    fr = Path(f"{corpus}.fr").read_text("utf-8").splitlines()[:2]
    text = "\n".join(sources)
    engine = load_engine([ckpt], TranslateConfig(device="cpu", threads=1, tgt_lang="cs"))
    tagged, plain = (
        t.text for t in translate_texts(engine, [f">>fr<< {text}", text], TextOptions())
    )
    assert tagged == "\n".join(fr)  # the tag, taken off the text, put before each sentence
    assert plain == text  # --tgt-lang cs: copies
