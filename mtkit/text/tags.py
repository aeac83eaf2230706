"""Which HTML elements break sentences, which wrap words, which are kept whole: data only.

The markup layer (:mod:`mtkit.text.markup`) reads these tables and nothing else decides by tag
name, so a tag moves from one behaviour to another by moving it between sets. Names are HTML's,
lower case; in XML they apply to elements of the XHTML namespace only (other XML elements are
classified by where they stand, see :mod:`mtkit.text.markup`). A tag in none of the sets is
classified like an XML element.
"""

from __future__ import annotations

# Elements that break segments: their content is translated apart from what comes before and
# after them. ``br`` is one too: a line break inside a paragraph is a sentence break to the text
# layer, so the two lines are translated apart and the ``<br>`` stays where it was.
BLOCK = frozenset(
    {
        *("html", "head", "body", "title", "main", "section", "article", "aside", "nav"),
        *("header", "footer", "address", "div", "p", "hr", "br", "pre", "blockquote"),
        *("h1", "h2", "h3", "h4", "h5", "h6", "hgroup", "ul", "ol", "li", "menu", "dir"),
        *("dl", "dt", "dd", "figure", "figcaption", "details", "summary", "dialog"),
        *("table", "caption", "colgroup", "thead", "tbody", "tfoot", "tr", "td", "th"),
        *("form", "fieldset", "legend", "select", "optgroup", "option", "datalist"),
        *("center", "noscript", "template", "frameset", "frame", "noframes", "search"),
    }
)

# Elements that wrap words inside a sentence: carried to the words of the translation that the
# alignment links to the words they wrapped.
INLINE = frozenset(
    {
        *("a", "abbr", "acronym", "b", "bdi", "bdo", "big", "cite", "data", "del", "dfn"),
        *("em", "font", "i", "ins", "mark", "q", "rb", "rp", "rt", "rtc", "ruby", "s"),
        *("small", "span", "strike", "strong", "sub", "sup", "time", "tt", "u", "nobr"),
        *("blink", "output", "meter", "progress", "slot", "label", "button"),
    }
)

# Elements with no content of their own (HTML's void elements): inside a sentence each rides on
# its neighbouring word, as a unit.
VOID = frozenset(
    {
        *("area", "base", "basefont", "bgsound", "br", "col", "embed", "hr", "img", "input"),
        *("keygen", "link", "meta", "param", "source", "track", "wbr", "image"),
    }
)

# Elements whose content is never translated and is kept byte for byte (code, program text,
# embedded documents); inside a sentence each is a unit riding on its neighbouring word.
VERBATIM = frozenset(
    {
        *("script", "style", "code", "pre", "textarea", "kbd", "samp", "var", "xmp"),
        *("listing", "plaintext", "svg", "math", "iframe", "object", "video", "audio"),
        *("canvas", "picture", "map"),
    }
)

# Elements with this class are not translated (as Google Translate and LibreTranslate honour it),
# as are elements with ``translate="no"`` (HTML, and ``its:translate`` in XML).
NO_TRANSLATE_CLASS = "notranslate"
NO_TRANSLATE_ATTRIBUTE = "translate"

XHTML_NAMESPACE = "http://www.w3.org/1999/xhtml"
