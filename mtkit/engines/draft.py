"""The draft model of speculative decoding (``--draft``): loaded, checked against the models.

A draft is any mtkit checkpoint whose sentencepiece models are the models' own (sha256, as
ensembles are checked): it reads the same source pieces and proposes target pieces the models
check (:mod:`mtkit.decoding.speculative`). It runs on the models' device, dtype and matmul.
"""

from __future__ import annotations

from mtkit.checkpoint import Checkpoint, load_for_inference
from mtkit.config import TranslateConfig
from mtkit.data.tokenizer import Tokenizer
from mtkit.decoding.speculative import Draft, DraftStats
from mtkit.errors import MtkitError
from mtkit.model.inference import prepare_for_inference


def check_draft(path: str, teacher: str, teacher_pair: tuple[Tokenizer, Tokenizer],
                pair: tuple[Tokenizer, Tokenizer]) -> None:  # fmt: skip
    """Refuse, naming the draft, one whose sentencepiece models differ from the models'."""
    for side, a, b in zip(("src", "tgt"), teacher_pair, pair, strict=True):
        if a.sha256 != b.sha256:
            raise MtkitError(
                f"--draft {path}: its {side} sentencepiece model differs from {teacher}'s (sha256 "
                f"{b.sha256[:12]} vs {a.sha256[:12]}); a draft must share the models' source and "
                "target vocabularies"
            )


def describe_draft(
    config: TranslateConfig, teacher: str, pair: tuple[Tokenizer, Tokenizer]
) -> None:
    """Check ``config.draft`` (if any) against the models without building it."""
    if config.draft:
        check_draft(config.draft, teacher, pair, Checkpoint.load(config.draft).tokenizers())


def load_draft(config: TranslateConfig, teacher: str, pair: tuple[Tokenizer, Tokenizer],
               device, dtype: str) -> Draft | None:  # fmt: skip
    """``config.draft`` ready to propose on ``device`` in ``dtype`` (None without one)."""
    if not config.draft:
        return None
    loaded = load_for_inference(config.draft)
    check_draft(config.draft, teacher, pair, (loaded.src_tokenizer, loaded.tgt_tokenizer))
    model = prepare_for_inference(loaded.model, device, dtype, config.quantize, config.cpu_matmul)
    return Draft(model, config.draft_tokens, DraftStats())
