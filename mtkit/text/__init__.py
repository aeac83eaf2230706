"""Text around the model: texts, documents and their markup cut into sentences, translated,
and put back, written once above the engines (the engines stay sentence in, sentence out).

:mod:`~mtkit.text.translate` is the entry point (:func:`translate_documents`, and
:func:`translate_texts` over an engine); :mod:`~mtkit.text.plan` cuts texts into units and puts
their translations back: a text's leading tag, its sentences (:mod:`~mtkit.text.segment`,
:class:`AnnotatedText`: ``gap sentence gap ... gap``), the spans that must come out verbatim
(found: :mod:`~mtkit.text.span_finding`; masked: :mod:`~mtkit.text.span_masking`), sentences
too long for the model or merged by the segmenter (:mod:`~mtkit.text.recut`), sentence ends
the writer left out (:mod:`~mtkit.text.sentence_ends`), word alignments
carried from units to texts (:mod:`~mtkit.text.aligned`), and HTML/XML
(:mod:`~mtkit.text.markup`, whose inline tags ride on the alignments: :mod:`~mtkit.text.inline`,
:mod:`~mtkit.text.carry`, :mod:`~mtkit.text.write`, the tag tables in :mod:`~mtkit.text.tags`).
"""

from mtkit.text.annotated import AnnotatedText
from mtkit.text.plan import TextOptions, TextTranslation, plan
from mtkit.text.segment import segment
from mtkit.text.translate import translate_documents, translate_text, translate_texts

__all__ = [
    "AnnotatedText",
    "TextOptions",
    "TextTranslation",
    "plan",
    "segment",
    "translate_documents",
    "translate_text",
    "translate_texts",
]
