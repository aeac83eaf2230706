"""A checked request through the text layer (mtkit.serve.texts), units to a recording stub."""

from __future__ import annotations

from mtkit.config import SearchConfig, ServeConfig, TranslateConfig
from mtkit.engines import load_engine
from mtkit.engines.base import Translation
from mtkit.serve.api import TranslateRequest, parse_request
from mtkit.serve.texts import translate_request

PAIR = ("en", "de")


class Recorder:
    """Units translated as their upper case (rank k: with k appended); every call recorded,
    tagged as the server tags them."""

    def __init__(self, request: TranslateRequest, n: int = 2) -> None:
        self.request, self.n, self.calls = request, n, []

    def __call__(self, lines: list[str], numbers: list[int]) -> list[list[Translation]]:
        lines = self.request.tagged(lines)
        self.calls.append(lines)
        return [
            [
                Translation(f"{line.upper()}{'' if k == 0 else k}", 0.0, 0.0, 1)
                for k in range(self.n)
            ]
            if line.strip()
            else []
            for line in lines
        ]


def checked(pair: tuple[str, str] = PAIR, **fields) -> TranslateRequest:
    return parse_request(
        {"source": "en", "target": "de", **fields}, pair, SearchConfig(), ServeConfig()
    )


def test_split_texts_come_back_in_their_layout(ckpt: str) -> None:
    engine = load_engine([ckpt], TranslateConfig(device="cpu"))
    request = checked(q=["A man. The dog!\r\n\r\n  e", " ", "f"], alternatives=1)
    units = Recorder(request)
    answer = translate_request(request, engine.src_tokenizer, 60, units)
    assert units.calls == [["A man.", "The dog!", "e", "f"]]
    assert answer.texts == ["A MAN. THE DOG!\r\n\r\n  E", " ", "F"]
    assert answer.alternatives == [["A MAN.1 THE DOG!1\r\n\r\n  E1"], [" "], ["F1"]]
    assert (answer.units, answer.tokens) == (4, 4)


def test_unsplit_lines_are_sentences_their_line_breaks_kept(ckpt: str) -> None:
    engine = load_engine([ckpt], TranslateConfig(device="cpu"))
    request = checked(q="a b. c d\r\n\nsee https://x.org/a?b=1 now", split=False)
    units = Recorder(request, 1)
    answer = translate_request(request, engine.src_tokenizer, 60, units)
    assert units.calls == [["a b. c d", "see 1 now"]]  # the URL masked as a number; "" skipped
    assert answer.texts == ["A B. C D\r\n\nSEE https://x.org/a?b=1 NOW"]


def test_a_multilingual_server_tags_each_sentence(ckpt: str) -> None:
    engine = load_engine([ckpt], TranslateConfig(device="cpu"))
    request = checked(("en", "de,fr,cs"), q="A man. The dog\n>>cs<< d", target="fr")
    units = Recorder(request, 1)
    translate_request(request, engine.src_tokenizer, 60, units)
    assert units.calls == [[">>fr<< A man.", ">>fr<< The dog", ">>cs<< d"]]


def test_html_blocks_are_texts_and_tags_come_back(ckpt: str) -> None:
    engine = load_engine([ckpt], TranslateConfig(device="cpu"))
    post = '<p>Hello <a href="https://x.org/@bob" rel="nofollow">@bob</a>, how are you?</p>'
    request = checked(q=[post, "<p>One.</p><ul><li>Two</li></ul>"], format="html")
    units = Recorder(request, 1)
    answer = translate_request(request, engine.src_tokenizer, 60, units)
    assert units.calls[0][-2:] == ["One.", "Two"]
    assert answer.texts[1] == "<p>ONE.</p><ul><li>TWO</li></ul>"
    assert answer.texts[0].startswith('<p>HELLO <a href="https://x.org/@bob" rel="nofollow">')
    assert "@bob</a>" in answer.texts[0]
