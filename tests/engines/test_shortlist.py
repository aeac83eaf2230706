"""`translate --shortlist` (mtkit.model.shortlisted, the engines): a shortlist as large as the
vocabulary decodes exactly as none does, and a smaller one as the model with every other
logit set to -inf does, for every kind of prepared model; CTranslate2 through its vmap."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from engine_helpers import LINES, SEARCH
from torch import Tensor

from mtkit.checkpoint import Checkpoint
from mtkit.config import SearchConfig, TranslateConfig
from mtkit.data.shortlist import Shortlist
from mtkit.decoding.batching import pad_batch
from mtkit.decoding.search import generate
from mtkit.engines import load_engine
from mtkit.engines.native import NativeEngine
from mtkit.errors import MtkitError
from mtkit.model.shortlisted import Shortlisted, group_plan

pytestmark = pytest.mark.usefixtures("one_thread")


def config(**values: object) -> TranslateConfig:
    return TranslateConfig.from_flat({"device": "cpu", "threads": 1, **SEARCH, **values})


def shortlist_file(ckpt: Path, out: Path, frequent: range | list[int], top_k: int = 3) -> Path:
    """A shortlist for ``ckpt``'s vocabularies: ``frequent`` and, for each source id s, the
    target ids (7 s + i) mod V, i < top_k (arbitrary, but each source piece its own)."""
    src, tgt = Checkpoint.load(ckpt).tokenizers()
    v = len(tgt)
    rows = tuple(tuple(sorted({(7 * s + i) % v for i in range(top_k)})) for s in range(len(src)))
    found = Shortlist(rows, tuple(frequent), src.sha256, tgt.sha256, len(src), v, "test", top_k)
    with out.open("wb") as handle:
        found.write(handle)
    return out


@pytest.fixture(scope="module")
def full_file(engine_ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every target piece frequent: the shortlist as large as the vocabulary."""
    v = len(Checkpoint.load(engine_ckpt).tokenizers()[1])
    return shortlist_file(engine_ckpt, tmp_path_factory.mktemp("sl") / "full.gz", range(v))


@pytest.fixture(scope="module")
def small_file(engine_ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shortlist_file(engine_ckpt, tmp_path_factory.mktemp("sl") / "small.gz", [5, 9, 20])


def exact(engine_ckpt: Path, **values: object) -> list:
    return load_engine([str(engine_ckpt)], config(**values)).translate(LINES)


SETTINGS = {
    "packed": {},
    "default-matmul": {"cpu_matmul": "default"},
    "int8": {"quantize": "int8"},
    "bf16": {"dtype": "bf16"},
    "greedy": {"beam": 1},
    "nbest-alignment": {"beam": 3, "nbest": 2, "alignment": True},
    "sampling": {"sampling": True, "nbest": 2, "beam": 1},
}


@pytest.mark.parametrize("settings", list(SETTINGS.values()), ids=list(SETTINGS))
def test_a_full_shortlist_decodes_as_none(
    engine_ckpt: Path, full_file: Path, settings: dict
) -> None:
    """Texts, token counts, scores and log-probabilities equal, not just close."""
    plain = exact(engine_ckpt, **settings)
    assert exact(engine_ckpt, **settings, shortlist=str(full_file)) == plain


def test_a_full_shortlist_decodes_an_ensemble_as_none(engine_ckpt: Path, full_file: Path) -> None:
    models = [str(engine_ckpt)] * 2
    plain = load_engine(models, config()).translate(LINES)
    assert load_engine(models, config(shortlist=str(full_file))).translate(LINES) == plain


class Masked:
    """The reference: the whole output layer, every logit outside ``allowed`` set to -inf."""

    def __init__(self, model: torch.nn.Module, allowed: Tensor) -> None:
        self._model = model
        self.allowed = allowed

    def __getattr__(self, name: str) -> object:
        return getattr(self._model, name)

    def decode_step(self, tokens: Tensor, state: object) -> Tensor:
        logits = self._model.decode_step(tokens, state)
        out = torch.full_like(logits, -math.inf)
        out[:, self.allowed] = logits[:, self.allowed]
        return out


@pytest.mark.parametrize(
    "settings",
    [{}, {"cpu_matmul": "default"}, {"quantize": "int8"}, {"dtype": "bf16"}],
    ids=["packed", "default", "int8", "bf16"],
)
@pytest.mark.parametrize("beam", [1, 3])
def test_a_small_shortlist_decodes_as_the_masked_model(
    engine_ckpt: Path, small_file: Path, settings: dict, beam: int
) -> None:
    """Batched, in groups of 4 sentences, as each sentence alone with the model's logits
    outside its group's union set to -inf. int8 quantizes a projection's input per call, so
    its groups compute differently batched and alone: it is compared in one group, batched."""
    engine = load_engine([str(engine_ckpt)], config(shortlist=str(small_file), **settings))
    assert isinstance(engine, NativeEngine) and engine.shortlist is not None
    rows = engine.encode(LINES)
    ids = engine.src_tokenizer.specials
    int8 = bool(settings.get("quantize"))
    found = group_plan(
        engine.shortlist,
        rows,
        engine.tgt_tokenizer.specials,
        torch.device("cpu"),
        group=len(rows) if int8 else 4,
    )
    assert len(found.sizes) == (1 if int8 else 6)
    assert max(found.sizes) < engine.models[0].tgt_vocab_size
    model, weight = engine.models[0], engine.projection_weights[0]
    search = SearchConfig(beam=beam, nbest=beam, max_len_a=1.0, max_len_b=2)
    short = Shortlisted(model, found, model, weight)
    src = pad_batch([row + [ids.eos] for row in rows], pad=ids.pad)
    got = generate([short], src, search)
    if int8:
        allowed = found.tables[0]
        want = generate([Masked(model, allowed)], src, search)
    for i, (row, hyps) in enumerate(zip(rows, got, strict=True)):
        g = int(found.group_of[i])
        allowed = found.tables[g, : found.sizes[g]]
        refs = (
            want[i]
            if int8
            else generate([Masked(model, allowed)], pad_batch([row + [ids.eos]]), search)[0]
        )
        assert [short.vocabulary_ids(i, h.tokens) for h in hyps] == [r.tokens for r in refs]
        assert [h.score for h in hyps] == pytest.approx([r.score for r in refs], abs=1e-4)
        assert {t for r in refs for t in r.tokens} <= set(allowed.tolist())


def test_groups_follow_the_reordered_rows(engine_ckpt: Path, small_file: Path) -> None:
    """Sentences of different lengths leave the batch at different steps: every group keeps
    its own union (one sentence per group against groups of 16 and one per batch)."""
    engine = load_engine([str(engine_ckpt)], config(shortlist=str(small_file), beam=3))
    assert isinstance(engine, NativeEngine)
    found = {}
    for group in (1, 16, 10**6):
        engine.shortlist_rows = 3 * group  # beam 3: groups of that many sentences
        found[group] = engine.translate(LINES)
    assert found[1] != found[10**6]  # the groups matter here
    lone = [engine.translate([line])[0] for line in LINES]  # every batch one sentence
    assert [[t.text for t in x] for x in found[1]] == [[t.text for t in x] for x in lone]


def test_workers_decode_with_the_shortlist(engine_ckpt: Path, small_file: Path) -> None:
    one = exact(engine_ckpt, shortlist=str(small_file))
    assert exact(engine_ckpt, shortlist=str(small_file), workers=2) == one
    assert one != exact(engine_ckpt)  # the shortlist changed something


def test_a_shortlist_of_another_vocabulary_is_refused(
    engine_ckpt: Path, tmp_path: Path, tiny_dataset: Path
) -> None:
    from mtkit.data.binarized import ParallelData, load_tokenizers
    from mtkit.data.lexicon import learn_shortlist

    src, tgt = load_tokenizers(tiny_dataset)
    other = learn_shortlist(ParallelData(tiny_dataset, "train"), src, tgt, 2, 2)
    path = tmp_path / "other.gz"
    with path.open("wb") as handle:
        other.write(handle)
    for workers in (1, 2):  # refused before any worker starts
        with pytest.raises(MtkitError, match=rf"^--shortlist {path}: built for another source"):
            load_engine([str(engine_ckpt)], config(shortlist=str(path), workers=workers))


# ---------------------------------------------------------------------------------------------
# CTranslate2: the shortlist as the export's vocabulary map


@pytest.fixture(scope="module")
def ct2_dirs(
    engine_ckpt: Path, full_file: Path, small_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    pytest.importorskip("ctranslate2", reason="needs the 'ct2' extra")
    from mtkit.export.ct2 import export_ct2

    base = tmp_path_factory.mktemp("ct2-vmap")
    files = {"none": "", "full": full_file, "small": small_file}
    return {
        name: export_ct2(engine_ckpt, base / name, shortlist=file) for name, file in files.items()
    }


def ct2(model: Path, **values: object) -> list:
    engine = load_engine([str(model)], config(engine="ctranslate2", beam=1, **values))
    return engine.translate(LINES)


def test_ct2_full_vmap_decodes_as_none(ct2_dirs: dict[str, Path]) -> None:
    assert (ct2_dirs["full"] / "vmap.txt").is_file()
    assert ct2(ct2_dirs["full"]) == ct2(ct2_dirs["none"])


def test_ct2_vmap_decodes_as_the_native_shortlist(
    engine_ckpt: Path, small_file: Path, ct2_dirs: dict[str, Path]
) -> None:
    texts = [[t.text for t in hyps] for hyps in ct2(ct2_dirs["small"])]
    assert texts != [[t.text for t in hyps] for hyps in ct2(ct2_dirs["none"])]
    engine = load_engine([str(engine_ckpt)], config(beam=1, shortlist=str(small_file)))
    assert isinstance(engine, NativeEngine)
    engine.shortlist_rows = 10**6  # one union per batch, as CTranslate2's
    assert texts == [[t.text for t in hyps] for hyps in engine.translate(LINES)]


def test_ct2_refuses_a_shortlist_option(ct2_dirs: dict[str, Path], small_file: Path) -> None:
    with pytest.raises(MtkitError, match=r"^--shortlist: the ctranslate2 engine decodes with"):
        ct2(ct2_dirs["none"], shortlist=str(small_file))


def test_constraints_decode_over_the_shortlist(
    engine_ckpt: Path, full_file: Path, small_file: Path
) -> None:
    """Constrained beam search: with a full shortlist as without one; with a small one, the
    phrases' pieces are allowed (the batch then one group) and every translation holds its."""
    from engine_helpers import TRAIN

    lines = [src for src, _ in TRAIN[:6]]
    phrases = [[tgt.split()[-1]] for _, tgt in TRAIN[:6]]
    search = SearchConfig(beam=3, max_len_a=1.0, max_len_b=4, constraints="unordered")

    def run(**values: object) -> list:
        engine = load_engine([str(engine_ckpt)], config(**values))
        return engine.translate(lines, search, constraints=phrases)

    assert run(shortlist=str(full_file)) == run()
    for hyps, wanted in zip(run(shortlist=str(small_file)), phrases, strict=True):
        assert wanted[0] in hyps[0].text.split()


def test_a_loop_stopped_under_a_shortlist_names_its_vocabulary_piece(
    engine_ckpt: Path, small_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mtkit.engines import native

    real, columns, named = native.generate, [], []

    def generate(*args, **kwargs):  # each hypothesis stopped in a loop of its first column
        found = real(*args, **kwargs)
        for hyp in (h for hyps in found for h in hyps if h.tokens):
            hyp.looped = (hyp.tokens[0], 9)
            columns.append(hyp.tokens[0])
        return found

    stopped = native.NativeEngine._stopped

    def naming(self, hyp):
        named.append((hyp.tokens[0], hyp.looped[0]))
        return stopped(self, hyp)

    monkeypatch.setattr(native, "generate", generate)
    monkeypatch.setattr(native.NativeEngine, "_stopped", naming)
    engine = load_engine([str(engine_ckpt)], config(shortlist=str(small_file)))
    rows = [engine.src_tokenizer.encode([line])[0] for line in LINES]
    found = engine.decode_batch(rows, SearchConfig(**SEARCH))
    assert len(named) == len(columns) > 0
    assert all(first == looped for first, looped in named)  # as the tokens, a vocabulary id
    assert [first for first, _ in named] != columns  # (not the shortlist's column)
    piece = engine.tgt_tokenizer.id_to_piece
    assert [h.stopped for hyps in found for h in hyps] == [
        f"a run of 9 pieces {piece(first)!r}" for first, _ in named
    ]
