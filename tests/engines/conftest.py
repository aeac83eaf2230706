"""Every engine of the registry, loaded over the same tiny model, for tests that every engine
must pass (the shared skeleton: encode, batch, decode, put back in order)."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_helpers import KINDS, engine_config, trained_ckpt

from mtkit.engines import load_engine
from mtkit.engines.base import Engine


@pytest.fixture(scope="session")
def engine_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model briefly trained on a word-substitution task (distinct outputs per line)."""
    return trained_ckpt(tmp_path_factory.mktemp("engines"))


@pytest.fixture(scope="session")
def engine_ct2_dir(engine_ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("ctranslate2", reason="needs the 'ct2' extra")
    from mtkit.export.ct2 import export_ct2

    return export_ct2(engine_ckpt, tmp_path_factory.mktemp("engines") / "ct2")


@pytest.fixture(scope="session")
def load_kind(request: pytest.FixtureRequest):
    """``load(kind, **settings)``: that engine over the tiny model (exported for CTranslate2)."""

    def load(kind: str, **values: object) -> Engine:
        name = KINDS[kind][0]
        fixture = "engine_ct2_dir" if name == "ctranslate2" else "engine_ckpt"
        model = request.getfixturevalue(fixture)
        return load_engine([str(model)], engine_config(kind, **values))

    return load


@pytest.fixture(scope="session", params=list(KINDS))
def engine(request: pytest.FixtureRequest, load_kind) -> Engine:
    return load_kind(request.param)
