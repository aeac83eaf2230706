"""Model invariants: cached decoding equals the full pass, padding invariance, causality."""

import pytest
import torch

from mtkit.config import ModelConfig
from mtkit.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from mtkit.errors import MtkitError
from mtkit.model.layers import sinusoidal_positions
from mtkit.model.state import DecoderState
from mtkit.model.transformer import build_model, count_parameters, resolve_model_config


def tiny(pre_norm: bool = False, src_vocab: int = 23, **kw) -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = ModelConfig(src_vocab_size=src_vocab, tgt_vocab_size=29, d_model=32, ffn_dim=64, heads=4,
                      encoder_layers=2, decoder_layers=2, dropout=0.0, attention_dropout=0.0,
                      pre_norm=pre_norm, **kw)  # fmt: skip
    return build_model(cfg).eval()


def batch(lengths: list[int], vocab: int, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    out = torch.full((len(lengths), max(lengths)), PAD_ID)
    for i, n in enumerate(lengths):
        out[i, :n] = torch.randint(4, vocab, (n,), generator=g)
        out[i, n - 1] = EOS_ID
    return out


def rewind(state: DecoderState) -> None:
    """Forget the last decoding step (every layer's cache and the position)."""
    for layer in state.layers:
        layer.own.length -= 1
    state.offset -= 1


@pytest.mark.parametrize("pre_norm", [False, True])
def test_cached_steps_equal_full_forward(pre_norm: bool) -> None:
    model = tiny(pre_norm)
    src = batch([7, 4, 5], 23)
    tgt = torch.cat([torch.full((3, 1), BOS_ID), batch([6, 6, 6], 29, seed=2)], dim=1)
    with torch.no_grad():
        enc = model.encode(src)
        full = model.decode(tgt, enc).log_softmax(-1)
        cache = model.start_state(enc, max_len=tgt.shape[1])
        for t in range(tgt.shape[1]):
            step = model.decode_step(tgt[:, t], cache).log_softmax(-1)
            torch.testing.assert_close(step, full[:, t], atol=1e-5, rtol=1e-5)


def test_cache_reorder_follows_rows() -> None:
    model = tiny()
    src = batch([5, 6], 23)
    tgt = torch.tensor([[BOS_ID, 5, 6, 7], [BOS_ID, 8, 9, 10]])
    with torch.no_grad():
        enc = model.encode(src)
        full = model.decode(tgt, enc).log_softmax(-1)
        cache = model.start_state(enc, max_len=4)
        model.decode_step(tgt[:, 0], cache)
        model.decode_step(tgt[:, 1], cache)
        swap = torch.tensor([1, 0, 1])  # reorder and grow the batch
        cache.reorder(swap, swap)
        model.decode_step(tgt[swap, 2], cache)
        out = model.decode_step(tgt[swap, 3], cache).log_softmax(-1)
    torch.testing.assert_close(out, full[swap, 3], atol=1e-5, rtol=1e-5)


def test_same_size_reorders_swap_buffers_and_follow_rows() -> None:
    """Beam moves (batch size unchanged) at every step, each gathered into the spare buffers:
    the rows are beams of one sentence (one source), so only their self-attention state moves."""
    model = tiny()
    src = batch([5], 23).repeat(3, 1)
    tgt = torch.tensor([[BOS_ID, 5, 6, 7, 9], [BOS_ID, 8, 9, 10, 5], [BOS_ID, 4, 4, 6, 8]])
    orders = [torch.tensor([2, 0, 1]), torch.tensor([0, 0, 2]), torch.tensor([1, 2, 1])]
    with torch.no_grad():
        enc = model.encode(src)
        cache = model.start_state(enc, max_len=5)
        history = tgt[:, :1]  # the tokens each cache row has been fed
        model.decode_step(history[:, 0], cache)
        buffers = {cache.layers[0].own.k.data_ptr()}
        for step, order in enumerate(orders, start=1):
            cache.reorder(order)
            history = torch.cat([history[order], tgt[order, step : step + 1]], dim=1)
            buffers.add(cache.layers[0].own.k.data_ptr())
            out = model.decode_step(history[:, -1], cache).log_softmax(-1)
            full = model.decode(history, enc).log_softmax(-1)[:, -1]
            torch.testing.assert_close(out, full, atol=1e-5, rtol=1e-5)
    assert len(buffers) == 2  # two buffers, swapped back and forth, no new allocation


@pytest.mark.parametrize("pre_norm", [False, True])
def test_grouped_rows_share_their_source_and_equal_a_full_forward(pre_norm: bool) -> None:
    """Beams of a sentence share one source row (cache.group): 2 sources x 3 rows each, with
    beam moves, a sentence leaving, and rows growing from one per source, as in beam search."""
    model = tiny(pre_norm)
    src = batch([5, 7], 23)
    g = torch.Generator().manual_seed(4)
    with torch.no_grad():
        enc = model.encode(src)
        cache = model.start_state(enc, max_len=6)
        history = torch.full((2, 1), BOS_ID)
        owner = torch.tensor([0, 1])  # the source row of each decoding row
        moves = [
            (torch.tensor([0, 0, 0, 1, 1, 1]), torch.tensor([0, 1])),  # 1 row -> 3 per source
            (torch.tensor([2, 0, 0, 5, 3, 4]), None),  # beam moves within each sentence
            (torch.tensor([4, 4, 3]), torch.tensor([1])),  # sentence 0 leaves
            (torch.tensor([1, 2, 0]), None),
        ]
        for index, sources in moves:
            model.decode_step(history[:, -1], cache)
            cache.reorder(index, sources)
            owner = owner[index]
            new = torch.randint(4, 29, (len(index), 1), generator=g)
            history = torch.cat([history[index], new], 1)
            out = model.decode_step(history[:, -1], cache).log_softmax(-1)
            rewind(cache)  # the next move re-feeds this step's token
            full = model.decode(history, model.encode(src[owner])).log_softmax(-1)[:, -1]
            torch.testing.assert_close(out, full, atol=1e-5, rtol=1e-5)
        assert cache.group == 3 and cache.layers[0].source.k.shape[0] == 1


def test_reorder_refuses_rows_that_cannot_share_sources_evenly() -> None:
    model = tiny()
    with torch.no_grad():
        cache = model.start_state(model.encode(batch([5, 7], 23)), max_len=3)
    with pytest.raises(ValueError, match="3 rows cannot share 2 sources"):
        cache.reorder(torch.tensor([0, 0, 1]), torch.tensor([0, 1]))


@pytest.mark.parametrize("share", [False, True])
def test_same_seed_same_weights(share: bool) -> None:
    """Initialisation draws in a fixed order: separate source and target embeddings once came
    from a set, whose order follows memory addresses, and two builds could differ."""
    vocab = 29 if share else 23
    first = tiny(src_vocab=vocab, share_all_embeddings=share).state_dict()
    for _ in range(10):
        garbage = [torch.nn.Embedding(5, 3) for _ in range(7)]  # shift memory addresses
        again = tiny(src_vocab=vocab, share_all_embeddings=share).state_dict()
        assert all(torch.equal(first[k], again[k]) for k in first), garbage
    assert torch.equal(first["src_embed.weight"][1:], first["tgt_embed.weight"][1:]) == share


@pytest.mark.parametrize("pre_norm", [False, True])
def test_padding_invariance(pre_norm: bool) -> None:
    model = tiny(pre_norm)
    lengths = [3, 8, 5]
    src = batch(lengths, 23)
    tgt = torch.cat([torch.full((3, 1), BOS_ID), batch([4, 2, 6], 29, seed=3)], dim=1)
    tgt_lengths = [5, 3, 7]
    with torch.no_grad():
        together = model(src, tgt)
        for i, (n, m) in enumerate(zip(lengths, tgt_lengths, strict=True)):
            alone = model(src[i : i + 1, :n], tgt[i : i + 1, :m])
            torch.testing.assert_close(together[i, :m], alone[0], atol=1e-5, rtol=1e-5)


def test_decoder_is_causal() -> None:
    model = tiny()
    src = batch([6], 23)
    tgt = torch.tensor([[BOS_ID, 5, 6, 7, 8]])
    changed = tgt.clone()
    changed[0, 3:] = torch.tensor([20, 21])
    with torch.no_grad():
        a, b = model(src, tgt), model(src, changed)
    torch.testing.assert_close(a[:, :3], b[:, :3])
    assert not torch.allclose(a[:, 3:], b[:, 3:])


def test_embeddings_are_tied_and_shared() -> None:
    model = tiny(share_all_embeddings=False, tie_output=True)
    assert model.output is None
    cfg = ModelConfig(src_vocab_size=30, tgt_vocab_size=30, d_model=16, ffn_dim=32, heads=2,
                      encoder_layers=1, decoder_layers=1, share_all_embeddings=True)  # fmt: skip
    shared = build_model(cfg)
    assert shared.src_embed.weight is shared.tgt_embed.weight
    untied = build_model(ModelConfig(src_vocab_size=30, tgt_vocab_size=30, d_model=16,
                                     ffn_dim=32, heads=2, encoder_layers=1, decoder_layers=1,
                                     tie_output=False))  # fmt: skip
    assert count_parameters(untied) == count_parameters(shared) + 2 * 30 * 16


def test_positions_match_formula() -> None:
    table = sinusoidal_positions(50, 8)
    pos, i = 7, 2
    assert table[pos, i].item() == pytest.approx(
        torch.sin(torch.tensor(pos / 10000 ** (2 * i / 8))).item(), abs=1e-6
    )
    assert table[pos, 4 + i].item() == pytest.approx(
        torch.cos(torch.tensor(pos / 10000 ** (2 * i / 8))).item(), abs=1e-6
    )


def test_presets_and_errors() -> None:
    base = resolve_model_config("transformer-base", 100, 100)
    assert (base.d_model, base.ffn_dim, base.heads, base.encoder_layers) == (512, 2048, 8, 6)
    big = resolve_model_config("transformer-big", 100, 100, {"decoder_layers": 2})
    assert (big.d_model, big.dropout, big.decoder_layers) == (1024, 0.3, 2)
    with pytest.raises(MtkitError, match="unknown preset"):
        resolve_model_config("nope", 10, 10)
    with pytest.raises(MtkitError, match="divisible"):
        build_model(ModelConfig(d_model=30, heads=4))
    with pytest.raises(MtkitError, match="max_positions"):
        tiny(max_positions=4).encode(batch([6], 23))
