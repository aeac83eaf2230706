"""`mtkit export`: a checkpoint written for another engine, each format by its exporter in
:mod:`mtkit.export` (imported when used: each needs its own extra)."""

from __future__ import annotations

from pathlib import Path

from mtkit.errors import MtkitError
from mtkit.formats.ctranslate2 import QUANTIZATIONS

EXPORT_FORMATS = {
    "hf": "a transformers MarianMTModel directory (`pip install 'mtkit[hf]'`)",
    "ctranslate2": "a CTranslate2 model directory (`pip install 'mtkit[ct2]'`)",
}
__all__ = ["EXPORT_FORMATS", "QUANTIZATIONS", "export_model"]


def export_model(
    checkpoint: str | Path, out_dir: str | Path, fmt: str, quantization: str = "float32",
    force: bool = False,
) -> str:  # fmt: skip
    """Export ``checkpoint`` to ``out_dir`` in format ``fmt``; a one-line summary of it."""
    if fmt not in EXPORT_FORMATS:
        raise MtkitError(f"--format: unknown export format {fmt!r} ({', '.join(EXPORT_FORMATS)})")
    if fmt == "hf":
        if quantization != "float32":
            raise MtkitError("--quantization applies to --format ctranslate2 only")
        from mtkit.export.hf import export_hf

        result = export_hf(checkpoint, out_dir, force=force)
        return (f"{result.out_dir}: MarianMTModel + MarianTokenizer "
                f"(max |logit diff| vs mtkit {result.max_logit_difference:.1e})")  # fmt: skip
    from mtkit.export.ct2 import export_ct2

    path = export_ct2(checkpoint, out_dir, quantization=quantization, force=force)
    return f"{path}: CTranslate2 model ({quantization}) + source.spm/target.spm"
