"""Exports of mtkit checkpoints to other engines: Hugging Face transformers and CTranslate2.

``hf.export_hf`` writes a MarianMTModel directory (weights, config, tokenizer, generation
defaults); ``ct2.export_ct2`` writes a CTranslate2 model directory with the sentencepiece models
beside it, and ``ct2.translate_lines_ct2`` decodes with it. The peer libraries are optional extras,
imported only inside the functions that need them.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from mtkit.errors import MtkitError


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import an optional dependency, or fail naming the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MtkitError(
            f"{what} needs the '{extra}' extra ({err.name or module} is not installed): "
            f"pip install 'mtkit[{extra}]'"
        ) from None


@contextlib.contextmanager
def staged_dir(out_dir: str | Path, force: bool = False) -> Iterator[Path]:
    """Yield an empty temporary directory beside ``out_dir``; on success rename it into place.

    An existing ``out_dir`` is an error unless ``force``, and is then replaced only once the new
    directory is complete, so a failed export leaves nothing half-written.
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and not force:
        raise MtkitError(f"{out_dir}: already exists (use --force to replace it)")
    if out_dir.exists() and not out_dir.is_dir():
        raise MtkitError(f"{out_dir}: exists and is not a directory")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=out_dir.parent))
    try:
        yield tmp
        _publish_modes(tmp)
        if out_dir.exists():
            old = tmp.with_name(tmp.name + ".old")
            out_dir.rename(old)
            tmp.rename(out_dir)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _publish_modes(directory: Path) -> None:
    """Give the staged tree the modes a plain mkdir/open would have had (mkdtemp makes it 0700)."""
    umask = os.umask(0)
    os.umask(umask)
    directory.chmod(0o777 & ~umask)
    for path in directory.rglob("*"):
        path.chmod((0o777 if path.is_dir() else 0o666) & ~umask)
