"""The decoding state (mtkit/model/state.py) over every variant (tests/variants.py): reordered
rows (beam moves, sentences leaving, beams sharing their source) decode as a full pass over
their history would, and the key/value buffers are reused rather than allocated."""

import copy
import warnings

import pytest
import torch
from model_helpers import batch, tiny
from torch import Tensor
from variants import variant_params

from mtkit.data.tokenizer import BOS_ID
from mtkit.model.pointer_cache import PointerCache
from mtkit.model.state import KeyValueCache, SourceCache


@pytest.mark.parametrize("variant", variant_params())
def test_cache_reorder_follows_rows(variant: dict) -> None:
    model = tiny(**variant)
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


@pytest.mark.parametrize("variant", variant_params())
def test_same_size_reorders_swap_buffers_and_follow_rows(variant: dict) -> None:
    """Beam moves (batch size unchanged) at every step, each gathered into the spare buffers:
    the rows are beams of one sentence (one source), so only their self-attention state moves."""
    model = tiny(**variant)
    src = batch([5], 23).repeat(3, 1)
    tgt = torch.tensor([[BOS_ID, 5, 6, 7, 9], [BOS_ID, 8, 9, 10, 5], [BOS_ID, 4, 4, 6, 8]])
    orders = [torch.tensor([2, 0, 1]), torch.tensor([0, 0, 2]), torch.tensor([1, 2, 1])]
    with torch.no_grad():
        enc = model.encode(src)
        cache = model.start_state(enc, max_len=5)
        history = tgt[:, :1]  # the tokens each cache row has been fed
        model.decode_step(history[:, 0], cache)
        own = cache.layers[0].own
        buffers = {own.k.data_ptr()} if isinstance(own, KeyValueCache) else set()
        for step, order in enumerate(orders, start=1):
            cache.reorder(order)
            history = torch.cat([history[order], tgt[order, step : step + 1]], dim=1)
            if isinstance(own, KeyValueCache):
                buffers.add(cache.layers[0].own.k.data_ptr())
            out = model.decode_step(history[:, -1], cache).log_softmax(-1)
            full = model.decode(history, enc).log_softmax(-1)[:, -1]
            torch.testing.assert_close(out, full, atol=1e-5, rtol=1e-5)
    if isinstance(own, KeyValueCache):  # two buffers swapped back and forth, no new allocation
        assert len(buffers) == 2


def test_leaving_rows_are_gathered_into_the_spare_buffers() -> None:
    """Rows grow once (a beam's first step: new buffers), then shrink as sentences leave:
    each step's rows land in the first rows of the spare pair (no allocation), and each
    step equals a full forward pass."""
    model = tiny()
    src = batch([5, 7, 4], 23)
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        enc = model.encode(src)
        cache = model.start_state(enc, max_len=6)
        history, owner = torch.full((3, 1), BOS_ID), torch.tensor([0, 1, 2])
        moves = [
            (torch.tensor([0, 0, 1, 1, 2, 2]), torch.tensor([0, 1, 2])),  # 2 beams a source
            (torch.tensor([1, 0, 3, 3, 4, 5]), None),
            (torch.tensor([0, 1, 5, 4]), torch.tensor([0, 2])),  # the second sentence leaves
            (torch.tensor([3, 2]), torch.tensor([1])),  # then the first
        ]
        pointers = set()
        for step, (index, sources) in enumerate(moves):
            model.decode_step(history[:, -1], cache)
            cache.reorder(index, sources)
            own = cache.layers[0].own
            assert own.k.shape[0] == len(index) and own.k.is_contiguous()
            if step:
                pointers.add(own.k.data_ptr())
            owner = owner[index]
            history = torch.cat(
                [history[index], torch.randint(4, 29, (len(index), 1), generator=g)], 1
            )
            out = model.decode_step(history[:, -1], copy.deepcopy(cache)).log_softmax(-1)
            full = model.decode(history, model.encode(src[owner])).log_softmax(-1)[:, -1]
            torch.testing.assert_close(out, full, atol=1e-5, rtol=1e-5)
    assert len(pointers) == 2  # after the growth: two buffers, swapped


@pytest.mark.parametrize("variant", variant_params())
def test_grouped_rows_share_their_source_and_equal_a_full_forward(variant: dict) -> None:
    """Beams of a sentence share one source row (cache.group): 2 sources x 3 rows each, with
    beam moves, a sentence leaving, and rows growing from one per source, as in beam search."""
    model = tiny(**variant)
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
            # on a copy: the next move re-feeds this step's token to the cache itself
            out = model.decode_step(history[:, -1], copy.deepcopy(cache)).log_softmax(-1)
            full = model.decode(history, model.encode(src[owner])).log_softmax(-1)[:, -1]
            torch.testing.assert_close(out, full, atol=1e-5, rtol=1e-5)
        assert cache.group == 3 and cache.layers[0].source.k.shape[0] == 1


def test_reorder_refuses_rows_that_cannot_share_sources_evenly() -> None:
    model = tiny()
    with torch.no_grad():
        cache = model.start_state(model.encode(batch([5, 7], 23)), max_len=3)
    with pytest.raises(ValueError, match="3 rows cannot share 2 sources"):
        cache.reorder(torch.tensor([0, 0, 1]), torch.tensor([0, 1]))


def test_pointer_cache_reads_what_a_moving_cache_holds() -> None:
    """A PointerCache moves pointers, never keys: through growing rows (a beam's first step),
    beams moving, sentences leaving and a roll-back (speculative decoding), every append
    returns exactly what a KeyValueCache under the same operations returns, and a reorder
    leaves the buffers as they were."""
    torch.manual_seed(0)
    shape = (3, 2, 12, 4)  # 3 rows, 2 heads, 12 positions, Dh 4
    moving = KeyValueCache(torch.zeros(shape), torch.zeros(shape))
    pointing = PointerCache.of(KeyValueCache(torch.zeros(shape), torch.zeros(shape)))
    rows = 3
    plan = [
        ("append", 1),
        ("reorder", torch.arange(3).repeat_interleave(2)),  # 6 rows
        ("append", 1),
        ("reorder", torch.tensor([1, 1, 0, 3, 5, 5])),
        ("append", 2),
        ("truncate", 3),
        ("reorder", torch.tensor([4, 0, 2])),  # 3 left
        ("append", 1),
        ("reorder", torch.tensor([2, 2, 1, 0])),
        ("append", 3),
    ]
    for op, arg in plan:
        if op == "append":
            k, v = torch.randn(rows, 2, arg, 4), torch.randn(rows, 2, arg, 4)
            for got, want in zip(pointing.append(k, v), moving.append(k, v), strict=True):
                assert torch.equal(got, want)
        elif op == "reorder":
            buffers = (pointing.k.clone(), pointing.v.clone())
            moving.reorder(arg)
            pointing.reorder(arg)
            rows = len(arg)
            if pointing.k.shape[0] == buffers[0].shape[0]:  # not grown: no bit moved
                for now, before in zip((pointing.k, pointing.v), buffers, strict=True):
                    # as bits: unfilled positions of a grown buffer may hold NaNs
                    assert torch.equal(now.view(torch.int32), before.view(torch.int32))
        else:
            moving.truncate(arg)
            pointing.truncate(arg)
    assert pointing.length == moving.length == 7
    assert pointing.k.shape[0] == 6  # the buffers grew once, to the most rows


def test_slots_no_row_reads_are_dropped_once_they_are_half_the_slots() -> None:
    """Rows joined at slot 2 and 4 of a decode whose first row left: compacting copies every
    buffer's slots, so 2 unread slots of 5 stay (masked), 4 of 5 go; decoding goes on equal."""
    model = tiny()
    tokens = torch.tensor([BOS_ID, 5, 6, 7, 8, 9])
    for joins_at, dropped in ((2, 0), (4, 4)):
        with torch.no_grad():
            state = model.start_state(model.encode(batch([5, 6], 23)[:1]), max_len=12)
            for t in range(joins_at):
                model.decode_step(tokens[t : t + 1], state)
            state.join(model.start_state(model.encode(batch([5, 6], 23)[1:]), max_len=12))
            for t in range(joins_at, 5):
                model.decode_step(tokens[[t, t - joins_at]], state)
            one = torch.tensor([1])
            state.reorder(one, one)  # the first row leaves
            before = copy.deepcopy(state)
            assert state.compact() == dropped
            assert state.offset == 5 - dropped and (state.first is None) == bool(dropped)
            got = model.decode_step(tokens[5 - joins_at : 6 - joins_at], state)
            want = model.decode_step(tokens[5 - joins_at : 6 - joins_at], before)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_sources_leaving_in_a_beam_search_order_move_in_place_only_the_last_ones() -> None:
    """Where the sources below the new count keep their places and the last ones fill the
    holes (a beam search's order, ``filled``), a reorder copies only those, within the room:
    the same buffer, holding what selecting gives. Another order goes through the spare pair,
    with the same result."""
    from mtkit.decoding.beam_search import filled

    gen = torch.Generator().manual_seed(0)
    k, v = (torch.randn((6, 2, 5, 4), generator=gen) for _ in range(2))
    cache = SourceCache(k[:4].clone(), v[:4].clone())
    cache.join(SourceCache(k[4:].clone(), v[4:].clone()))  # room from now on
    address = cache.k.data_ptr()
    for keep, in_place in [(filled([0, 2, 3, 5]), True), ([0, 2, 3], False)]:
        assert (keep == [0, 5, 2, 3]) == in_place
        cache.reorder(torch.tensor(keep))
        k, v = k[keep], v[keep]
        assert torch.equal(cache.k, k) and torch.equal(cache.v, v) and cache.k.is_contiguous()
        assert (cache.k.data_ptr() == address) == in_place


def test_joined_sources_are_written_into_room_and_leave_into_the_spare_pair() -> None:
    """Sources joining (narrower, wider) and leaving hold exactly what concatenating,
    zero-padding and selecting them gives; once room is kept, a join or a reorder allocates
    nothing (every buffer is one of two pairs)."""
    gen = torch.Generator().manual_seed(0)

    def padded(x: Tensor, width: int) -> Tensor:
        return torch.nn.functional.pad(x, (0, 0, 0, width - x.shape[2]))

    k, v = (torch.randn((3, 2, 5, 4), generator=gen) for _ in range(2))
    cache, held = SourceCache(k, v), []  # (held: no buffer freed and its address reused)
    for n, width, keep in [
        (2, 3, [0, 2, 4]),
        (1, 7, [3, 0]),
        (4, 2, [1, 2, 3, 4, 5]),
        (1, 7, [0, 5, 1]),
    ]:
        new_k, new_v = (torch.randn((n, 2, width, 4), generator=gen) for _ in range(2))
        cache.join(SourceCache(new_k, new_v))
        wide = max(k.shape[2], width)
        k = torch.cat([padded(k, wide), padded(new_k, wide)])
        v = torch.cat([padded(v, wide), padded(new_v, wide)])
        assert torch.equal(cache.k, k) and torch.equal(cache.v, v)
        held.append(cache.k)
        cache.reorder(torch.tensor(keep))
        k, v = k[keep], v[keep]
        assert torch.equal(cache.k, k) and torch.equal(cache.v, v) and cache.k.is_contiguous()
        held.append(cache.k)
    # from the third join on (no wider source, room for the rows): the same two buffers
    assert len({x.data_ptr() for x in held[4:]}) == 2
    # more sources than the room holds (each repeated): gathered into new buffers, not into
    # the spare pair's too-short views (a resize torch deprecates, and warns of)
    many = torch.arange(k.shape[0]).repeat_interleave(20)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cache.reorder(many)
    assert torch.equal(cache.k, k[many]) and torch.equal(cache.v, v[many])
