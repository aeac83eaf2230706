"""The sentencepiece wrapper: fixed special ids, round trips, bytes-only loading."""

from pathlib import Path

import pytest
import sentencepiece as spm
from hypothesis import given, settings
from hypothesis import strategies as st

from mtkit.data.tokenizer import (
    BOS_ID,
    BYTE_PIECES,
    EOS_ID,
    FEW_TEXTS,
    PAD_ID,
    UNK_ID,
    Tokenizer,
    ends_word_before,
    train_spm,
)
from mtkit.errors import MtkitError

TEXT = [
    "A man in a red shirt is riding a bicycle.",
    "Zwei Hunde spielen im Schnee.",
    "Une femme lit un livre près de la fenêtre.",
    "Children are playing football in the park.",
] * 50


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer(train_spm(TEXT, vocab_size=120))


def test_special_ids(tok: Tokenizer) -> None:
    assert [tok.sp.IdToPiece(i) for i in (PAD_ID, UNK_ID, BOS_ID, EOS_ID)] == [
        "<pad>",
        "<unk>",
        "<s>",
        "</s>",
    ]
    assert len(tok) == 120


@settings(max_examples=50, deadline=None)
@given(st.text(alphabet=sorted(set("".join(TEXT))), max_size=60))
def test_round_trip(tok: Tokenizer, text: str) -> None:
    normalized = " ".join(text.split())
    assert tok.decode(tok.encode([normalized])) == [normalized]


@pytest.mark.parametrize("count", [0, 1, FEW_TEXTS, FEW_TEXTS + 1, 200])
def test_few_texts_one_by_one_and_many_in_a_pool_encode_alike(tok: Tokenizer, count: int) -> None:
    texts = [f"{TEXT[i % 4][: 10 + i % 30]} {i}" for i in range(count)]
    one_by_one = [tok.sp.Encode(text, out_type=int) for text in texts]
    assert tok.encode(texts) == one_by_one
    assert tok.encode(texts, threads=1) == one_by_one
    assert tok.encode(texts, threads=2) == one_by_one


def test_decode_drops_specials(tok: Tokenizer) -> None:
    ids = tok.encode_one("Two dogs")
    assert tok.decode([[BOS_ID, *ids, EOS_ID, PAD_ID, PAD_ID]]) == tok.decode([ids])


def test_rejects_foreign_models(tmp_path: Path) -> None:
    with pytest.raises(MtkitError, match="not a sentencepiece model"):
        Tokenizer(b"garbage bytes", name="x.model")
    with pytest.raises(MtkitError, match="no such sentencepiece model"):
        Tokenizer.from_file(tmp_path / "missing.model")
    # a valid spm model with other special ids (sentencepiece's defaults: unk=0, bos=1, eos=2)
    (tmp_path / "in.txt").write_text("\n".join(TEXT))
    spm.SentencePieceTrainer.Train(
        input=str(tmp_path / "in.txt"),
        model_prefix=str(tmp_path / "plain"),
        vocab_size=40,
        minloglevel=2,
    )
    with pytest.raises(MtkitError, match="special ids"):
        Tokenizer.from_file(tmp_path / "plain.model")


def test_training_is_deterministic() -> None:
    assert train_spm(TEXT, vocab_size=100) == train_spm(TEXT, vocab_size=100)


# ---------------------------------------------------------------------------------------------
# Target-language tags (issue 16)

TAGGED_LINES = ["the cat runs", "a man walks on the street"] * 20


@pytest.fixture(scope="module")
def tagged() -> Tokenizer:
    return Tokenizer(
        train_spm(TAGGED_LINES, vocab_size=40, user_defined_symbols=[">>de<<", ">>fr<<"])
    )


def test_tags_follow_the_special_ids(tagged: Tokenizer) -> None:
    assert tagged.tags == [">>de<<", ">>fr<<"]
    assert [tagged.piece_to_id(t) for t in tagged.tags] == [4, 5]
    assert Tokenizer(train_spm(TAGGED_LINES, vocab_size=40)).tags == []


@pytest.mark.parametrize("line", ["the cat runs", " a man", "", "cat>>de<<"])
@pytest.mark.parametrize("code", [">>de<< ", ">>fr<<", ">>de<<  "])
def test_a_leading_tag_is_its_id_then_the_rest(tagged: Tokenizer, code: str, line: str) -> None:
    """As MarianTokenizer: the tag's id, then the rest of the line, no `▁` piece between."""
    tag_id = tagged.piece_to_id(code.strip())
    assert tagged.encode([code + line]) == [[tag_id, *tagged.encode([line])[0]]]
    assert tagged.encode_one(code + line) == [tag_id, *tagged.encode_one(line)]
    assert tagged.encode([code + line], threads=1) == tagged.encode([code + line])
    assert tagged.decode([tagged.encode_one(code + line)]) == [
        f"{code.strip()} {line.strip()}".strip()
    ]


def test_an_unknown_tag_is_unk_and_untagged_models_are_unchanged(tagged: Tokenizer) -> None:
    assert tagged.encode_one(">>cs<< the cat")[0] == UNK_ID
    plain = Tokenizer(train_spm(TAGGED_LINES, vocab_size=40))
    assert plain.encode_one(">>de<< the cat") == plain.sp.Encode(">>de<< the cat")


# ---------------------------------------------------------------------------------------------
# Byte fallback (issue 50): no character is UNK

HOSTILE = [
    "Ein Hund 🐶 läuft!",
    "👨‍👩‍👧 🇩🇪 ❤️",  # zero-width joiners, a flag, a variation selector
    "犬が走る",
    "≈ ∑ ☃ ~ ^ `",
    "مرحبا بالعالم",
    "TWO DOGS",
    "x",
]


@pytest.fixture(scope="module")
def bytes_tok() -> Tokenizer:
    return Tokenizer(train_spm(TEXT, vocab_size=300, byte_fallback=True))


def test_byte_pieces_follow_the_special_ids_and_count_in_the_size(
    bytes_tok: Tokenizer, tok: Tokenizer
) -> None:
    assert len(bytes_tok) == 300 and bytes_tok.byte_fallback
    pieces = bytes_tok.pieces_by_id()
    assert pieces[:4] == ["<pad>", "<unk>", "<s>", "</s>"]
    assert pieces[4 : 4 + BYTE_PIECES] == [f"<0x{b:02X}>" for b in range(256)]
    values = {p: bytes_tok.byte_value(p) for p in ("<0x00>", "<0xE2>", "▁A", "<unk>")}
    assert values == {"<0x00>": 0, "<0xE2>": 226, "▁A": None, "<unk>": None}
    assert not any(tok.sp.IsByte(i) for i in range(len(tok))) and not tok.byte_fallback  # off


@pytest.mark.parametrize("text", HOSTILE)
def test_byte_fallback_leaves_no_unk_and_round_trips(bytes_tok: Tokenizer, text: str) -> None:
    ids = bytes_tok.encode_one(text)
    assert UNK_ID not in ids
    assert bytes_tok.decode([ids]) == [text]
    assert bytes_tok.decode(bytes_tok.encode([text] * (FEW_TEXTS + 1))) == [text] * (FEW_TEXTS + 1)


@pytest.mark.parametrize("text", HOSTILE[:-1])
def test_without_byte_fallback_unknown_characters_are_unk(tok: Tokenizer, text: str) -> None:
    ids = tok.encode_one(text)
    assert UNK_ID in ids
    assert tok.decode([ids]) != [text]


@settings(max_examples=100, deadline=None)
@given(st.text(st.characters(exclude_categories=("Cs",), exclude_characters="▁"), max_size=40))
def test_byte_fallback_round_trips_any_text(bytes_tok: Tokenizer, text: str) -> None:
    """decode(encode(x)) is x as sentencepiece normalizes it (NFKC, spaces collapsed)."""
    ids = bytes_tok.encode_one(text)
    assert UNK_ID not in ids
    normalized = bytes_tok.sp.Normalize(text).replace("▁", " ").strip(" ")
    assert bytes_tok.decode([ids]) == [normalized]


def test_a_lone_byte_decodes_to_the_replacement_character(bytes_tok: Tokenizer) -> None:
    """A model may write a character's bytes cut short: the decoded text says so, no crash."""
    first = bytes_tok.piece_to_id("<0xF0>")
    dog = bytes_tok.encode_one("🐶")  # "▁" then four bytes
    assert bytes_tok.decode([[first], [first, *dog], dog[:-1]]) == [
        "\ufffd",
        "\ufffd 🐶",
        "\ufffd" * 3,
    ]


def test_byte_fallback_keeps_the_tags_first() -> None:
    tagged = Tokenizer(
        train_spm(TAGGED_LINES, vocab_size=300, user_defined_symbols=[">>de<<"], byte_fallback=True)
    )
    assert tagged.tags == [">>de<<"] and tagged.piece_to_id("<0x00>") == 5
    assert tagged.encode_one(">>de<< the 🐶") == [4, *tagged.encode_one("the 🐶")]
    assert UNK_ID not in tagged.encode_one(">>de<< the 🐶")


@pytest.mark.parametrize(
    "piece, byte, ends",
    [
        ("▁dog", None, True),
        ("s", None, False),
        (".", None, True),
        ("<unk>", None, True),
        ("<0x21>", 0x21, True),  # "!"
        ("<0x61>", 0x61, False),  # "a"
        ("<0xF0>", 0xF0, False),  # a character's first byte: glued to the word before
        ("<0x9F>", 0x9F, False),  # a continuation byte
    ],
)
def test_ends_word_before(piece: str, byte: int | None, ends: bool) -> None:
    assert ends_word_before(piece, byte) is ends


def test_word_boundaries_read_byte_pieces_as_bytes(bytes_tok: Tokenizer, tok: Tokenizer) -> None:
    found = bytes_tok.word_boundaries()
    ids = {p: bytes_tok.piece_to_id(p) for p in ("<0x21>", "<0x61>", "<0xF0>", "<0x9F>", "▁A")}
    assert [ids[p] in found for p in ids] == [True, False, False, False, True]
    assert tok.word_boundaries() == {  # without byte pieces: as before
        i for i, p in enumerate(tok.pieces_by_id()) if p[0] == "▁" or not p[0].isalnum()
    }
