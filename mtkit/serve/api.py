"""LibreTranslate's request and response shapes, and every check on a request, without HTTP.

``POST /translate`` takes ``{"q": "text" or ["a", "b"], "source": "en", "target": "de",
"format": "text" or "html", "alternatives": N, "api_key": "..."}`` as JSON, as an HTML form, as
a multipart form or in the query string of the POST (:func:`mtkit.serve.bodies.decode_request`)
and answers
``{"translatedText": "..."}`` (a list for a list), with ``"alternatives"`` (N more
translations from the n-best list) when asked. mtkit adds ``"beam"`` (an int) to choose the
beam per request, and ``"split"`` (a boolean, default true) to choose how a text is read.
Unknown fields are ignored, as LibreTranslate does. Text must be text: a JSON string holding a
lone surrogate (``"\\ud800"``), which no UTF-8 can carry, is refused naming its field.

With ``"split": true`` (the default) each text is cut into sentences (:mod:`mtkit.text`: line
breaks always end one), each sentence is translated on its own, and the translations are put
back into the text's own whitespace and line breaks (``\\r\\n`` and indentation kept). With
``"split": false`` each line of a text is translated as one sentence, and the line breaks are
kept as they were. A multilingual model's server (several target languages,
``en``-``de,fr,cs``: issue 16) takes any of them as ``"target"`` and puts its tag ``>>xx<<``
before every line (every sentence). ``"format": "html"``: each text is an HTML document or
fragment, its blocks translated as texts and its inline markup carried to the translated words
(:mod:`mtkit.text.markup`). URLs, e-mail addresses, numbers, mentions, hashtags, emoji and
inline code come back verbatim in every format (:mod:`mtkit.text.span_masking`). How a request is
translated: :mod:`mtkit.serve.texts`.

``"source": "auto"``: each text's language is identified (:func:`mtkit.text.langid.
source_language`; of an HTML text, the words that would be translated) and answered per text
as ``"detectedLanguage": {"confidence": 97.0, "language": "en"}`` (a list for a list). A text
the model does not translate from is refused, naming it: ``q: item 1 is in French (fr); this
server translates en-de only`` (items counted from 0, as in the other messages about ``q``).
Short texts are not refused: one with fewer than 10 letters outside URLs, numbers, emoji, ...
is taken to be in the model's source language, as is one whose source language the identifier
finds at least a twentieth as likely as the best (the figures behind the rule are in
:mod:`mtkit.text.langid`). The identification runs here, on the event loop: 0.3-0.5 ms a
caption, a text read up to its first 2,000 characters.

A text whose translation degenerated and was made again by the decoding guard
(:mod:`mtkit.engines.guard`) is named in ``"guard"``, beside ``translatedText``: per text how
(``"lowercased"``...), null for the others; the field is there only when the guard fired.

Problems raise :class:`ApiError`: an HTTP status and a JSON body that names the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mtkit.config import SearchConfig, ServeConfig
from mtkit.data.tags import tag, tag_lines
from mtkit.errors import MtkitError
from mtkit.serve.errors import ApiError
from mtkit.serve.fields import (
    bool_field,
    fraction_field,
    glossary_field,
    int_field,
    text_field,
    texts_field,
)
from mtkit.serve.languages import language_name
from mtkit.text.glossary import Glossary
from mtkit.text.langid import source_language

MAX_BEAM = 16  # a request may ask for any beam up to this
FORMATS = ("text", "html")  # as LibreTranslate's


@dataclass
class TranslateRequest:
    """A checked request: its texts (the text layer cuts them into what the engine
    translates, :mod:`mtkit.serve.texts`) and the search to use."""

    texts: list[str]
    many: bool  # q was a list
    alternatives: int
    search: SearchConfig
    detected: list[tuple[str, float]] | None  # source "auto": per text, language and confidence
    split: bool = False  # texts cut into sentences (see sentences())
    source: str = ""  # the language the texts are in (the segmenter's rules)
    target: str = ""  # a multilingual model's target, "" for a bilingual one
    tags: list[str] | None = None  # a multilingual model's target tags
    format: str = "text"  # text | html
    scores: bool = False  # answer each text's confidence
    flag_below: float | None = None  # answer which texts' confidence is below this
    glossary: list[tuple[str, str]] = field(default_factory=list)  # the request's own terms

    def tagged(self, lines: list[str]) -> list[str]:
        """``lines`` with a multilingual model's target tag (unchanged for a bilingual one)."""
        if not self.tags:
            return lines
        try:
            return tag_lines(lines, self.target, self.tags)
        except MtkitError as err:
            raise ApiError(400, "q", str(err)) from None


def request_glossary(server: Glossary | None, pairs: list[tuple[str, str]]) -> Glossary | None:
    """The terms a request's sentences keep: the server's glossary, its own pairs replacing
    the server's for the same source terms (matched as the server's are)."""
    if not pairs:
        return server
    return server.extended(pairs) if server is not None else Glossary(pairs)


def split_lines(text: str) -> list[str]:
    """A text's lines: split on ``\\n``, a ``\\r`` before it dropped."""
    return [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]


def parse_request(
    data: dict[str, Any], pair: tuple[str, str], search: SearchConfig, config: ServeConfig
) -> TranslateRequest:
    """Check a request's fields against the model's ``pair`` and the limits in ``config``;
    ``search`` is the server's default, changed by ``beam`` and ``alternatives``."""
    texts, many = texts_field(data)
    chars = sum(len(text) for text in texts)
    if chars > config.max_chars:
        raise ApiError(400, "q", f"{chars} characters, more than the limit of {config.max_chars}")
    lines = [line for text in texts for line in split_lines(text)]
    if len(lines) > config.max_lines:
        raise ApiError(400, "q", f"{len(lines)} lines, more than the limit of {config.max_lines}")
    source, target = text_field(data, "source"), text_field(data, "target")
    targets = pair[1].split(",")  # a multilingual model (issue 16): several, comma-separated
    if source not in (pair[0], "auto") or target not in targets:
        wrong = "source" if source not in (pair[0], "auto") else "target"
        raise ApiError(
            400, wrong, f"this server translates {pair[0]}-{pair[1]} only, not {source}-{target}"
        )
    form = text_field(data, "format", "text")
    if form not in FORMATS:
        raise ApiError(400, "format", f"must be 'text' or 'html', got {form!r}")
    beam = int_field(data, "beam", search.width, 1, MAX_BEAM)
    alternatives = int_field(data, "alternatives", 0, 0, beam - 1)
    if alternatives and form != "text":
        raise ApiError(400, "alternatives", f"given for format 'text' only, not {form!r}")
    flag_below = fraction_field(data, "flag_below")
    scores = bool_field(data, "scores", False) or flag_below is not None
    if scores and form != "text":
        which = "flag_below" if "flag_below" in data else "scores"
        raise ApiError(
            400,
            which,
            f"given for format 'text' only, not {form!r} (a document's words move with its markup)",
        )
    glossary = glossary_field(data, config.max_glossary_terms)
    kind = search.constraints or ("unordered" if glossary else "")  # batched with its kind
    try:
        search = search.replace(beam=beam, nbest=alternatives + 1, scores=scores, constraints=kind)
    except MtkitError as err:
        raise ApiError(400, "beam", str(err)) from None
    split = bool_field(data, "split", True)
    tags = [tag(t) for t in targets] if len(targets) > 1 else None
    if tags:  # each line gets the target's tag (or keeps its own): refused tags named here
        try:
            tag_lines(lines, target, tags)
        except MtkitError as err:
            raise ApiError(400, "q", str(err)) from None
    detected = _detected(texts, many, pair, form) if source == "auto" else None
    return TranslateRequest(
        texts,
        many,
        alternatives,
        search,
        detected,
        split,
        pair[0].split(",")[0],
        target if tags else "",
        tags,
        form,
        scores,
        flag_below,
        glossary,
    )


def _detected(
    texts: list[str], many: bool, pair: tuple[str, str], form: str
) -> list[tuple[str, float]]:
    """Each text's language for ``"source": "auto"``; a text in a language the model does
    not translate from is refused, by its index in ``q``."""
    found = []
    for i, text in enumerate(texts):
        guess = source_language(text, pair[0].split(","), form)
        if not guess.accepted:
            name, code = language_name(guess.language), guess.language
            language = f"{name} ({code})" if name != code else code
            which = f"item {i}" if many else "the text"
            raise ApiError(
                400,
                "q",
                f"{which} is in {language}; this server translates {pair[0]}-{pair[1]} only",
            )
        found.append((guess.language, guess.confidence))
    return found


# ---------------------------------------------------------------------------------------------
# The answer


def build_response(
    request: TranslateRequest,
    texts: list[str],
    alternatives: list[list[str]],
    confidence: list[float] | None = None,
    guard: list[str | None] | None = None,
) -> dict[str, Any]:
    """LibreTranslate's answer: a translation per text (and its ``alternatives``, per text;
    for ``"source": "auto"`` its ``detectedLanguage``); mtkit's ``confidence`` per text when
    asked (rounded to 4 digits), and with ``flag_below`` the texts below it (``flagged``);
    mtkit's ``guard`` per text (how the decoding guard translated it, or None) only where
    the guard fired on one of the texts."""
    answer: dict[str, Any] = {"translatedText": texts if request.many else texts[0]}
    if request.alternatives:
        answer["alternatives"] = alternatives if request.many else alternatives[0]
    if request.scores and confidence is not None:
        rounded = [round(value, 4) for value in confidence]
        answer["confidence"] = rounded if request.many else rounded[0]
        if request.flag_below is not None:
            low = [i for i, value in enumerate(confidence) if value < request.flag_below]
            answer["flagged"] = low if request.many else bool(low)
    if guard is not None and any(guard):
        answer["guard"] = guard if request.many else guard[0]
    if request.detected is not None:
        detected = [
            {"confidence": confidence, "language": language}
            for language, confidence in request.detected
        ]
        answer["detectedLanguage"] = detected if request.many else detected[0]
    return answer
