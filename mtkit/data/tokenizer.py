"""Sentencepiece BPE: training, and a tokenizer that travels inside checkpoints as bytes.

Special ids are fixed across mtkit (every spm model it trains uses them; data, model and
decoding rely on them):

======  ====  ===================================================
piece   id    use
======  ====  ===================================================
<pad>   0     padding; ignored by the loss and masked in attention
<unk>   1     unknown piece
<s>     2     BOS: the first decoder input
</s>    3     EOS: appended to every source and target
======  ====  ===================================================

A model imported from elsewhere (an OPUS-MT MarianMTModel, ``mtkit import``) keeps its own
vocabulary: a table of pieces by id that is not the sentencepiece model's ids, and its own
special ids (:class:`SpecialIds`; Marian: EOS 0, UNK 1, PAD the last id, decoding starting from
PAD). A :class:`Tokenizer` given such a table maps text -> pieces -> ids through it (unknown
pieces -> UNK), as Hugging Face's MarianTokenizer does, and ids -> pieces -> text back.

A multilingual model's sentencepiece model holds target-language tags (``>>fr<<``,
:mod:`mtkit.data.tags`) as user-defined symbols, right after the special ids. With tags, a
line's leading ``>>xx<<`` is encoded as MarianTokenizer does: its id (UNK's for an unknown
tag), then the pieces of the rest; without tags a line is encoded as it is.

A model trained with ``byte_fallback`` (`mtkit spm train --byte-fallback`) also holds the 256
byte pieces ``<0x00>``..``<0xFF>`` (after the special ids and tags, counted in its vocabulary
size): a character outside the vocabulary is encoded as its UTF-8 bytes instead of UNK, and
decoding joins the bytes back into the character (each byte of a sequence cut short decodes to
U+FFFD).
"""

from __future__ import annotations

import functools
import hashlib
import io
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import sentencepiece as spm

from mtkit.data.tags import TAG, split_tag
from mtkit.errors import MtkitError

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
MAX_SENTENCE_BYTES = 4192  # sentencepiece's default: training skips longer sentences
FEW_TEXTS = 64  # texts encoded one by one rather than by sentencepiece's thread pool
SPECIAL_IDS = {"pad": PAD_ID, "unk": UNK_ID, "bos": BOS_ID, "eos": EOS_ID}
BYTE_PIECES = 256  # <0x00>..<0xFF>, in a model trained with byte_fallback


@dataclass(frozen=True)
class SpecialIds:
    """The ids that batching and decoding treat specially. ``bos`` is the first decoder input
    (Marian's ``decoder_start_token_id``, which is its PAD). mtkit's own models use the
    defaults; a model carries its ids (``Transformer.special_ids``) and the search reads them."""

    pad: int = PAD_ID
    unk: int = UNK_ID
    bos: int = BOS_ID
    eos: int = EOS_ID

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any, where: str = "special_ids") -> SpecialIds:
        names = ("pad", "unk", "bos", "eos")
        if not isinstance(data, dict) or sorted(data) != sorted(names):
            raise MtkitError(f"{where}: expected a mapping of {', '.join(names)} to ids")
        if not all(isinstance(data[k], int) and data[k] >= 0 for k in names):
            raise MtkitError(f"{where}: special ids must be non-negative integers, got {data}")
        return cls(**{k: data[k] for k in names})


DEFAULT_SPECIAL_IDS = SpecialIds()


class Tokenizer:
    """A sentencepiece model held as its serialized bytes (so checkpoints can embed it).

    ``vocab`` (pieces by id) and ``specials`` give an imported vocabulary: ids are then that
    table's, not sentencepiece's; without them ids are sentencepiece's, with mtkit's fixed
    special ids.
    """

    def __init__(
        self,
        model_proto: bytes,
        name: str = "<bytes>",
        vocab: Sequence[str] | None = None,
        specials: SpecialIds | None = None,
    ) -> None:
        self.proto = bytes(model_proto)
        self.name = name
        self.sp = spm.SentencePieceProcessor()
        try:
            self.sp.LoadFromSerializedProto(self.proto)
        except Exception:  # sentencepiece raises RuntimeError/OSError depending on version
            raise MtkitError(f"{name}: not a sentencepiece model") from None
        self.vocab: list[str] | None = None
        self.specials = DEFAULT_SPECIAL_IDS
        if vocab is not None:
            self._use_vocab(list(vocab), specials or DEFAULT_SPECIAL_IDS)
            return
        ids = (self.sp.pad_id(), self.sp.unk_id(), self.sp.bos_id(), self.sp.eos_id())
        if ids != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
            raise MtkitError(
                f"{name}: special ids (pad, unk, bos, eos) are {ids}, mtkit needs "
                f"{(PAD_ID, UNK_ID, BOS_ID, EOS_ID)}: train it with `mtkit spm train`"
            )

    def _use_vocab(self, vocab: list[str], specials: SpecialIds) -> None:
        index = {piece: i for i, piece in enumerate(vocab)}
        if len(index) != len(vocab):
            raise MtkitError(f"{self.name}: the vocabulary lists a piece twice")
        for name, i in specials.to_dict().items():
            if not 0 <= i < len(vocab):
                raise MtkitError(
                    f"{self.name}: special id {name}={i} outside the vocabulary of {len(vocab)}"
                )
        self.vocab, self.index, self.specials = vocab, index, specials

    @classmethod
    def from_file(cls, path: str | Path) -> Tokenizer:
        path = Path(path)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise MtkitError(f"{path}: no such sentencepiece model") from None
        except IsADirectoryError:
            raise MtkitError(f"{path}: is a directory, not a sentencepiece model") from None
        return cls(data, name=str(path))

    def __len__(self) -> int:
        return len(self.vocab) if self.vocab is not None else self.sp.GetPieceSize()

    @property
    def vocab_size(self) -> int:
        return len(self)

    @property
    def sha256(self) -> str:
        """Of the sentencepiece model, and of the vocabulary table when there is one."""
        digest = hashlib.sha256(self.proto)
        if self.vocab is not None:
            digest.update("\n".join(self.vocab).encode("utf-8"))
            digest.update(repr(self.specials).encode("utf-8"))
        return digest.hexdigest()

    def state(self) -> tuple[bytes, list[str] | None, dict[str, int]]:
        """What rebuilds this tokenizer (picklable): ``Tokenizer.from_state(*state)``."""
        return self.proto, self.vocab, self.specials.to_dict()

    @classmethod
    def from_state(
        cls, proto: bytes, vocab: list[str] | None, specials: dict[str, int], name: str = "<bytes>"
    ) -> Tokenizer:
        return cls(proto, name, vocab, SpecialIds.from_dict(specials) if vocab else None)

    def encode(self, texts: Sequence[str], threads: int = -1) -> list[list[int]]:
        """Pieces ids for each text, without BOS/EOS."""
        if self.vocab is None and self.tags:
            return self._tagged(texts, threads)
        if self.vocab is None:
            return self._spm_ids(texts, threads)
        return [self._table_ids(text) for text in texts]

    def _spm_ids(self, texts: Sequence[str], threads: int) -> list[list[int]]:
        """sentencepiece's ids of each text. A list goes to sentencepiece's batch encoder, which
        starts a pool of ``threads`` threads per call (-1: one per core); a few texts (a server
        request) are encoded one by one instead: a pool for one sentence costs 30x its encoding,
        more on a busy machine."""
        if threads < 0 and len(texts) <= FEW_TEXTS:
            return [self.sp.Encode(text, out_type=int) for text in texts]
        kwargs = {"num_threads": threads} if threads >= 0 else {}
        return self.sp.Encode(list(texts), out_type=int, **kwargs)

    def encode_one(self, text: str) -> list[int]:
        return self.encode([text])[0]

    @functools.cached_property
    def tags(self) -> list[str]:
        """The target-language tags (``>>xx<<``) of a multilingual vocabulary, by id."""
        if self.vocab is not None:
            return [p for p in self.vocab if TAG.match(p)]
        found = []
        for i in range(EOS_ID + 1, len(self)):  # user-defined symbols follow the special ids
            if not TAG.match(piece := self.sp.IdToPiece(i)):
                break
            found.append(piece)
        return found

    @functools.cached_property
    def tag_ids(self) -> tuple[int, ...]:
        """The ids of :attr:`tags`."""
        return tuple(self.piece_to_id(t) for t in self.tags)

    def _tagged(self, texts: Sequence[str], threads: int) -> list[list[int]]:
        """Encode lines whose leading ``>>xx<<`` is one id (see the module docstring)."""
        codes, rests = zip(*map(split_tag, texts), strict=True) if texts else ((), ())
        ids = self._spm_ids(rests, threads)
        return [
            [self.sp.PieceToId(c)] + row if c else row for c, row in zip(codes, ids, strict=True)
        ]

    def _table_ids(self, text: str) -> list[int]:
        """Pieces -> the vocabulary's ids, unknown pieces -> UNK; a leading language code
        (``>>de<<``) is one piece, as Hugging Face's MarianTokenizer reads it."""
        code, text = split_tag(text)
        unk = self.specials.unk
        pieces = ([code] if code else []) + self.sp.EncodeAsPieces(text)
        return [self.index.get(p, unk) for p in pieces]

    def decode(self, ids: Iterable[Sequence[int]]) -> list[str]:
        """Detokenize; special ids (pad, bos, eos) are dropped."""
        s = self.specials
        drop = {s.pad, s.bos, s.eos}
        rows = [[int(i) for i in seq if int(i) not in drop] for seq in ids]
        if self.vocab is None:
            return [self.sp.Decode(row) for row in rows]
        vocab = self.vocab
        return [self.sp.DecodePieces([vocab[i] for i in row]) for row in rows]

    def pieces(self, text: str) -> list[str]:
        return self.sp.EncodeAsPieces(text)

    def id_to_piece(self, i: int) -> str:
        return self.vocab[i] if self.vocab is not None else self.sp.IdToPiece(i)

    def piece_to_id(self, piece: str) -> int:
        """The id of ``piece`` (UNK's for a piece the vocabulary lacks)."""
        if self.vocab is not None:
            return self.index.get(piece, self.specials.unk)
        return self.sp.PieceToId(piece)

    def pieces_by_id(self) -> list[str]:
        """The vocabulary: piece of id 0, 1, ..."""
        if self.vocab is not None:
            return list(self.vocab)
        return [self.sp.IdToPiece(i) for i in range(len(self))]

    @functools.cached_property
    def byte_fallback(self) -> bool:
        """Whether the model holds byte pieces: characters outside it become bytes, not UNK."""
        return any(self.sp.IsByte(i) for i in range(self.sp.GetPieceSize()))

    def byte_value(self, piece: str) -> int | None:
        """The byte a byte piece stands for (``<0xE2>`` -> 226); None for any other piece."""
        return int(piece[3:5], 16) if self.sp.IsByte(self.sp.PieceToId(piece)) else None

    def word_boundaries(self) -> frozenset[int]:
        """The ids of pieces before which a word ends (:func:`ends_word_before`)."""
        value = self.byte_value if self.byte_fallback else lambda piece: None
        pieces = enumerate(self.pieces_by_id())
        return frozenset(i for i, piece in pieces if ends_word_before(piece, value(piece)))


def ends_word_before(piece: str, byte: int | None = None) -> bool:
    """Whether a word ends before ``piece``: one that begins a word ("▁dog"), or does not
    continue one (punctuation, symbols, special pieces; not "s"). A byte piece (``byte``, its
    value) is read as that byte: an ASCII one as its character, any other (a part of a character
    outside the vocabulary, whose space, if any, is a "▁" piece of its own) continues the word.

    >>> [ends_word_before(p) for p in ("▁dog", "s", ".", "<unk>")]
    [True, False, True, True]
    >>> [ends_word_before(p, b) for p, b in (("<0x21>", 0x21), ("<0x61>", 0x61), ("<0xF0>", 0xF0))]
    [True, False, False]
    """
    if byte is not None:
        piece = chr(byte) if byte < 0x80 else "x"
    return not piece or piece[0] == "▁" or not piece[0].isalnum()


def train_spm(
    inputs: Iterable[str],
    vocab_size: int,
    character_coverage: float = 1.0,
    input_sentence_size: int = 0,
    seed: int = 1,
    num_threads: int = 2,
    user_defined_symbols: Sequence[str] = (),
    byte_fallback: bool = False,
) -> bytes:
    """Train a BPE model on an iterator of sentences; return the serialized model.

    Uses mtkit's fixed special ids. ``input_sentence_size`` > 0 samples that many sentences
    (sentencepiece's reservoir sampling, seeded) so huge corpora train in bounded memory.
    ``user_defined_symbols`` (target-language tags) get the ids after the special ones.
    ``byte_fallback``: the 256 byte pieces follow them (part of ``vocab_size``), and a
    character outside the vocabulary is encoded as its UTF-8 bytes rather than UNK.
    """
    model = io.BytesIO()
    spm.set_random_generator_seed(seed)
    try:
        spm.SentencePieceTrainer.Train(
            sentence_iterator=iter(inputs),
            model_writer=model,
            model_type="bpe",
            vocab_size=vocab_size,
            character_coverage=character_coverage,
            input_sentence_size=input_sentence_size,
            shuffle_input_sentence=input_sentence_size > 0,
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            pad_piece="<pad>",
            unk_piece="<unk>",
            bos_piece="<s>",
            eos_piece="</s>",
            num_threads=num_threads,
            max_sentence_length=MAX_SENTENCE_BYTES,
            minloglevel=2,
            hard_vocab_limit=False,
            user_defined_symbols=list(user_defined_symbols),
            byte_fallback=byte_fallback,
        )
    except RuntimeError as err:
        raise MtkitError(training_error(str(err))) from None
    return model.getvalue()


def training_error(message: str) -> str:
    """sentencepiece's training error in one line; a vocabulary too small for the characters
    said in mtkit's words."""
    last = message.strip().splitlines()[-1]
    if found := re.search(r"smaller than required_chars\. (\d+) vs (\d+)", last):
        return (
            f"--vocab-size {found[1]} is too small: the text's characters and the fixed pieces "
            f"(special, tags, bytes) need {found[2]}; raise it or lower --character-coverage"
        )
    return f"sentencepiece training failed: {last}"
