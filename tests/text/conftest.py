"""The text layer's tests translate with the engine tests' tiny trained model."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "engines"))
from engine_helpers import TRAIN, engine_config, make_ckpt  # noqa: E402

from mtkit.data.tokenizer import train_spm  # noqa: E402
from mtkit.engines import load_engine  # noqa: E402
from mtkit.engines.base import Engine  # noqa: E402

# hostile texts: every round trip must give them back exactly
HOSTILE = {
    "empty": "",
    "spaces": "   ",
    "only-newlines": "\n\n\r\n",
    "crlf": "A man runs.\r\nA woman walks.\r\n",
    "bom": "\ufeffThe dog sits. The cat runs.",
    "no-final-newline": "First line.\nSecond line. Third sentence",
    "blank-lines": "One paragraph. Two.\n\n\nAnother paragraph.\n",
    "indented": "  - item one.\n\t- item two.  \n    code();",
    "emoji": "I love it 😀. Really 👍🏽! 👨‍👩‍👧 family.",
    "rtl": "שלום עולם. מה שלומך? مرحبا بالعالم. كيف حالك؟",
    "mixed-breaks": "a\rb\x0bc\x0cd\u2028e\u2029f\x85g",
    "long": "word, " * 400 + "x" * 1000 + " more words" * 100,
}


@pytest.fixture(scope="session")
def text_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model briefly trained on a word-substitution task (as tests/engines' engine_ckpt)."""
    spm = train_spm([x for pair in TRAIN for x in pair], vocab_size=110)
    spms = {"src": spm, "tgt": spm}
    return make_ckpt(tmp_path_factory.mktemp("text"), spms, steps=120, max_positions=32).path


@pytest.fixture(scope="session")
def engine(text_ckpt: Path) -> Engine:
    return load_engine([str(text_ckpt)], engine_config("mtkit"))
