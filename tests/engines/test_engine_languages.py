"""What every engine says its model translates: the checkpoint's language codes, carried into
an export (mtkit.json, a Marian tokenizer) and back (mtkit import)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from engine_helpers import engine_config

from mtkit.checkpoint import Checkpoint
from mtkit.engines import load_engine
from mtkit.languages import Languages

NAMED = Languages(("en",), ("de", "fr"))


@pytest.fixture(scope="module")
def named_ckpt(engine_ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The engines' tiny model, naming its languages."""
    path = tmp_path_factory.mktemp("named") / "named.pt"
    dataclasses.replace(Checkpoint.load(engine_ckpt), languages=NAMED).save(path)
    return path


@pytest.fixture(scope="module")
def named_ct2(named_ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("ctranslate2", reason="needs the 'ct2' extra")
    from mtkit.export.ct2 import export_ct2

    return export_ct2(named_ckpt, tmp_path_factory.mktemp("named") / "ct2")


@pytest.mark.parametrize("kind", ["mtkit", "mtkit-2-workers", "ctranslate2"])
def test_every_engine_names_the_checkpoints_languages(kind: str, request) -> None:
    model = request.getfixturevalue("named_ct2" if kind == "ctranslate2" else "named_ckpt")
    assert load_engine([str(model)], engine_config(kind)).languages() == NAMED


def test_a_model_naming_none_gives_none(engine) -> None:
    assert engine.languages() is None


def test_the_export_writes_them_and_an_older_export_reads_its_checkpoints(
    named_ckpt: Path, named_ct2: Path, tmp_path: Path
) -> None:
    meta = json.loads((named_ct2 / "mtkit.json").read_text())
    assert (meta["src_lang"], meta["tgt_lang"]) == ("en", "de,fr")
    older = tmp_path / "older"
    older.mkdir()
    for item in named_ct2.iterdir():
        (older / item.name).write_bytes(item.read_bytes())
    del meta["src_lang"], meta["tgt_lang"]  # as exports before the codes were written
    (older / "mtkit.json").write_text(json.dumps(meta))
    assert load_engine([str(older)], engine_config("ctranslate2")).languages() == NAMED
    meta["checkpoint"] = str(tmp_path / "gone.pt")
    (older / "mtkit.json").write_text(json.dumps(meta))
    assert load_engine([str(older)], engine_config("ctranslate2")).languages() is None


def test_a_marian_export_carries_them_to_an_import(named_ckpt: Path, tmp_path: Path) -> None:
    pytest.importorskip("transformers", reason="needs the 'hf' extra")
    from mtkit.export.hf import export_hf
    from mtkit.pipeline.export import import_model

    export_hf(named_ckpt, tmp_path / "hf")
    config = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())
    assert (config["source_lang"], config["target_lang"]) == ("en", "de,fr")
    summary = import_model(tmp_path / "hf", tmp_path / "back.pt")
    assert "MarianMTModel en-de,fr" in summary
    assert Checkpoint.load(tmp_path / "back.pt").languages == NAMED
    import_model(tmp_path / "hf", tmp_path / "given.pt", source_lang="cs", force=True)
    assert Checkpoint.load(tmp_path / "given.pt").languages == Languages(("cs",), ("de", "fr"))
