"""Target-language tags for multilingual models: Marian's ``>>xx<<`` convention.

A multilingual dataset joins several parallel corpora, each given as ``SRC-TGT=SOURCE``
(``--pair en-fr=data/train``). Every source sentence starts with the tag of its target
language, ``>>fr<<``, a user-defined sentencepiece symbol (one piece, never split), so one
model learns every direction and is told which one to take (Johnson et al. 2017, as in
Marian/OPUS-MT). A tag is encoded as Hugging Face's MarianTokenizer encodes it: the tag's id,
then the pieces of the rest of the line, with no ``▁`` piece between them
(:meth:`mtkit.data.tokenizer.Tokenizer.encode`).

>>> tag("fr"), split_tag(">>fr<< A dog."), split_tag("A dog.")
('>>fr<<', ('>>fr<<', ' A dog.'), ('', 'A dog.'))
>>> parse_pair("en-fr=data/train")
Direction(src='en', tgt='fr', source='data/train')
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from mtkit.data.lines import Numbers, line_numbers
from mtkit.errors import MtkitError

TAG = re.compile(r"^>>[^\s<>]+<<$")
_LANG = re.compile(r"^[A-Za-z0-9_]+$")


def tag(lang: str) -> str:
    """The tag of target language ``lang``."""
    return f">>{lang}<<"


def tag_language(piece: str) -> str:
    """``>>fr<<`` -> ``fr``."""
    return piece[2:-2]


def split_tag(text: str) -> tuple[str, str]:
    """(leading language code, the rest) as MarianTokenizer splits a line; ('', text) if none."""
    if text.startswith(">>") and (end := text.find("<<")) != -1:
        return text[: end + 2], text[end + 2 :]
    return "", text


class Direction(NamedTuple):
    """One corpus of a multilingual dataset: its languages and its SOURCE (as --train takes)."""

    src: str
    tgt: str
    source: str

    @property
    def name(self) -> str:
        return f"{self.src}-{self.tgt}"


def parse_pair(spec: str, option: str = "--pair") -> Direction:
    """``SRC-TGT=SOURCE`` -> Direction; a one-line error for anything else."""
    langs, sep, source = spec.partition("=")
    src, dash, tgt = langs.partition("-")
    if not (sep and dash and source and _LANG.match(src) and _LANG.match(tgt)):
        raise MtkitError(f"{option} {spec}: expected SRC-TGT=SOURCE, e.g. en-de=data/train")
    if src == tgt:
        raise MtkitError(f"{option} {spec}: source and target language are the same")
    return Direction(src, tgt, source)


def parse_pairs(specs: Iterable[str], option: str = "--pair") -> list[Direction]:
    """Every ``SRC-TGT=SOURCE`` of an option, refusing a language pair given twice."""
    found: dict[str, Direction] = {}
    for spec in specs:
        direction = parse_pair(spec, option)
        if direction.name in found:
            raise MtkitError(f"{option} {direction.name} is given twice")
        found[direction.name] = direction
    return list(found.values())


def check_tags(tags: Iterable[str], known: Iterable[str], where: str) -> None:
    """Refuse a tag the tokenizer lacks, naming the ones it has."""
    have = set(known)
    for piece in tags:
        if piece not in have:
            raise MtkitError(
                f"{where}: no {piece} symbol (its tags: {', '.join(sorted(have)) or 'none'}); "
                "train it with `mtkit spm train --pair ...`"
            )


def known_languages(tags: Iterable[str]) -> str:
    return ", ".join(sorted(tag_language(t) for t in tags))


def check_target(tgt_lang: str, tags: Sequence[str]) -> None:
    """Refuse ``--tgt-lang`` for a model without tags, or a language it does not know."""
    if tgt_lang and not tags:
        raise MtkitError(
            f"--tgt-lang {tgt_lang}: this model was not trained multilingual (its vocabulary "
            "has no >>xx<< target-language tags)"
        )
    if tgt_lang and tag(tgt_lang) not in tags:
        raise MtkitError(
            f"--tgt-lang {tgt_lang}: unknown target language (known: {known_languages(tags)})"
        )


def tag_lines(
    lines: Sequence[str], tgt_lang: str, tags: Sequence[str], first_number: Numbers = 1
) -> list[str]:
    """Lines as a multilingual model reads them: a line that starts with a tag the model
    knows keeps it; any other non-blank line gets ``>>tgt_lang<<`` (without ``tgt_lang`` it
    stays as it is, as Hugging Face's MarianTokenizer reads it). A leading tag the model does
    not know is an error naming the line. Without ``tags`` (a bilingual model) lines are
    returned unchanged, and a ``tgt_lang`` refused (:func:`check_target`)."""
    check_target(tgt_lang, tags)
    if not tags:
        return list(lines)
    known, out = set(tags), []
    for number, line in zip(line_numbers(first_number, len(lines)), lines, strict=True):
        code, _ = split_tag(line.lstrip())
        if code and TAG.match(code) and code not in known:
            raise MtkitError(
                f"line {number}: unknown target-language tag {code} "
                f"(known: {known_languages(tags)})"
            )
        if code in known:
            out.append(line.lstrip())
        elif tgt_lang and line.strip():
            out.append(f"{tag(tgt_lang)} {line}")
        else:
            out.append(line)
    return out
