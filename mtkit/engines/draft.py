"""The draft model of speculative decoding (``--draft``): loaded, checked against the models.

A draft is any mtkit checkpoint whose sentencepiece models are the models' own (sha256, as
ensembles are checked): it reads the same source pieces and proposes target pieces the models
check (:mod:`mtkit.decoding.speculative`). It runs on the models' device, dtype and matmul.
"""

from __future__ import annotations

from mtkit.checkpoint import Checkpoint, load_for_inference
from mtkit.config import TranslateConfig
from mtkit.data.shortlist import Shortlist, read_shortlist_for
from mtkit.data.tokenizer import Tokenizer
from mtkit.decoding.speculative import Draft, DraftStats
from mtkit.errors import MtkitError
from mtkit.model.inference import check_precision, compiles, prepare_for_inference
from mtkit.model.shortlisted import ShortlistedDraft, projection_weight


def check_draft(
    path: str,
    teacher: str,
    teacher_pair: tuple[Tokenizer, Tokenizer],
    pair: tuple[Tokenizer, Tokenizer],
) -> None:
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
    """Check ``config.draft`` (if any) and its shortlist against the models without building
    them."""
    if config.draft:
        check_draft(config.draft, teacher, pair, Checkpoint.load(config.draft).tokenizers())
        if config.draft_shortlist:
            draft_shortlist(config, pair)


def draft_shortlist(config: TranslateConfig, pair: tuple[Tokenizer, Tokenizer]) -> Shortlist:
    """``--draft-shortlist``'s file, checked against the draft's (the models') vocabularies."""
    return read_shortlist_for(config.draft_shortlist, *pair, "--draft-shortlist")


def draft_precision(config: TranslateConfig, device, dtype: str) -> tuple[str, str]:
    """The draft's float type and quantization: ``--draft-dtype`` (else the models' resolved
    ``dtype``) and ``--draft-quantize`` (else, for an fp32 draft, the models' ``--quantize``),
    refused with a one-line error where the device cannot run them."""
    dtype = config.draft_dtype or dtype
    inherited = config.quantize if dtype == "fp32" else ""  # int8 takes fp32
    quantize = {"": inherited, "none": ""}.get(config.draft_quantize, config.draft_quantize)
    if quantize and dtype != "fp32":
        raise MtkitError(
            f"--draft-quantize int8 needs an fp32 draft (it would be {dtype}: "
            "add --draft-dtype fp32)"
        )
    check_precision(device, dtype, quantize, ("--draft-dtype", "--draft-quantize"))
    return dtype, quantize


def load_draft(
    config: TranslateConfig, teacher: str, pair: tuple[Tokenizer, Tokenizer], device, dtype: str
) -> Draft | None:
    """``config.draft`` ready to propose on ``device`` in ``dtype`` (the models', resolved;
    ``--draft-dtype`` overrides it) (None without one): int8 or not as ``--draft-quantize`` says
    (by default as the models where the draft is fp32), guessing within ``--draft-shortlist``
    where one is given."""
    if not config.draft:
        return None
    loaded = load_for_inference(config.draft)
    tokenizers = (loaded.src_tokenizer, loaded.tgt_tokenizer)
    check_draft(config.draft, teacher, pair, tokenizers)
    shortlist = draft_shortlist(config, tokenizers) if config.draft_shortlist else None
    weight = projection_weight(loaded.model) if shortlist is not None else None
    dtype, quantize = draft_precision(config, device, dtype)
    compiled = shortlist is None and compiles(config.compile, loaded.model, device)
    model = prepare_for_inference(
        loaded.model, device, dtype, quantize, config.cpu_matmul, compiled
    )
    if shortlist is not None:
        model = ShortlistedDraft(model, shortlist, loaded.tgt_tokenizer.specials, weight)
    return Draft(model, config.draft_tokens, DraftStats(), config.draft_confidence)
