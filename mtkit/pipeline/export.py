"""`mtkit export` and `mtkit import`: a checkpoint written for another engine, or another
engine's model read into a checkpoint, each format by its converter in :mod:`mtkit.export`
(imported when used: each needs its own extra)."""

from __future__ import annotations

from pathlib import Path

from mtkit.errors import MtkitError
from mtkit.formats.ctranslate2 import QUANTIZATIONS

EXPORT_FORMATS = {
    "hf": "a transformers MarianMTModel directory (`pip install 'mtkit[hf]'`)",
    "ctranslate2": "a CTranslate2 model directory (`pip install 'mtkit[ct2]'`)",
    "argos": "an Argos Translate / LibreTranslate package, OUT_DIR a .argosmodel file "
    "(`pip install 'mtkit[ct2]'`)",
}
ARGOS_OPTIONS = ("--source-lang", "--target-lang", "--package-version")
IMPORT_FORMATS = {
    "hf": "a transformers MarianMTModel directory (an OPUS-MT model, save_pretrained)"
}
__all__ = ["EXPORT_FORMATS", "IMPORT_FORMATS", "QUANTIZATIONS", "export_model", "import_model"]


def export_model(
    checkpoint: str | Path,
    out_dir: str | Path,
    fmt: str,
    quantization: str = "float32",
    force: bool = False,
    source_lang: str | None = None,
    target_lang: str | None = None,
    package_version: str | None = None,
    shortlist: str = "",
) -> str:
    """Export ``checkpoint`` to ``out_dir`` in format ``fmt`` (ctranslate2: with ``shortlist``
    as its vocabulary map); a one-line summary of it. ``source_lang``, ``target_lang`` and
    ``package_version`` are the Argos package's."""
    if fmt not in EXPORT_FORMATS:
        raise MtkitError(f"--format: unknown export format {fmt!r} ({', '.join(EXPORT_FORMATS)})")
    given = (source_lang, target_lang, package_version)
    for option, value in zip(ARGOS_OPTIONS, given, strict=True):
        if fmt != "argos" and value is not None:
            raise MtkitError(f"{option} applies to --format argos only")
    if shortlist and fmt != "ctranslate2":
        raise MtkitError("--shortlist applies to --format ctranslate2 only")
    if fmt == "argos":
        return _export_argos(checkpoint, out_dir, quantization, force, *given)
    if fmt == "hf":
        if quantization != "float32":
            raise MtkitError("--quantization applies to --format ctranslate2 and argos only")
        from mtkit.export.hf import export_hf

        result = export_hf(checkpoint, out_dir, force=force)
        return (
            f"{result.out_dir}: MarianMTModel + MarianTokenizer "
            f"(max |logit diff| vs mtkit {result.max_logit_difference:.1e})"
        )
    from mtkit.export.ct2 import export_ct2

    path = export_ct2(
        checkpoint, out_dir, quantization=quantization, force=force, shortlist=shortlist
    )
    extra = " + vmap.txt (the shortlist)" if shortlist else ""
    return f"{path}: CTranslate2 model ({quantization}) + source.spm/target.spm{extra}"


def _export_argos(
    checkpoint: str | Path,
    out: str | Path,
    quantization: str,
    force: bool,
    source_lang: str | None,
    target_lang: str | None,
    package_version: str | None,
) -> str:
    from mtkit.export.argos import export_argos

    result = export_argos(
        checkpoint, out, quantization, force, source_lang, target_lang, package_version or "1.0"
    )
    info = result.info
    into = f", the multilingual model into {result.source_prefix}" if result.source_prefix else ""
    return (
        f"{result.path}: Argos Translate package {info.dir_name} ({info.from_code} -> "
        f"{info.to_code}{into}; CTranslate2 {quantization} + sentencepiece.model)"
    )


def import_model(
    model_dir: str | Path,
    output: str | Path,
    fmt: str = "hf",
    force: bool = False,
    source_lang: str | None = None,
    target_lang: str | None = None,
) -> str:
    """Import ``model_dir`` (format ``fmt``) as the checkpoint ``output``, naming the language
    codes given or the model's own; a one-line summary of it."""
    if fmt not in IMPORT_FORMATS:
        raise MtkitError(f"--format: unknown import format {fmt!r} ({', '.join(IMPORT_FORMATS)})")
    from mtkit.export.hf_import import import_hf

    result = import_hf(model_dir, output, force, source_lang, target_lang)
    cfg, ids = result.config, result.special_ids
    vocab = "one vocabulary" if result.joint_vocab else "separate vocabularies"
    pair = "-".join(result.languages.pair) if result.languages else "languages not named"
    return (
        f"{result.output}: MarianMTModel {pair}, d={cfg.d_model} layers="
        f"{cfg.encoder_layers}+{cfg.decoder_layers} {cfg.ffn_activation}, {vocab} "
        f"{cfg.src_vocab_size}/{cfg.tgt_vocab_size}, pad {ids.pad} eos {ids.eos} "
        f"unk {ids.unk} start {ids.bos}"
    )
