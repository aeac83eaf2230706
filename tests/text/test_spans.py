"""spans: URLs, e-mails, numbers, mentions, hashtags, emoji and code found exactly, masked, and
put back verbatim exactly once whatever the model makes of the masked text."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from text_helpers import HOSTILE

from mtkit.engines.alignment import Alignment
from mtkit.engines.base import Engine
from mtkit.text.span_finding import Span, find_spans
from mtkit.text.span_masking import Masked, mask

# (sentence, its spans in order: text and kind); no span's text occurs elsewhere in its sentence
SENTENCES = [
    ("@alice thanks for the link!", [("@alice", "mention")]),
    (
        "Read the docs at https://mtkit.example.org/docs/spans.",
        [("https://mtkit.example.org/docs/spans", "url")],
    ),
    (
        "See https://en.wikipedia.org/wiki/Bracket_(disambiguation), then write.",
        [("https://en.wikipedia.org/wiki/Bracket_(disambiguation)", "url")],
    ),
    (
        "(see https://example.com/a?b=1&c=2#frag) for details",
        [("https://example.com/a?b=1&c=2#frag", "url")],
    ),
    ("Visit www.example.net/path today", [("www.example.net/path", "url")]),
    (
        "Mail ann.lee+mt@mail.example.com or bob@example.org.",
        [("ann.lee+mt@mail.example.com", "email"), ("bob@example.org", "email")],
    ),
    (
        "Follow @carol@mastodon.social and @dave_99 for news",
        [("@carol@mastodon.social", "mention"), ("@dave_99", "mention")],
    ),
    ("We had 1,000.5 liters, 1.000,5 in Germany.", [("1,000.5", "number"), ("1.000,5", "number")]),
    (
        "The meeting is at 10:30 on 2024-01-15 in room 7.",
        [("10:30", "number"), ("2024-01-15", "number"), ("7", "number")],
    ),
    ("Prices rose by 12.5% to $40 yesterday", [("12.5%", "number"), ("$40", "number")]),
    ("Temperatures of -5 and +3 degrees", [("-5", "number"), ("+3", "number")]),
    ("This is the 5th try with mp3 files and COVID-19 rules", []),
    (
        "Loving the sunshine #summer #Ferien2024",
        [("#summer", "hashtag"), ("#Ferien2024", "hashtag")],
    ),
    ("#1 fan of the #Größte team", [("1", "number"), ("#Größte", "hashtag")]),
    ("Great job 👍🏽 team", [("👍🏽", "emoji")]),
    ("Family time 👨‍👩‍👧 at the beach 🏖️🌊", [("👨‍👩‍👧", "emoji"), ("🏖️🌊", "emoji")]),
    ("Go 🇩🇪 go!", [("🇩🇪", "emoji")]),
    ("Press 1️⃣ to continue", [("1️⃣", "emoji")]),
    ("Run `pip install mtkit` first", [("`pip install mtkit`", "code")]),
    ("Call `f(x, y)`, then `g()`.", [("`f(x, y)`", "code"), ("`g()`", "code")]),
    ("Text © 2024 Apple™ and ↔ arrows, I ❤ NY", [("2024", "number")]),
    ("I ❤️ NY", [("❤️", "emoji")]),
    ("Email me at me@example.com 😀", [("me@example.com", "email"), ("😀", "emoji")]),
    (
        "The URL https://example.com/#section is not a #hashtag",
        [("https://example.com/#section", "url"), ("#hashtag", "hashtag")],
    ),
    (
        "Order 66 at https://shop.example/item/12345?ref=7 now",
        [("66", "number"), ("https://shop.example/item/12345?ref=7", "url")],
    ),
    ("love😀it", [("😀", "emoji")]),
    (
        "Contact @support or support@example.com today",
        [("@support", "mention"), ("support@example.com", "email")],
    ),
    ("RTL: שלום @user_1 مرحبا 3 עולם", [("@user_1", "mention"), ("3", "number")]),
    ("\ufeff@bom starts this line", [("@bom", "mention")]),
    ("Multiple 😀😀😀 in a row and 🤷‍♀️ shrugs", [("😀😀😀", "emoji"), ("🤷‍♀️", "emoji")]),
    ("Version v2.0 is out, see https://x.example/v2.", [("https://x.example/v2", "url")]),
    ("Sizes 10-20 and 1/2 inch", [("10-20", "number"), ("1/2", "number")]),
    (
        "`code` at the start, and a url at the end http://a.example",
        [("`code`", "code"), ("http://a.example", "url")],
    ),
    (
        "https://lead.example then words then 42",
        [("https://lead.example", "url"), ("42", "number")],
    ),
    ("Prices: €5, 6€ and 3 %", [("€5", "number"), ("6€", "number"), ("3", "number")]),
    (
        "Ping @alice, @bob and @carol!",
        [("@alice", "mention"), ("@bob", "mention"), ("@carol", "mention")],
    ),
    ("hi @a,@b there", [("@a", "mention"), ("@b", "mention")]),  # two placeholders in a word
    ("www.x.org", [("www.x.org", "url")]),
    ("Meet me at 9:00 or 21:30.", [("9:00", "number"), ("21:30", "number")]),
    (
        "@ann @ben 😀 call me at +49 30 1234567 or mailto:x@y.example #help 🆘 🆘",
        [
            ("@ann", "mention"),
            ("@ben", "mention"),
            ("😀", "emoji"),
            ("+49", "number"),
            ("30", "number"),
            ("1234567", "number"),
            ("mailto:x@y.example", "url"),
            ("#help", "hashtag"),
            ("🆘", "emoji"),
            ("🆘", "emoji"),
        ],
    ),
]


def expected(sentence: str, spans: list[tuple[str, str]]) -> list[Span]:
    out, at = [], 0
    for text, kind in spans:
        start = sentence.index(text, at)
        out.append(Span(start, start + len(text), kind))
        at = start + len(text)
    return out


def words(text: str, upper: bool = False) -> tuple[str, Alignment]:
    n = len(text.split())
    return (text.upper() if upper else text), tuple((i, i) for i in range(n))


def reverse(text: str) -> tuple[str, Alignment]:
    w = text.split()
    return " ".join(reversed(w)), tuple((i, len(w) - 1 - i) for i in range(len(w)))


def by_word(text: str, times: int) -> tuple[str, Alignment]:
    """Each word with a digit ``times`` times (0: dropped), the others once, aligned."""
    out, links = [], []
    for i, word in enumerate(text.split()):
        for _ in range(times if re.search("[0-9]", word) else 1):
            links.append((i, len(out)))
            out.append(word)
    return " ".join(out), tuple(links)


Translator = Callable[[str], tuple[str, "Alignment | None"]]
TRANSLATORS: dict[str, Translator] = {
    "identity": words,
    "reverse": reverse,
    "drop": lambda t: by_word(t, 0),
    "duplicate": lambda t: by_word(t, 2),
    "triple-glued": lambda t: (re.sub("[0-9]+", lambda m: m[0] * 3 + " " + m[0] + "x", t), None),
    "empty": lambda t: ("", ()),
    "upper": lambda t: words(t, upper=True),
    "junk-alignment": lambda t: ("ein zwei drei", ((0, 9), (-1, 0), (99, 1), (1, 2))),
}


def check(masked: Masked, translation: str, alignment: Alignment | None) -> str:
    """Every span verbatim exactly once, the alignment within the words (or None, or as it was
    for a sentence without spans), with the alignment and without; the restored text."""
    original = masked.original
    for links in (None, alignment):
        restored, realigned = masked.restore(translation, links)
        for span in masked.spans:
            text = original[span.start : span.end]
            assert restored.count(text) == original.count(text), (text, restored)
        if not masked.spans or links is None:
            assert realigned is links
        else:
            assert realigned is not None
            assert all(
                0 <= i < len(original.split()) and 0 <= j < len(restored.split())
                for i, j in realigned
            )
    return restored


@pytest.mark.parametrize("sentence, spans", SENTENCES, ids=range(len(SENTENCES)))
def test_find_spans_exactly(sentence: str, spans: list[tuple[str, str]]) -> None:
    assert find_spans(sentence) == expected(sentence, spans)


@pytest.mark.parametrize("name", list(TRANSLATORS))
def test_every_span_verbatim_exactly_once(name: str) -> None:
    for sentence, _ in SENTENCES:
        masked = mask(sentence)
        check(masked, *TRANSLATORS[name](masked.text))


@pytest.mark.parametrize("sentence", [s for s, _ in SENTENCES] + list(HOSTILE.values()))
def test_identity_round_trip(sentence: str) -> None:
    masked = mask(sentence)
    n = len(sentence.split())
    assert masked.restore(*words(masked.text)) == (sentence, tuple((i, i) for i in range(n)))
    assert masked.restore(masked.text, None) == (sentence, None)


def test_no_span_is_the_cheap_path() -> None:
    sentence = "A man rides a red bike, 5th in line with his mp3 player."
    masked = mask(sentence)
    assert masked.text is sentence and masked.spans == ()
    alignment = ((0, 1), (3, 0))
    out = masked.restore("Ein Mann", alignment)
    assert out[0] == "Ein Mann" and out[1] is alignment


def test_edges_are_cut_off_and_put_back_with_their_whitespace() -> None:
    masked = mask("@ann  thanks a lot!\t#mtkit 😀  https://x.example")
    assert masked.text == "thanks a lot!"
    out, alignment = masked.restore("vielen Dank!", ((0, 1), (1, 0), (2, 1)))
    assert out == "@ann  vielen Dank!\t#mtkit 😀  https://x.example"
    # the edge spans' words linked to their copies, the model's links re-indexed
    assert alignment == ((0, 0), (1, 2), (2, 1), (3, 2), (4, 3), (5, 4), (6, 5))
    assert masked.restore("", None) == ("@ann  #mtkit 😀  https://x.example", None)


def test_an_edge_glued_to_punctuation_is_not_glued_to_a_word() -> None:
    masked = mask("@bob: thanks!https://x.example")
    assert masked.text == ": thanks!"
    assert masked.restore(": danke!", None)[0] == "@bob: danke!https://x.example"
    assert masked.restore("danke", None)[0] == "@bob danke https://x.example"


def test_nothing_to_translate() -> None:
    for sentence in ["😀👍🏽 🇩🇪", "www.x.org", "@a, @b", "  42 %  ", "`x` 😀 #tag"]:
        masked = mask(sentence)
        assert masked.spans and masked.text == ""
        assert masked.restore("Unsinn 1 2", ((0, 0),)) == (
            sentence,
            tuple((i, i) for i in range(len(sentence.split()))),
        )


URL = "https://x.example/a"
SOURCE = f"Read the docs at {URL} today."  # masked: "Read the docs at 1 today."


@pytest.mark.parametrize(
    "translation, alignment, out",
    [
        (
            "Lies die Doku heute bei.",
            ((0, 0), (1, 1), (2, 2), (3, 4), (5, 3)),
            f"Lies die Doku heute bei {URL}.",
        ),  # after the word aligned to "at", before the "."
        (
            "Lies die Doku heute bei.",
            ((0, 0), (1, 1), (2, 2), (5, 3)),
            f"Lies die Doku {URL} heute bei.",
        ),  # before the word aligned to "today."
        ("Lies die Doku bei heute.", None, f"Lies die Doku bei {URL} heute."),  # 4 of 5 words
        ("Lies 1 die Doku bei 1 heute.", None, f"Lies die Doku bei {URL} heute."),  # the nearer
        ("Lies die Doku bei 11 heute.", None, f"Lies die Doku bei {URL} heute."),  # garbled
        ("Lies die Doku bei 1 heute 1.", None, f"Lies die Doku bei {URL} heute."),
        ("Lies die Doku (1) heute.", None, f"Lies die Doku ({URL}) heute."),  # copied: replaced
        ("", None, URL),
    ],
)
def test_where_a_dropped_placeholder_goes(
    translation: str, alignment: Alignment | None, out: str
) -> None:
    masked = mask(SOURCE)
    assert masked.text == "Read the docs at 1 today."
    assert masked.restore(translation, alignment)[0] == out


def test_a_placeholder_set_off_from_letters_is_glued_again() -> None:
    masked = mask("I❤️NY and love😀it")
    assert masked.text == "I 1 NY and love 2 it"
    assert masked.restore("Ich 1 NY und Liebe 2 es", None)[0] == "Ich❤️NY und Liebe😀es"
    assert masked.restore("Ich NY und Liebe es", None)[0] == "Ich ❤️ NY und Liebe 😀 es"


def test_placeholders_are_free_integers_and_plain_integers_their_own() -> None:
    masked = mask("I have 3 cats, an mp3 player, 2 dogs and 1.5 birds at 10:30")
    assert masked.text == "I have 1 cats, an mp3 player, 2 dogs and 4 birds at"  # 10:30 cut off
    assert masked.restore("Ich habe 1 Katzen, 4 Vögel, 2 Hunde", None)[0] == (
        "Ich habe 3 Katzen, 1.5 Vögel, 2 Hunde 10:30"
    )


def test_alignment_through_a_span_of_several_words() -> None:
    masked = mask("run `pip install x` now please")
    assert masked.text == "run 1 now please"
    out, alignment = masked.restore("bitte jetzt 1 starten", ((0, 3), (1, 2), (2, 1), (3, 0)))
    assert out == "bitte jetzt `pip install x` starten"
    assert alignment == ((0, 5), (1, 2), (2, 3), (3, 4), (4, 1), (5, 0))


# -- hypothesis: any sentence of words and spans, any translation ------------------------------

WORDS = [
    "a",
    "man",
    "rides",
    "the",
    "red",
    "bike",
    "and",
    "Straße",
    "naïve",
    "שלום",
    "مرحبا",
    "猫",
    ",",
    "!",
    "—",
]
SPANS = [
    ("https://ex.org/p?q=7", "url"),
    ("www.wiki.example/x_(y)", "url"),
    ("ann@ex.com", "email"),
    ("@alice", "mention"),
    ("@carol@toot.example", "mention"),
    ("#mtkit", "hashtag"),
    ("#ÜberTag", "hashtag"),
    ("😀", "emoji"),
    ("👨‍👩‍👧", "emoji"),
    ("🇩🇪", "emoji"),
    ("👍🏽", "emoji"),
    ("`a b`", "code"),
    ("`f(x)`", "code"),
    ("2718", "number"),
    ("3.14", "number"),
    ("10:30", "number"),
    ("$40", "number"),
    ("1,000", "number"),
]


@st.composite
def sentences(draw: st.DrawFn) -> tuple[str, list[tuple[str, str]]]:
    spans = draw(st.lists(st.sampled_from(SPANS), min_size=1, max_size=6, unique=True))
    tokens = draw(st.permutations(spans + draw(st.lists(st.sampled_from(WORDS), max_size=8))))
    end = draw(st.sampled_from(["", ".", "!"]))
    text = " ".join(t if isinstance(t, str) else t[0] for t in tokens) + end
    return text, [t for t in tokens if not isinstance(t, str)]


@st.composite
def translations(draw: st.DrawFn, text: str) -> str:
    """Words, the masked text's digit runs dropped, repeated, glued or garbled, in any order."""
    digits = re.findall("[0-9]+", text) or ["1"]
    pieces = st.one_of(
        st.sampled_from(WORDS + ["Haus", "(", ")", "."]),
        st.sampled_from(digits),
        st.sampled_from(digits).map(lambda d: d * 2),
        st.sampled_from(digits).map(lambda d: f"{d}x"),
    )
    return draw(st.sampled_from([" ", "", "  "])).join(draw(st.lists(pieces, max_size=12)))


@settings(max_examples=150, deadline=None)
@given(st.data(), sentences())
def test_any_translation_keeps_every_span_exactly_once(data: st.DataObject, case: tuple) -> None:
    sentence, spans = case
    assert [(sentence[s.start : s.end], s.kind) for s in find_spans(sentence)] == spans
    masked = mask(sentence)
    translation = data.draw(translations(masked.text))
    n, m = len(masked.text.split()), len(translation.split())
    alignment = data.draw(st.lists(st.tuples(st.integers(-1, n), st.integers(-1, m)), max_size=8))
    restored = check(masked, translation, tuple(alignment))
    for text, _ in spans:
        assert restored.count(text) == 1, (text, translation, restored)


@settings(max_examples=150, deadline=None)
@given(sentences(), st.text(max_size=40))
def test_arbitrary_text_keeps_every_span(case: tuple, translation: str) -> None:
    """A translation of anything at all: each span at least once (the text may hold it too)."""
    masked = mask(case[0])
    restored, _ = masked.restore(translation, None)
    for text, _ in case[1]:
        assert text in restored


# -- hostile lines, and the real (tiny) model --------------------------------------------------


@pytest.mark.parametrize(
    "sentence",
    [
        "",
        "   ",
        "😀",
        "😀👍🏽 🇩🇪 👨‍👩‍👧",
        "\ufeff",
        "\ufeff@bom hello 😀",
        "שלום @user_1 עולם 3 مرحبا https://x.example/ar",
        "\u202bمرحبا #وسم 42 عالم\u202c",
        " ".join(f"word{i} @u{i} {i}.5 https://x.example/{i} #t{i} 😀" for i in range(120)),
    ],
)
def test_hostile_lines(sentence: str) -> None:
    masked = mask(sentence)
    for name, translate in TRANSLATORS.items():
        restored = check(masked, *translate(masked.text))
        if name == "identity":
            assert restored == sentence


def spanned_line(n: int) -> str:
    """n times a word and five spans (a mention, a number, a URL, a hashtag, an emoji)."""
    return " ".join(f"word @u{i} {i}.5 https://x.example/{i} #t{i} 😀" for i in range(n))


def test_a_long_line_keeps_its_spans() -> None:
    sentence = spanned_line(150)
    assert len(sentence) > 5000
    masked = mask(sentence)
    assert len(masked.spans) == 5 * 150 and len(masked.text.split()) == 2 * 150 - 1
    check(masked, *by_word(masked.text, 0))


def test_masking_and_restoring_take_time_linear_in_the_line() -> None:
    """A line 8 times as long (2,400 x 6 words) takes well under 20 times as long to mask and
    to restore with and without the alignment, every span dropped by the translation (about 12
    times, CPU seconds; placing each dropped span by scanning the line made it 30)."""

    def seconds(n: int) -> float:
        masked = mask(spanned_line(n))
        translation, links = by_word(masked.text, 0)
        best = math.inf
        for _ in range(3):
            start = time.process_time()
            mask(spanned_line(n))
            masked.restore(translation, links)
            masked.restore(translation, None)
            best = min(best, time.process_time() - start)
        return best

    assert seconds(2400) < 20 * seconds(300)


@pytest.mark.usefixtures("one_thread")
def test_the_model_translates_the_masked_text(engine: Engine) -> None:
    sentences = [
        "@alice a cat runs to https://x.example/a 😀",
        "the dog 42 sits #cats",
        "run `ls -l` in the house",
        "a man 3 at 10:30 writes to me@example.com.",
        "😀 🇩🇪",
    ]
    masks = [mask(s) for s in sentences]
    hyps = engine.translate([m.text for m in masks if m.text])
    for masked in masks:
        hyp = hyps.pop(0) if masked.text else []
        restored, _ = masked.restore(hyp[0].text if hyp else "", None)
        for span in masked.spans:
            assert masked.original[span.start : span.end] in restored
    assert not hyps
