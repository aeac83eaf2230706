"""Markup: HTML and XML documents translated with their tags carried through the alignment.

Fake translators (identity, reverser, upper-case, every other word, empty, no alignment) run
over hostile snippets; every output must parse back to the same elements with the same
attributes, keep untranslated content byte for byte, and be lxml's own writing (parsing it and
writing it again changes nothing)."""

from __future__ import annotations

import pytest
from lxml import etree
from markup_helpers import (
    SNIPPETS,
    TRANSLATORS,
    Result,
    every_other,
    identity,
    nothing,
    reverser,
    scrambler,
    tags,
    translate_markup,
    upper,
    verbatim,
)

from mtkit.errors import MtkitError
from mtkit.text.markup import normalised, parse


@pytest.mark.parametrize("translator", list(TRANSLATORS))
@pytest.mark.parametrize("name", list(SNIPPETS))
def test_round_trip_keeps_every_tag(name: str, translator: str) -> None:
    source = SNIPPETS[name]
    [out] = translate_markup([source], "html", TRANSLATORS[translator])
    assert tags(out) == tags(source)  # same elements, attributes, comments: each exactly once
    assert normalised(out, "html") == out  # well-formed: lxml's own writing, nothing to repair
    assert verbatim(out) == verbatim(source)
    if translator == "identity":
        assert out == normalised(source, "html")


@pytest.mark.parametrize("translator", ["reverser", "every_other"])
def test_the_outputs_read_by_a_strict_xml_parser(translator: str) -> None:
    """Each output, through lxml to XML and back with a strict parser, has the same tags."""
    for out in translate_markup(list(SNIPPETS.values()), "html", TRANSLATORS[translator]):
        parsed = parse(out, "html", 1)
        if parsed.root is not None:
            strict = etree.fromstring(etree.tostring(parsed.root))
            nodes = strict.iter() if parsed.whole else strict.iterdescendants()
            assert sum(isinstance(n.tag, str) for n in nodes) == sum(
                n for (tag, _), n in tags(out).items() if not tag.startswith("<")
            )


@pytest.mark.parametrize("seed", range(40))
def test_random_translations_keep_every_tag(seed: int) -> None:
    """Words dropped, repeated, reordered, unaligned or aligned to several: every element still
    comes back exactly once, and the output is well-formed."""
    outs = translate_markup(list(SNIPPETS.values()), "html", scrambler(seed))
    for source, out in zip(SNIPPETS.values(), outs, strict=True):
        assert tags(out) == tags(source)
        assert normalised(out, "html") == out
        assert verbatim(out) == verbatim(source)


def test_one_call_for_all_documents_with_the_segment_texts() -> None:
    calls: list[list[str]] = []

    def spy(texts: list[str]) -> Result:
        calls.append(texts)
        return identity(texts)

    source = "<p>Hello <b>world</b>.</p><ul><li>One</li><li>Two</li></ul>"
    assert translate_markup([source], "html", spy) == [source]
    assert calls == [["Hello world.", "One", "Two"]]
    calls.clear()
    outs = translate_markup(list(SNIPPETS.values()), "html", spy)
    assert len(calls) == 1
    assert outs == [translate_markup([s], "html", identity)[0] for s in SNIPPETS.values()]


def test_no_call_without_text() -> None:
    def fail(texts: list[str]) -> Result:
        raise AssertionError("called")

    blank = ["", "  ", "<p> </p>", "<script>x</script>", "<!-- c -->", "<img src=x>"]
    assert translate_markup(blank, "html", fail) == [normalised(b, "html") for b in blank]


def test_reverser_moves_the_tags_with_the_words() -> None:
    [out] = translate_markup(["<p>a <b>b c</b> d</p>"], "html", reverser)
    assert out == "<p>d <b>c b</b> a</p>"


def test_upper_case_keeps_the_layout_and_the_tails() -> None:
    source = "<p>\n  <b>x</b> tail one <i>y</i>\n  tail two\n</p>\n<p>Z</p>"
    [out] = translate_markup([source], "html", upper)
    assert out == "<p>\n  <b>X</b> TAIL ONE <i>Y</i>\n  TAIL TWO\n</p>\n<p>Z</p>"


def test_segments_collapse_whitespace_and_keep_their_edges() -> None:
    calls: list[list[str]] = []

    def spy(texts: list[str]) -> Result:
        calls.append(texts)
        return reverser(texts)

    [out] = translate_markup(["<div>\n  <p>\n    One\n    two\r\n</p>\n</div>"], "html", spy)
    assert calls == [["One two"]]
    assert out == "<div>\n  <p>\n    two One\n</p>\n</div>"  # the parser reads \r\n as \n


def test_a_split_element_keeps_its_longest_run() -> None:
    def reorder(texts: list[str]) -> Result:
        return [("a d b c", ((0, 0), (3, 1), (1, 2), (2, 3)))]

    [out] = translate_markup(["<p><b>a b c</b> d</p>"], "html", reorder)
    assert out == "<p>a d <b>b c</b></p>"


def test_unaligned_words_take_the_tags_their_neighbours_share() -> None:
    def insert(texts: list[str]) -> Result:
        return [("a b new c new", ((0, 0), (1, 1), (2, 3)))]

    [out] = translate_markup(["<p>a <b>b c</b></p>"], "html", insert)
    assert out == "<p>a <b>b new c new</b></p>"


def test_a_word_aligned_to_several_takes_the_leftmost() -> None:
    def merge(texts: list[str]) -> Result:
        return [("Nueva-York queda", ((0, 0), (1, 0), (2, 1)))]

    [out] = translate_markup(["<p><b>New</b> York <i>stays</i></p>"], "html", merge)
    assert out == "<p><b>Nueva-York</b> <i>queda</i></p>"


def test_without_alignment_target_words_map_proportionally() -> None:
    source = ["<p>a <b>b c</b> d</p>"]
    same = translate_markup(source, "html", lambda t: [("w x y z", None)])
    assert same == ["<p>w <b>x y</b> z</p>"]
    twice = translate_markup(source, "html", lambda t: [("p q r s t u v w", None)])
    assert twice == ["<p>p q <b>r s t u</b> v w</p>"]


def test_inside_a_word() -> None:
    [out] = translate_markup(["<p>foo<img src=x>bar baz</p>"], "html", upper)
    assert out == '<p>FOOBAR<img src="x"> BAZ</p>'  # a changed word: the atom rides after it

    def move(texts: list[str]) -> Result:
        return [("undo a b", ((2, 0), (0, 1), (1, 2)))]

    [out] = translate_markup(["<p><i>a b un</i>do</p>"], "html", move)
    assert out == "<p>undo <i>a b</i></p>"  # an unchanged word, its pieces no longer apart


def test_an_inline_element_holding_blocks_is_a_container() -> None:
    calls: list[list[str]] = []

    def spy(texts: list[str]) -> Result:
        calls.append(texts)
        return upper(texts)

    [out] = translate_markup([SNIPPETS["block-in-inline"]], "html", spy)
    assert calls == [["Card title", "Body", "after"]]
    assert out == '<a href="/card"><div>CARD <b>TITLE</b></div><p>BODY</p></a> AFTER'


def test_dropped_words_leave_their_elements_empty() -> None:
    [out] = translate_markup(
        ['<p>Go <a href="/x"><img src="i.png"> here</a> now</p>'], "html", every_other
    )
    assert out == '<p>Go<a href="/x"><img src="i.png"></a> now</p>'


def test_fragments_stay_fragments_and_documents_documents() -> None:
    outs = translate_markup([SNIPPETS["mastodon"], SNIPPETS["document"]], "html", upper)
    assert outs[0] == (
        '<p>HELLO <a href="https://x" rel="nofollow">@BOB</a> HOW ARE YOU?</p><p>SECOND.</p>'
    )
    assert (
        outs[1].startswith("<!DOCTYPE html>\n<html") and "<title>MY &amp; PAGE</title>" in outs[1]
    )
    [bare] = translate_markup([SNIPPETS["document-no-doctype"]], "html", upper)
    assert bare == "<html><body><p>PLAIN <b>DOC</b></p></body></html>"


def test_documents_with_nothing_to_translate_come_back_as_they_are() -> None:
    empty = ["<!DOCTYPE html>", "<!doctype html><!-- x -->", " \n"]
    assert translate_markup(empty, "html", upper) == empty
    xhtml = '<?xml version="1.0"?>\n<!DOCTYPE html>\n<html><body><p>x y</p></body></html>'
    [out] = translate_markup([xhtml], "html", upper)
    assert out == '<?xml version="1.0"?>\n<!DOCTYPE html>\n<html><body><p>X Y</p></body></html>'


def test_a_line_break_breaks_segments() -> None:
    calls: list[list[str]] = []

    def spy(texts: list[str]) -> Result:
        calls.append(texts)
        return reverser(texts)

    [out] = translate_markup(["<p>line one<br>line <i>two</i> here</p>"], "html", spy)
    assert calls == [["line one", "line two here"]]
    assert out == "<p>one line<br>here <i>two</i> line</p>"


def test_plain_text_comes_back_escaped() -> None:
    assert translate_markup(["Tom & Jerry < 3"], "html", upper) == ["TOM &amp; JERRY &lt; 3"]
    assert translate_markup(["x"], "html", lambda t: [("a<b>&c", None)]) == ["a&lt;b&gt;&amp;c"]


def test_entities_come_back_escaped_or_as_characters() -> None:
    [out] = translate_markup([SNIPPETS["entities"]], "html", identity)
    assert out == '<p>Fish &amp; chips &lt;3 cost\xa05\xa0€ 😀 "ok" &gt;</p>'
    [link] = translate_markup([SNIPPETS["link"]], "html", nothing)
    assert 'href="https://x.org/?a=1&amp;b=2" title=\'say "hi" &amp; go\'' in link


def test_bom_is_kept() -> None:
    [out] = translate_markup([SNIPPETS["bom-crlf"]], "html", upper)
    assert out == "\ufeff<p>LINE ONE\n  LINE TWO</p>\n<p>X</p>"


def test_wrong_number_of_translations_is_refused() -> None:
    with pytest.raises(ValueError, match="0 translations for 1 segments"):
        translate_markup(["<p>x</p>"], "html", lambda texts: [])
    with pytest.raises(MtkitError, match="markup format 'md'"):
        translate_markup(["x"], "md", identity)


DOCBOOK = (
    '<?xml version="1.0" encoding="ISO-8859-1"?>\n<!-- c -->\n<book xmlns="http://docbook.org/ns/'
    'docbook" xmlns:xl="http://www.w3.org/1999/xlink">\n  <section>\n    <title>Intro</title>\n'
    '    <para>Use <command>ls -l</command> to <emphasis role="strong">list <link xl:href="a&amp;'
    'b">files</link></emphasis>.</para>\n    <programlisting its:translate="no" xmlns:its="http'
    '://www.w3.org/2005/11/its">ls -l &gt; out</programlisting>\n  </section>\n</book>\n'
)
XLIFF = (
    '<xliff version="1.2"><file><body><trans-unit id="1"><source>Hello <g id="1">big</g> world'
    '<x id="2"/>!</source><target/></trans-unit></body></file></xliff>'
)


NAMESPACES = (
    '<d xmlns:x="urn:x"><p>Hi <x:b xmlns:y="urn:y" y:a="1">bold <y:i>it</y:i></x:b> &amp; '
    "<?pi z?> end<!--c--></p></d>"
)
SOURCES = [DOCBOOK, XLIFF, NAMESPACES]


@pytest.mark.parametrize("translator", list(TRANSLATORS))
@pytest.mark.parametrize("source", SOURCES, ids=["docbook", "xliff", "namespaces"])
def test_xml_round_trip(source: str, translator: str) -> None:
    [out] = translate_markup([source], "xml", TRANSLATORS[translator])
    assert tags(out, "xml") == tags(source, "xml")
    assert normalised(out, "xml") == out
    assert "<programlisting" not in out or ">ls -l &gt; out</programlisting>" in out
    if translator == "identity":
        assert out == normalised(source, "xml")


@pytest.mark.parametrize("seed", range(10))
def test_random_xml_translations_keep_every_tag(seed: int) -> None:
    for source, out in zip(SOURCES, translate_markup(SOURCES, "xml", scrambler(seed)), strict=True):
        assert tags(out, "xml") == tags(source, "xml")
        assert normalised(out, "xml") == out


def test_xml_segments_follow_mixed_content() -> None:
    calls: list[list[str]] = []

    def spy(texts: list[str]) -> Result:
        calls.append(texts)
        return upper(texts)

    [out] = translate_markup([DOCBOOK, XLIFF], "xml", spy)[1:]
    assert calls == [["Intro", "Use ls -l to list files.", "Hello big world!"]]
    assert '<source>HELLO <g id="1">BIG</g> WORLD!<x id="2"/></source>' in out
    assert normalised(DOCBOOK, "xml").startswith("<?xml version='1.0' encoding='UTF-8'?>\n<!--")


def laughs(depth: int) -> str:
    """A DTD whose entity lol{depth - 1} expands to 10 ** (depth - 1) lols."""
    return "".join(
        f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10 if i else "lol"}">' for i in range(depth)
    )


def test_entity_references_in_text_stay_unexpanded() -> None:
    source = f"<!DOCTYPE lolz [{laughs(4)}]>\n<lolz>Say &lol3; now</lolz>"
    [out] = translate_markup([source], "xml", reverser)
    assert out.endswith("<lolz>&lol3;now Say</lolz>") and len(out) < 2 * len(source)


@pytest.mark.parametrize("where", ["text", "attribute"])
def test_billion_laughs_does_not_expand(where: str) -> None:
    """Kept as a reference, or refused on one line (libxml2 refuses the amplification)."""
    body = "<lolz>Say &lol9; now</lolz>" if where == "text" else '<lolz a="&lol9;">x</lolz>'
    try:
        [out] = translate_markup([f"<!DOCTYPE lolz [{laughs(10)}]>\n{body}"], "xml", identity)
    except MtkitError as err:
        assert "document 1: not well-formed XML" in str(err) and "\n" not in str(err)
    else:
        assert where == "text" and out.endswith(body) and "lollol" not in out


def test_external_entities_are_not_read() -> None:
    xxe = '<!DOCTYPE foo [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>\n'
    [out] = translate_markup([xxe + "<foo>Hi &xxe; there</foo>"], "xml", upper)
    assert out.endswith("<foo>HI &xxe; THERE</foo>") and "root:" not in out
    with pytest.raises(MtkitError, match="external entity"):
        translate_markup([xxe + '<foo a="&xxe;">Hi</foo>'], "xml", upper)


@pytest.mark.parametrize("bad", ["<a><b></a>", "<a>&nope;</a>", "text only", "<a x='1' x='2'/>"])
def test_malformed_xml_is_one_line_naming_the_document(bad: str) -> None:
    with pytest.raises(MtkitError, match="document 2: not well-formed XML") as err:
        translate_markup(["<ok>fine</ok>", bad], "xml", identity)
    assert "\n" not in str(err.value)
