"""The sentencepiece wrapper: fixed special ids, round trips, bytes-only loading."""

from pathlib import Path

import pytest
import sentencepiece as spm
from hypothesis import given, settings
from hypothesis import strategies as st

from mtkit.data.tokenizer import BOS_ID, EOS_ID, FEW_TEXTS, PAD_ID, UNK_ID, Tokenizer, train_spm
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
        "<pad>", "<unk>", "<s>", "</s>"
    ]  # fmt: skip
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
        input=str(tmp_path / "in.txt"), model_prefix=str(tmp_path / "plain"), vocab_size=40,
        minloglevel=2,
    )  # fmt: skip
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
