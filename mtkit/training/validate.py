"""Validation: label-smoothed loss and perplexity by teacher forcing, BLEU by decoding.

Perplexity is ``exp(nll per target token)`` (natural log; EOS counted, padding not). BLEU is
sacrebleu's corpus BLEU with default settings of the detokenized hypotheses against the raw
reference lines of the validation split, reported with its signature.

`mtkit prepare` filters only the train split by length, so a validation pair may be longer than
the model's positions or ``max_tokens``. Validation never fails for that (:func:`plan_validation`;
`mtkit train` states the counts in one line at start-up, :func:`describe_plan`):

* a source longer than ``max_positions - 1`` pieces is truncated to its first
  ``max_positions - 1`` (+ EOS), for the loss and for BLEU, as `mtkit translate` does;
* a target longer than ``max_positions - 1`` pieces cannot be teacher-forced (BOS + target must
  fit the positions): its pair is left out of valid loss and perplexity, whose token counts are
  then those of the other pairs; BLEU still decodes its source and scores it against the
  whole reference;
* a pair longer than the batch budget (``max_tokens``; ``max_tokens // valid_beam`` source
  tokens when decoding) gets a batch of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

from mtkit.config import SearchConfig, TrainConfig
from mtkit.data.batching import cut_batches
from mtkit.data.binarized import ParallelData
from mtkit.data.tokenizer import DEFAULT_SPECIAL_IDS, Tokenizer
from mtkit.model.transformer import Transformer
from mtkit.training.batching import collate
from mtkit.training.distributed import autocast
from mtkit.training.loss import label_smoothed_nll_loss


@dataclass(frozen=True)
class ValidPlan:
    """What validation does with each pair of a split (see the module docstring)."""

    src_lengths: np.ndarray  # (N,) source pieces used: truncated to max_positions - 1
    sizes: np.ndarray  # (N,) padded row length of the pair in a loss batch, BOS/EOS included
    in_loss: np.ndarray  # (N,) bool: the target fits the positions, so the pair is in the loss
    truncated: int  # sources truncated
    left_out: int  # pairs left out of the loss
    alone: int  # pairs of the loss over max_tokens, each batched alone


def plan_validation(data: ParallelData, max_positions: int, max_tokens: int) -> ValidPlan:
    """Truncation, loss membership and lone batches of a split's pairs."""
    cap = max_positions - 1  # + EOS (source) or BOS (target) must fit the positions
    src = np.minimum(data.src_lengths, cap)
    in_loss = data.tgt_lengths <= cap
    sizes = np.maximum(src, data.tgt_lengths) + 1
    return ValidPlan(
        src,
        sizes,
        in_loss,
        truncated=int((data.src_lengths > cap).sum()),
        left_out=int((~in_loss).sum()),
        alone=int((in_loss & (sizes > max_tokens)).sum()),
    )


def _counted(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def describe_plan(plan: ValidPlan, max_positions: int, max_tokens: int) -> str | None:
    """One line on the split's long pairs and what validation does with them; None: no such."""
    cap = max_positions - 1
    parts = []
    if plan.truncated:
        its = "its" if plan.truncated == 1 else "their"
        parts.append(
            f"{_counted(plan.truncated, 'source', 'sources')} longer than "
            f"max_positions={max_positions} allows will be truncated to {its} first "
            f"{cap} pieces"
        )
    if plan.left_out:
        its = "its pair" if plan.left_out == 1 else "their pairs"
        parts.append(
            f"{_counted(plan.left_out, 'target', 'targets')} longer than {cap} pieces "
            f"will be left out of valid loss and perplexity (BLEU still scores {its})"
        )
    if plan.alone:
        parts.append(
            f"{_counted(plan.alone, 'pair', 'pairs')} over max_tokens={max_tokens} will "
            f"{'be' if plan.alone == 1 else 'each be'} batched alone"
        )
    if not parts:
        return None
    return f"valid split ({_counted(len(plan.sizes), 'pair', 'pairs')}): " + "; ".join(parts)


def _source(data: ParallelData, i: int, n: int) -> Tensor:
    """The first ``n`` source pieces of pair ``i``, int64, without EOS."""
    return torch.from_numpy(data.pair(i)[0][:n].astype(np.int64))


def _pair(data: ParallelData, plan: ValidPlan, i: int) -> tuple[Tensor, Tensor]:
    """Pair ``i`` as validation reads it: the source truncated, without BOS/EOS."""
    target = torch.from_numpy(data.pair(i)[1].astype(np.int64))
    return _source(data, i, int(plan.src_lengths[i])), target


@torch.no_grad()
def valid_loss(
    model: Transformer,
    data: ParallelData,
    cfg: TrainConfig,
    device: torch.device,
    amp_dtype: torch.dtype | None,
) -> dict[str, float]:
    """Smoothed loss and NLL per target token, and perplexity, over the pairs in the loss."""
    plan = plan_validation(data, model.cfg.max_positions, cfg.max_tokens)
    ids = getattr(model, "special_ids", DEFAULT_SPECIAL_IDS)  # the vocabulary's (imported) ids
    order = np.flatnonzero(plan.in_loss)
    order = order[np.argsort(plan.sizes[order], kind="stable")].tolist()  # ascending
    loss_sum = nll_sum = 0.0
    ntokens = 0
    for indices in cut_batches(order, plan.sizes.tolist(), cfg.max_tokens, oversize="alone"):
        batch = collate([_pair(data, plan, i) for i in indices], ids).to(device)
        with autocast(device, amp_dtype):
            logits = model(batch.src, batch.tgt_in)  # (B, T, V)
        loss, nll = label_smoothed_nll_loss(logits, batch.tgt_out, cfg.label_smoothing, ids.pad)
        loss_sum, nll_sum = loss_sum + loss.item(), nll_sum + nll.item()
        ntokens += int(batch.tgt_out.ne(ids.pad).sum())
    ntokens = max(ntokens, 1)
    nll_mean = nll_sum / ntokens
    return {
        "valid_loss": loss_sum / ntokens,
        "valid_nll": nll_mean,
        "valid_ppl": math.exp(min(nll_mean, 700.0)),
    }


def scored_rows(data: ParallelData, cap: int) -> dict[str, range]:
    """The pairs BLEU scores, per direction (``""``: a one-direction split): the first ``cap``
    of each (0: all)."""
    directions = getattr(data, "directions", {}) or {"": (0, len(data))}
    return {name: range(a, min(b, a + cap) if cap else b) for name, (a, b) in directions.items()}


@torch.no_grad()
def valid_bleu(
    model: Transformer,
    data: ParallelData,
    cfg: TrainConfig,
    device: torch.device,
    tokenizer: Tokenizer,
) -> tuple[float, str, dict[str, float]]:
    """Decode the validation sources (beam ``valid_beam``) and score them: (BLEU, signature,
    BLEU per direction). With several directions, BLEU is the mean of theirs."""
    from sacrebleu.metrics import BLEU

    rows = scored_rows(data, cfg.valid_max_sentences)
    hyps = _decode(model, data, cfg, device, tokenizer, [i for r in rows.values() for i in r])
    refs = data.text("tgt")
    bleu = BLEU()
    scores = {
        name: bleu.corpus_score([hyps[i] for i in r], [[refs[i] for i in r]]).score
        for name, r in rows.items()
    }
    mean = sum(scores.values()) / len(scores)
    return mean, str(bleu.get_signature()), {k: v for k, v in scores.items() if k}


@torch.no_grad()
def _decode(
    model: Transformer,
    data: ParallelData,
    cfg: TrainConfig,
    device: torch.device,
    tokenizer: Tokenizer,
    chosen: list[int],
) -> dict[int, str]:
    """Hypotheses for pairs ``chosen``, by index."""
    from mtkit.decoding.search import generate

    search = SearchConfig(beam=cfg.valid_beam)
    src_lengths = np.minimum(data.src_lengths, model.cfg.max_positions - 1)  # truncated
    sizes = (src_lengths + 1).tolist()  # + EOS
    order = sorted(chosen, key=sizes.__getitem__)  # ascending, stable
    per_batch = max(cfg.max_tokens // max(cfg.valid_beam, 1), 1)
    hyps: dict[int, str] = {}
    for indices in cut_batches(order, sizes, per_batch, oversize="alone"):
        rows = [_source(data, i, int(src_lengths[i])) for i in indices]
        ids = getattr(model, "special_ids", DEFAULT_SPECIAL_IDS)
        eos, pad = ids.eos, ids.pad
        src = pad_sequence(
            [torch.cat([r, torch.tensor([eos])]) for r in rows],
            batch_first=True,
            padding_value=pad,
        )  # (B, S)
        results = generate([model], src.to(device), search)
        texts = tokenizer.decode([best[0].tokens for best in results])
        for i, text in zip(indices, texts, strict=True):
            hyps[i] = text
    return hyps


def validate(
    model: Transformer,
    data: ParallelData,
    cfg: TrainConfig,
    device: torch.device,
    amp_dtype: torch.dtype | None,
    tokenizer: Tokenizer,
) -> dict[str, Any]:
    """valid_loss, valid_nll, valid_ppl, valid_bleu (None when not computed), bleu_signature;
    with several directions, valid_bleu is their mean and valid_bleu_SRC-TGT each one's."""
    was_training = model.training
    model.eval()
    try:
        record: dict[str, Any] = valid_loss(model, data, cfg, device, amp_dtype)
        record["valid_bleu"], record["bleu_signature"] = None, None
        if cfg.validate_bleu:
            bleu, record["bleu_signature"], by_direction = valid_bleu(
                model, data, cfg, device, tokenizer
            )
            record["valid_bleu"] = bleu
            record.update({f"valid_bleu_{name}": score for name, score in by_direction.items()})
    finally:
        model.train(was_training)
    return record
