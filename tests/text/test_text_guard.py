"""The decoding guard through the text layer: a text says how the guard translated its
sentences (TextTranslation.guard), and spans masked in a sentence survive its retries."""

from __future__ import annotations

from guard_helpers import Scripted, caps_garbage

from mtkit.text import TextOptions, translate_texts


def test_a_text_names_how_its_sentences_were_guarded() -> None:
    texts = ["A DOG RUNS. a cat sits.", "a man.", "THE BALL. The Red Ball Plays. a dog."]
    engine = Scripted(caps_garbage)
    found = translate_texts(engine, texts, TextOptions())
    assert [t.guard for t in found] == ["recased", None, "recased"]
    assert found[0].text == "DE: A DOG RUNS. de: a cat sits."
    assert found[2].text == "DE: THE BALL. De: The Red Ball Plays. de: a dog."


def test_spans_survive_a_retry() -> None:
    """A masked span (a placeholder digit) is lowercased with its sentence and restored."""
    engine = Scripted(caps_garbage)
    [found] = translate_texts(engine, ["SEE https://Example.org/X NOW"], TextOptions())
    assert found.text == "DE: SEE https://Example.org/X NOW" and found.guard == "recased"


def test_the_last_resort_is_named_with_the_others() -> None:
    engine = Scripted(lambda s: "GGGGGGGGGGGG" if s.startswith("z") else caps_garbage(s))
    [found] = translate_texts(engine, ["A DOG. zebra."], TextOptions())
    assert found.guard == "recased,squeezed" and found.text == "DE: A DOG. GGG"
