"""Fixtures of the checkpoint tests."""

from __future__ import annotations

import pytest
from checkpoint_helpers import spm_model


@pytest.fixture(scope="module")
def spm_bytes() -> bytes:
    return spm_model()
