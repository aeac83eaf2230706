"""Helpers for the export tests: small checkpoints briefly trained on a word-substitution
"translation" task, and a plain greedy search to compare engines against."""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from mtkit.checkpoint import save_checkpoint
from mtkit.config import ModelConfig
from mtkit.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer
from mtkit.model.transformer import Transformer, build_model

SRC_WORDS = "the a man woman dog cat runs walks on in red blue big small house street".split()
TGT_WORDS = "der ein mann frau hund katze rennt geht auf im rot blau gross klein haus strasse"
DICT = dict(zip(SRC_WORDS, TGT_WORDS.split(), strict=True))


def corpus(n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        words = [rng.choice(SRC_WORDS) for _ in range(rng.randint(2, 7))]
        pairs.append((" ".join(words), " ".join(DICT[w] for w in words)))
    return pairs


TRAIN = corpus(600, seed=1)
TEST_LINES = [src for src, _ in corpus(12, seed=2)]


def pad(seqs: list[list[int]]) -> torch.Tensor:
    out = torch.full((len(seqs), max(map(len, seqs))), PAD_ID)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s)
    return out


def train_briefly(model: Transformer, src: Tokenizer, tgt: Tokenizer, steps: int) -> None:
    """A few hundred Adam steps: enough for confident, EOS-terminated outputs."""
    xs = [ids + [EOS_ID] for ids in src.encode([s for s, _ in TRAIN])]
    ys = [ids + [EOS_ID] for ids in tgt.encode([t for _, t in TRAIN])]
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    model.train()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread is faster, and immune to busy CPUs
    try:
        _train_steps(model, opt, xs, ys, g, steps)
    finally:
        torch.set_num_threads(threads)
    model.eval()


def _train_steps(model, opt, xs, ys, g, steps: int) -> None:
    for _ in range(steps):
        idx = torch.randint(len(xs), (32,), generator=g).tolist()
        y = pad([ys[i] for i in idx])
        y_in = torch.cat([torch.full((len(idx), 1), BOS_ID), y[:, :-1]], dim=1)
        logits = model(pad([xs[i] for i in idx]), y_in)
        loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), y, ignore_index=PAD_ID)
        opt.zero_grad()
        loss.backward()
        opt.step()


@dataclass
class Ckpt:
    path: Path
    model: Transformer
    src: Tokenizer
    tgt: Tokenizer


def make_ckpt(directory: Path, spms: dict[str, bytes], steps: int = 0, **overrides) -> Ckpt:
    joint = overrides.get("share_all_embeddings", False)
    src = Tokenizer(spms["joint" if joint else "src"])
    tgt = Tokenizer(spms["joint" if joint else "tgt"])
    values = dict(
        src_vocab_size=len(src),
        tgt_vocab_size=len(tgt),
        d_model=32,
        ffn_dim=64,
        heads=4,
        encoder_layers=2,
        decoder_layers=2,
        dropout=0.0,
        attention_dropout=0.0,
        max_positions=64,
    )
    cfg = ModelConfig(**{**values, **overrides})
    torch.manual_seed(0)
    model = build_model(cfg)
    if steps:
        train_briefly(model, src, tgt, steps)
    model.eval()
    name = "_".join(f"{k}={v}" for k, v in sorted(overrides.items())) or "default"
    path = directory / f"{name}-{steps}.pt"
    save_checkpoint(
        {
            "model_config": asdict(cfg),
            "model": model.state_dict(),
            "spm": {"src": src.proto, "tgt": tgt.proto},
        },
        path,
    )
    return Ckpt(path, model, src, tgt)


@torch.no_grad()
def greedy_reference(model: Transformer, src_ids: list[int], bound: int, min_len: int = 1):
    """Plain greedy search: at most ``bound`` tokens, then EOS is forced; EOS barred before
    ``min_len`` tokens, PAD and BOS never generated. Returns target ids without BOS/EOS."""
    enc = model.encode(torch.tensor([src_ids + [EOS_ID]]))
    cache = model.start_state(enc, max_len=bound + 1)
    token, out = BOS_ID, []
    for step in range(bound):
        logprobs = model.decode_step(torch.tensor([token]), cache).log_softmax(-1)[0]
        logprobs[[PAD_ID, BOS_ID]] = -float("inf")
        if step < min_len:
            logprobs[EOS_ID] = -float("inf")
        token = int(logprobs.argmax())
        if token == EOS_ID:
            break
        out.append(token)
    return out
