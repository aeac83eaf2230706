"""What the markup tests share: fake translators, hostile HTML snippets, and what to compare
(the multiset of a document's tags, its untranslated content as lxml writes it)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable

from lxml import etree

from mtkit.engines.alignment import Alignment
from mtkit.text.markup import parse, read_markup

Result = list[tuple[str, Alignment | None]]


def translate_markup(
    documents: list[str], kind: str, translate: Callable[[list[str]], Result]
) -> list[str]:
    """``documents`` read, their segments translated by ``translate`` in one call (none when
    there is no text at all), written back."""
    marked = read_markup(documents, kind)
    return marked.written(translate(marked.segments) if marked.runs else [])


def identity(texts: list[str]) -> Result:
    return [(t, tuple((i, i) for i in range(len(t.split())))) for t in texts]


def reverser(texts: list[str]) -> Result:
    out = []
    for text in texts:
        words = text.split()
        n = len(words)
        out.append((" ".join(reversed(words)), tuple((i, n - 1 - i) for i in range(n))))
    return out


def upper(texts: list[str]) -> Result:
    return [(t.upper(), tuple((i, i) for i in range(len(t.split())))) for t in texts]


def every_other(texts: list[str]) -> Result:
    out = []
    for text in texts:
        kept = text.split()[::2]
        out.append((" ".join(kept), tuple((2 * j, j) for j in range(len(kept)))))
    return out


def nothing(texts: list[str]) -> Result:
    return [("", ()) for _ in texts]


def unaligned(texts: list[str]) -> Result:
    """A different word count and no alignment: the proportional fallback."""
    return [(" ".join(["w&<"] * (len(t.split()) * 3 // 2 + 1)), None) for t in texts]


TRANSLATORS: dict[str, Callable[[list[str]], Result]] = {
    f.__name__: f for f in (identity, reverser, upper, every_other, nothing, unaligned)
}

LONG = "<p>" + " ".join(f"word{i} <b>bold {i}</b> <a href='/{i}'>link</a>," for i in range(160))
SNIPPETS = {
    "nested": "<p>Hello <b>bold <i>both <u>three</u></i></b> and <i>it</i>.</p>",
    "link": '<p>See <a href="https://x.org/?a=1&amp;b=2" title=\'say "hi" &amp; go\' '
    'rel="nofollow noopener">the <b>docs</b></a> now.</p>',
    "mastodon": '<p>Hello <a href="https://x" rel="nofollow">@bob</a> how are you?</p>'
    "<p>Second.</p>",
    "entities": "<p>Fish &amp; chips &lt;3 cost&nbsp;5&nbsp;€ &#x1F600; &quot;ok&quot; &gt;</p>",
    "comments": "<!-- head --><p>One <!-- inner --> two<!--x--></p><!-- tail -->",
    "script-style": '<p>Run <script>if (a < b && c) alert("x");</script> this</p>'
    "<style>p > b { color: red }</style>",
    "code-pre": "<p>Call <code>f(x) &amp;&amp; g</code> then</p><pre>  keep\n   <b>this</b> </pre>",
    "translate-no": '<p>Brand <span translate="no">Acme  Widgets</span> rocks</p>'
    '<div translate="no"><p>Not this</p></div>',
    "notranslate": '<p>Keep <b class="x notranslate">this bit</b> please</p>',
    "img-br": '<p>Look <img src="a.png" alt="an image"> here<br>and there<wbr>now</p>',
    "table": "<table><tr><th>Name</th><th>Age</th></tr><tr><td>Ann <i>B.</i></td><td>42</td></tr>"
    "</table>",
    "lists": "<ul>\n  <li>One <b>two</b></li>\n  <li>Three\n    <ol><li>Sub item</li></ol>\n"
    "  tail <em>end</em></li>\n</ul>\n",
    "headings": "<h1>Title <small>sub</small></h1>\n<h2>Part</h2>\n<p>Text.</p>",
    "broken": "<p>Hello <b>bold <i>both</b> italic?</i> end<p>next <p>para</div>",
    "broken-stray": "</i>stray <b>unclosed <a href=x>link",
    "empty": "",
    "blank": "  \n ",
    "no-tags": "Tom & Jerry are < friends > enemies",
    "document": '<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8">'
    "<title>My &amp; page</title><style>body{}</style></head>\n<body>\n<p>Hi <em>you</em>."
    "</p>\n</body>\n</html>",
    "document-no-doctype": "<html><body><p>Plain <b>doc</b></p></body></html>",
    "long": LONG,
    "rtl": '<p dir="rtl">שלום <b>עולם</b>. مرحبا <i>بالعالم</i> كيف حالك؟</p>',
    "emoji": "<p>I love it 😀 <b>👍🏽 really</b> 👨‍👩‍👧 family</p>",
    "in-word": "<p>un<b>believ</b>able <i>story</i>s<img src=x>!</p>",
    "wordless": '<p><a href="/"><img src="logo.png"></a> Home <span> </span>page <b></b></p>',
    "block-in-inline": '<a href="/card"><div>Card <b>title</b></div><p>Body</p></a> after',
    "custom": "<my-card>Hello <x-emoji>smile</x-emoji> there</my-card>",
    "tails": "<p><b>x</b> tail one <i>y</i> tail two<br>after break</p>",
    "bom-crlf": "\ufeff<p>Line one\r\n  line two</p>\r\n<p>x</p>",
}
VERBATIM = {"script", "style", "code", "pre"}
MARKS = {etree.Comment: "<!--", etree.PI: "<?", etree.Entity: "&"}  # nodes that are not elements


def tags(document: str, kind: str = "html") -> Counter:
    """The multiset of a parsed document's nodes: (tag, sorted attributes), comments, ..."""
    parsed = parse(document, kind, 1)
    if parsed.root is None:
        return Counter()
    out: Counter = Counter()
    whole = parsed.whole or kind == "xml"  # a fragment's <body> is lxml's, not the input's
    for node in parsed.root.iter() if whole else parsed.root.iterdescendants():
        if isinstance(node.tag, str):
            out[node.tag, tuple(sorted(node.attrib.items()))] += 1
        else:
            out[MARKS[node.tag], node.text] += 1
    return out


def verbatim(document: str) -> list[str]:
    """What must not be translated, as lxml writes it: the outermost such elements."""
    root = parse(document, "html", 1).root
    found = []
    for element in [] if root is None else root.iter():
        if not isinstance(element.tag, str) or any(e in found for e in element.iterancestors()):
            continue
        no = element.get("translate") == "no" or "notranslate" in element.get("class", "")
        if element.tag in VERBATIM or no:
            found.append(element)
    return sorted(
        etree.tostring(e, method="html", encoding="unicode", with_tail=False) for e in found
    )


def scrambler(seed: int) -> Callable[[list[str]], Result]:
    """A translator of random words, lengths and alignments (none at all, one time in five)."""
    rng = random.Random(seed)

    def translate(texts: list[str]) -> Result:
        out: Result = []
        for text in texts:
            source = text.split()
            words = [rng.choice([*source, "new"]) for _ in range(rng.randint(0, len(source) + 3))]
            pairs = [(rng.randrange(len(source)), j) for j in range(len(words))]
            pairs += [(rng.randrange(len(source)), rng.randrange(len(words) or 1))] * 2
            kept = tuple(p for p in pairs if rng.random() < 0.8 and p[1] < len(words))
            out.append((" ".join(words), None if rng.random() < 0.2 else kept))
        return out

    return translate
