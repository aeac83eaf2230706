"""Optional dependencies (the package's extras), imported when a feature first needs one."""

from __future__ import annotations

import importlib
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
