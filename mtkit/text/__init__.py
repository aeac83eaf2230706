"""Text around the model: sentences cut out of a text with their layout kept, and put back.

The text layer sits above the engines and calls them; the engines stay sentence in, sentence
out. :class:`AnnotatedText` is a text with its sentence ranges (``gap sentence gap ... gap``),
:func:`segment` makes one, :func:`translate_text` translates whole texts through an engine.
"""

from mtkit.text.annotated import AnnotatedText
from mtkit.text.segment import segment
from mtkit.text.translate import (
    Segmented,
    TextTranslation,
    prepare,
    translate_text,
    translate_texts,
)

__all__ = [
    "AnnotatedText",
    "Segmented",
    "TextTranslation",
    "prepare",
    "segment",
    "translate_text",
    "translate_texts",
]
