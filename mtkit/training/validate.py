"""Validation: label-smoothed loss and perplexity by teacher forcing, BLEU by decoding.

Perplexity is ``exp(nll per target token)`` (natural log; EOS counted, padding not). BLEU is
sacrebleu's corpus BLEU with default settings of the detokenized hypotheses against the raw
reference lines of the validation split, reported with its signature.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.nn.utils.rnn import pad_sequence

from mtkit.config import SearchConfig, TrainConfig
from mtkit.data.binarized import ParallelData
from mtkit.data.tokenizer import EOS_ID, PAD_ID, Tokenizer
from mtkit.model.transformer import Transformer
from mtkit.training.batching import PairDataset, collate, sentence_sizes, sorted_batches
from mtkit.training.distributed import autocast
from mtkit.training.loss import label_smoothed_nll_loss


@torch.no_grad()
def valid_loss(
    model: Transformer,
    data: ParallelData,
    cfg: TrainConfig,
    device: torch.device,
    amp_dtype: torch.dtype | None,
) -> dict[str, float]:
    """Smoothed loss and NLL per target token, and perplexity, over the whole split."""
    sizes = sentence_sizes(data.src_lengths, data.tgt_lengths)
    pairs = PairDataset(data)
    loss_sum = nll_sum = 0.0
    ntokens = 0
    for indices in sorted_batches(sizes, cfg.max_tokens):
        batch = collate([pairs[i] for i in indices.tolist()]).to(device)
        with autocast(device, amp_dtype):
            logits = model(batch.src, batch.tgt_in)  # (B, T, V)
        loss, nll = label_smoothed_nll_loss(logits, batch.tgt_out, cfg.label_smoothing)
        loss_sum, nll_sum = loss_sum + loss.item(), nll_sum + nll.item()
        ntokens += int(batch.tgt_out.ne(PAD_ID).sum())
    ntokens = max(ntokens, 1)
    nll_mean = nll_sum / ntokens
    return {
        "valid_loss": loss_sum / ntokens,
        "valid_nll": nll_mean,
        "valid_ppl": math.exp(min(nll_mean, 700.0)),
    }


@torch.no_grad()
def valid_bleu(
    model: Transformer,
    data: ParallelData,
    cfg: TrainConfig,
    device: torch.device,
    tokenizer: Tokenizer,
) -> tuple[float, str]:
    """Decode the validation sources (beam ``valid_beam``) and score them: (BLEU, signature)."""
    from sacrebleu.metrics import BLEU

    from mtkit.decoding.search import generate

    n = min(len(data), cfg.valid_max_sentences or len(data))
    search = SearchConfig(beam=cfg.valid_beam)
    src_sizes = torch.as_tensor(data.src_lengths[:n]) + 1  # (n,) source + EOS
    per_batch = max(cfg.max_tokens // max(cfg.valid_beam, 1), int(src_sizes.max()))
    hyps: list[str] = [""] * n
    for indices in sorted_batches(src_sizes, per_batch):
        rows = [torch.from_numpy(data.side("src", i)) for i in indices.tolist()]
        src = pad_sequence(
            [torch.cat([r, torch.tensor([EOS_ID])]) for r in rows],
            batch_first=True,
            padding_value=PAD_ID,
        )  # (B, S)
        results = generate([model], src.to(device), search)
        texts = tokenizer.decode([best[0].tokens for best in results])
        for i, text in zip(indices.tolist(), texts, strict=True):
            hyps[i] = text
    refs = data.text("tgt")[:n]
    bleu = BLEU()
    return bleu.corpus_score(hyps, [refs]).score, str(bleu.get_signature())


def validate(
    model: Transformer,
    data: ParallelData,
    cfg: TrainConfig,
    device: torch.device,
    amp_dtype: torch.dtype | None,
    tokenizer: Tokenizer,
) -> dict[str, Any]:
    """valid_loss, valid_nll, valid_ppl, valid_bleu (None when not computed), bleu_signature."""
    was_training = model.training
    model.eval()
    try:
        record: dict[str, Any] = valid_loss(model, data, cfg, device, amp_dtype)
        record["valid_bleu"], record["bleu_signature"] = None, None
        if cfg.validate_bleu:
            record["valid_bleu"], record["bleu_signature"] = valid_bleu(
                model, data, cfg, device, tokenizer
            )
    finally:
        model.train(was_training)
    return record
