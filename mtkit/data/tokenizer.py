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
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterable, Sequence
from pathlib import Path

import sentencepiece as spm

from mtkit.errors import MtkitError

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
MAX_SENTENCE_BYTES = 4192  # sentencepiece's default: training skips longer sentences
SPECIAL_IDS = {"pad": PAD_ID, "unk": UNK_ID, "bos": BOS_ID, "eos": EOS_ID}


class Tokenizer:
    """A sentencepiece model held as its serialized bytes (so checkpoints can embed it)."""

    def __init__(self, model_proto: bytes, name: str = "<bytes>") -> None:
        self.proto = bytes(model_proto)
        self.name = name
        self.sp = spm.SentencePieceProcessor()
        try:
            self.sp.LoadFromSerializedProto(self.proto)
        except Exception:  # sentencepiece raises RuntimeError/OSError depending on version
            raise MtkitError(f"{name}: not a sentencepiece model") from None
        ids = (self.sp.pad_id(), self.sp.unk_id(), self.sp.bos_id(), self.sp.eos_id())
        if ids != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
            raise MtkitError(
                f"{name}: special ids (pad, unk, bos, eos) are {ids}, mtkit needs "
                f"{(PAD_ID, UNK_ID, BOS_ID, EOS_ID)}: train it with `mtkit spm train`"
            )

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
        return self.sp.GetPieceSize()

    @property
    def vocab_size(self) -> int:
        return len(self)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.proto).hexdigest()

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Pieces ids for each text, without BOS/EOS."""
        return self.sp.Encode(list(texts), out_type=int)

    def encode_one(self, text: str) -> list[int]:
        return self.sp.Encode(text, out_type=int)

    def decode(self, ids: Iterable[Sequence[int]]) -> list[str]:
        """Detokenize; special ids (pad, bos, eos) are dropped."""
        specials = {PAD_ID, BOS_ID, EOS_ID}
        return [self.sp.Decode([int(i) for i in seq if int(i) not in specials]) for seq in ids]

    def pieces(self, text: str) -> list[str]:
        return self.sp.EncodeAsPieces(text)


def train_spm(
    inputs: Iterable[str],
    vocab_size: int,
    character_coverage: float = 1.0,
    input_sentence_size: int = 0,
    seed: int = 1,
    num_threads: int = 2,
) -> bytes:
    """Train a BPE model on an iterator of sentences; return the serialized model.

    Uses mtkit's fixed special ids. ``input_sentence_size`` > 0 samples that many sentences
    (sentencepiece's reservoir sampling, seeded) so huge corpora train in bounded memory.
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
        )
    except RuntimeError as err:
        raise MtkitError(
            f"sentencepiece training failed: {str(err).strip().splitlines()[-1]}"
        ) from None
    return model.getvalue()
