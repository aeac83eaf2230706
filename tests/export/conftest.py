"""Fixtures for the export tests, which all run offline (see ``offline``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from export_helpers import TRAIN, Ckpt, make_ckpt

from mtkit.data.tokenizer import train_spm


@pytest.fixture(scope="session")
def spms() -> dict[str, bytes]:
    return {
        "src": train_spm([s for s, _ in TRAIN], vocab_size=70),
        "tgt": train_spm([t for _, t in TRAIN], vocab_size=80),
        "joint": train_spm([x for pair in TRAIN for x in pair], vocab_size=110),
    }


@pytest.fixture(scope="session")
def ckpt_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ckpts")


@pytest.fixture(scope="session")
def trained(ckpt_dir: Path, spms: dict[str, bytes]) -> Ckpt:
    """Post-LN, separate vocabularies, output tied to the target embedding; trained."""
    return make_ckpt(ckpt_dir, spms, steps=150)


@pytest.fixture(scope="session")
def trained_pre_norm(ckpt_dir: Path, spms: dict[str, bytes]) -> Ckpt:
    return make_ckpt(ckpt_dir, spms, steps=150, pre_norm=True)


@pytest.fixture(scope="session", autouse=True)
def offline():
    """No hub access: HF_HUB_OFFLINE, also where huggingface_hub was imported already."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        constants = sys.modules.get("huggingface_hub.constants")
        if constants is not None:
            mp.setattr(constants, "HF_HUB_OFFLINE", True)
        yield


@pytest.fixture(autouse=True)
def _one_thread(one_thread: None) -> None:
    """Every test here runs on one torch thread (tests/conftest.py)."""


@pytest.fixture(scope="session")
def marian_joint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An OPUS-MT-like MarianMTModel directory: one vocab.json, shared embeddings (see
    marian_helpers)."""
    from marian_helpers import make_marian_dir

    return make_marian_dir(tmp_path_factory.mktemp("marian") / "joint")


@pytest.fixture(scope="session")
def marian_separate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same with separate source and target vocabularies and embeddings."""
    from marian_helpers import make_marian_dir

    return make_marian_dir(tmp_path_factory.mktemp("marian") / "separate", separate=True)
