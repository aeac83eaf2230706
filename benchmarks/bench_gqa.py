"""Grouped-query attention (model.kv_heads) on the bench model: decoding-state size and beam
search speed, and the CPU choice of how query heads meet their shared key/value head.

For transformer-small (d 256, 4 heads, 3+3 layers, random weights, joint vocabulary 8000) with
kv_heads 4 (the default), 2 and 1 this prints the bytes of decoding state one sentence holds
(beam 5, 30 source tokens, 30 steps: mtkit.model.inference.cache_bytes_per_sentence) and the
beam-5 search speed over 32 random sources, with mtkit.model.layers.attention computing grouped
attention in each of three ways, alternating, best of ``--rounds``:

- ``fold``: each group of query heads becomes extra queries of its key/value head (mtkit's
  choice where the mask allows: every cached step and every cross-attention);
- ``sdpa``: scaled_dot_product_attention(enable_gqa=True);
- ``expand``: keys/values copied for every query head (repeat_interleave), then plain SDPA.

Then the attention call alone, as in one beam step of that model (160 rows = 32 sentences x
beam 5, one query over 30 cached steps, Dh 64), best of 200 calls per way.

    .venv/bin/python benchmarks/bench_gqa.py --rounds 5
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from mtkit.config import SearchConfig
from mtkit.decoding.search import generate
from mtkit.model import layers, positions
from mtkit.model.inference import cache_bytes_per_sentence
from mtkit.model.transformer import build_model, resolve_model_config

FOLD = layers.attention


def sdpa(q, k, v, mask=None, dropout_p=0.0, is_causal=False):  # type: ignore[no-untyped-def]
    gqa = q.shape[-3] != k.shape[-3]
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal, enable_gqa=gqa
    )


def expand(q, k, v, mask=None, dropout_p=0.0, is_causal=False):  # type: ignore[no-untyped-def]
    group = q.shape[-3] // k.shape[-3]
    k, v = k.repeat_interleave(group, dim=-3), v.repeat_interleave(group, dim=-3)
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal
    )


WAYS = {"fold": FOLD, "sdpa": sdpa, "expand": expand}


def use(way: str) -> None:
    layers.attention = positions.attention = WAYS[way]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sentences", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    opts = parser.parse_args()
    torch.set_num_threads(opts.threads)
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, 8000, (opts.sentences, 30), generator=g)
    src[:, -1] = 3  # EOS
    search = SearchConfig(beam=5, max_len_a=0.0, max_len_b=30, min_len=30)
    print(f"{'kv_heads':>8} {'state/sentence':>15}   beam 5, {opts.sentences} sentences, 30 steps")
    for kv_heads in (4, 2, 1):
        torch.manual_seed(0)
        overrides = {"kv_heads": kv_heads, "share_all_embeddings": True}
        cfg = resolve_model_config("transformer-small", 8000, 8000, overrides)
        model = build_model(cfg).eval()
        use("fold")
        size = cache_bytes_per_sentence(model, src_len=30, steps=30, beam=5)
        best = {way: float("inf") for way in (WAYS if kv_heads < 4 else ["fold"])}
        for _ in range(opts.rounds):
            for way in best:
                use(way)
                start = time.perf_counter()
                with torch.inference_mode():
                    generate([model], src, search)
                best[way] = min(best[way], time.perf_counter() - start)
        tokens = opts.sentences * 30
        rates = "  ".join(f"{way} {tokens / t:7.0f} tok/s" for way, t in best.items())
        print(f"{kv_heads:>8} {size / 2**10:>11.1f} KiB   {rates}")
    use("fold")
    one_step_attention()


def one_step_attention(rows: int = 160, steps: int = 30) -> None:
    """Microseconds of one cached-step attention call per way, best of 200."""
    print(f"one beam step's attention ({rows} rows, {steps} cached steps, 4 query heads):")
    for kv_heads in (4, 2, 1):
        q = torch.randn(rows, 4, 1, 64)
        k, v = torch.randn(rows, kv_heads, steps, 64), torch.randn(rows, kv_heads, steps, 64)
        times = {}
        for way, attend in (WAYS if kv_heads < 4 else {"fold": FOLD}).items():
            best = float("inf")
            for _ in range(200):
                start = time.perf_counter()
                attend(q, k, v)
                best = min(best, time.perf_counter() - start)
            times[way] = best
        print(f"{kv_heads:>8}   " + "  ".join(f"{w} {t * 1e6:6.0f} us" for w, t in times.items()))


if __name__ == "__main__":
    main()
