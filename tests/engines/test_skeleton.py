"""The skeleton every engine shares (mtkit.engines.base.Engine), run through every engine of
the registry: lines in = lines out, in order, whatever the batching; blank lines stay blank;
long lines cut at the engine's limit with a warning; the same tokenizer and limits for all."""

from __future__ import annotations

import math

import pytest
from engine_helpers import KINDS, LINES

from mtkit.engines.base import Engine, Translation, best_texts
from mtkit.serve.service import token_counter


def same(a: list[list[Translation]], b: list[list[Translation]], engine: Engine) -> bool:
    """Equal hypotheses; scores equal to float rounding (padding changes the sums' order).
    CTranslate2's scores are compared only for texts: a line cut at its own length bound
    inside a batch with a longer bound is scored over more tokens (mtkit.engines.ct2)."""
    texts = [[(h.text, h.tokens) for h in x] for x in a]
    assert texts == [[(h.text, h.tokens) for h in y] for y in b]
    if engine.config.engine == "mtkit":
        bad = [
            (h, g)
            for x, y in zip(a, b, strict=True)
            for h, g in zip(x, y, strict=True)
            if not math.isclose(h.score, g.score, rel_tol=1e-5, abs_tol=1e-5)
        ]
        assert not bad, bad
    return True


class Counter:
    def __init__(self) -> None:
        self.total = 0

    def update(self, n: int) -> None:
        self.total += n


def test_lines_in_equal_lines_out_in_order(engine: Engine) -> None:
    lines = ["", *LINES[:7], "   ", *LINES[7:], "\t"]
    progress = Counter()
    results = engine.translate(lines, progress=progress)
    assert len(results) == len(lines) and progress.total == len(lines)
    assert [bool(r) for r in results] == [bool(line.strip()) for line in lines]
    assert len(set(best_texts(results))) > len(lines) // 2  # the model tells lines apart
    one_by_one = [engine.translate([line])[0] for line in lines]  # a batch of one each
    assert same(results, one_by_one, engine)


def test_order_and_batch_size_change_nothing(engine: Engine, load_kind) -> None:
    kind = next(
        k
        for k, (name, settings) in KINDS.items()
        if name == engine.config.engine and settings.get("workers", 1) == engine.config.workers
    )
    small = load_kind(kind, max_tokens=12)  # batches of one or two lines
    want = engine.translate(LINES)
    assert same(small.translate(LINES), want, engine)
    assert same(engine.translate(LINES[::-1]), want[::-1], engine)


def test_groups_decode_each_group_as_one_batch(engine: Engine) -> None:
    groups = [LINES[:5], ["", LINES[5]], LINES[6:15], [" "]]
    found = engine.translate_groups(groups)
    assert [len(g) for g in found] == [len(g) for g in groups]
    for group, hyps in zip(groups, found, strict=True):
        assert same(hyps, engine.translate(group), engine)


def test_long_lines_are_cut_at_the_engines_limit(engine: Engine, capsys) -> None:
    assert engine.max_source_pieces == min(engine.config.max_input_tokens, 32 - 1)
    long = " ".join(LINES * 3)  # far more pieces than the model's 32 positions
    assert len(engine.src_tokenizer.encode([long])[0]) > engine.max_source_pieces
    capsys.readouterr()
    [hyps] = engine.translate([long], first_number=7)
    assert hyps and best_texts([hyps])[0]
    assert "line 7: " in capsys.readouterr().err
    cut = engine.src_tokenizer.decode([engine.encode([long])[0]])[0]
    assert same(engine.translate([cut]), [hyps], engine)


def test_every_engine_has_the_same_face(engine: Engine, engine_ckpt) -> None:
    from mtkit.checkpoint import load_for_inference

    loaded = load_for_inference(engine_ckpt)
    assert engine.src_tokenizer.sha256 == loaded.src_tokenizer.sha256
    assert engine.tgt_tokenizer.sha256 == loaded.tgt_tokenizer.sha256
    assert engine.max_positions == loaded.config.max_positions
    assert engine.encode(LINES[:3]) == loaded.src_tokenizer.encode(LINES[:3])


def test_token_counter_counts_what_the_engine_decodes(engine: Engine) -> None:
    """The server's batch cost: the engine's source pieces (cut as it cuts them) + EOS."""
    long = " ".join(LINES * 3)
    lines = [*LINES[:4], long]
    want = sum(len(row) + 1 for row in engine.encode(lines))
    assert token_counter(engine)(lines) == want
    assert want < sum(len(row) + 1 for row in engine.src_tokenizer.encode(lines))  # the cut


@pytest.mark.parametrize("kind", [k for k in KINDS if "workers" in k])
def test_workers_equal_one_worker(kind: str, load_kind) -> None:
    one = load_kind(kind.split("-")[0])
    assert load_kind(kind).translate(LINES) == one.translate(LINES)  # the same batches: exact
