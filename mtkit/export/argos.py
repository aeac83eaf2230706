"""Export to an Argos Translate package (``.argosmodel``), which Argos Translate and
LibreTranslate install as they install their own models.

The package is the CTranslate2 export (:func:`mtkit.export.ct2.convert_checked`: converted,
checked against mtkit's greedy output, quantized if asked) with the metadata and the one
sentencepiece model Argos reads (layout: :mod:`mtkit.formats.argos`). What Argos cannot express
is settled here, before anything is written:

- one language pair per package: a multilingual model (``>>xx<<`` target tags) is packaged for
  the one target ``--target-lang`` names; CTranslate2 then puts that tag before every source
  (``add_source_bos`` with the tag as ``bos_token``), as `mtkit translate --tgt-lang` does;
- one sentencepiece model for both sides: ``sentencepiece.model`` is the source model (it must
  encode the source exactly); Argos decodes the target pieces with it too, which gives the
  target model's text for every ordinary piece (see ``detokenize``). Each target piece is
  checked, and a model with one that would read back otherwise is refused, naming the piece.
"""

from __future__ import annotations

import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from mtkit import __version__
from mtkit.checkpoint import LoadedModel, load_for_inference
from mtkit.data.tags import known_languages, tag
from mtkit.data.tokenizer import Tokenizer
from mtkit.errors import MtkitError
from mtkit.export.ct2 import convert_checked
from mtkit.formats.argos import (
    METADATA,
    MODEL_DIR,
    README,
    SPM,
    SUFFIX,
    PackageInfo,
    argos_text,
    detokenize,
)
from mtkit.formats.ctranslate2 import QUANTIZATIONS, ctranslate2_module
from mtkit.staging import staged_file


@dataclass(frozen=True)
class ArgosExport:
    """A written package: where, its pair, and the tag put before sources (multilingual)."""

    path: Path
    info: PackageInfo
    source_prefix: str | None


def _one(codes: tuple[str, ...], option: str, side: str) -> str:
    """The checkpoint's one code of ``side``, or an error naming ``option``."""
    if len(codes) == 1:
        return codes[0]
    if not codes:
        raise MtkitError(
            f"{option}: the checkpoint names no {side} language; give the code "
            "the package should list"
        )
    raise MtkitError(
        f"{option}: the checkpoint names several {side} languages "
        f"({', '.join(codes)}); give the one the package should list"
    )


def package_info(
    loaded: LoadedModel, source_lang: str | None, target_lang: str | None, package_version: str
) -> tuple[PackageInfo, str | None]:
    """The package's pair (the codes given, else the checkpoint's) and, for a multilingual
    model, the tag of the one target language it translates into."""
    tags = loaded.src_tokenizer.tags
    prefix = None
    if tags:
        if not target_lang:
            known = known_languages(tags)
            raise MtkitError(
                f"--target-lang: the model is multilingual ({known}) and an Argos "
                "package translates into one language; name it"
            )
        if tag(target_lang) not in tags:
            raise MtkitError(
                f"--target-lang {target_lang}: the model does not translate into it "
                f"(known: {known_languages(tags)})"
            )
        prefix = tag(target_lang)
    langs = loaded.languages
    source = source_lang or _one(langs.sources if langs else (), "--source-lang", "source")
    target = target_lang or _one(langs.targets if langs else (), "--target-lang", "target")
    return PackageInfo(source, target, package_version), prefix


def check_one_spm(src: Tokenizer, tgt: Tokenizer) -> None:
    """Refuse a target vocabulary whose pieces the source sentencepiece model would not turn
    into the target model's text (Argos decodes the target with the source model). Each piece
    is decoded twice in a row, so that it is seen first and inside a sentence."""
    if src.proto == tgt.proto:
        return
    specials = set(tgt.specials.to_dict().values())
    for i in range(len(tgt)):
        if i in specials:
            continue
        piece = tgt.id_to_piece(i)
        got, want = detokenize(src.sp, [piece, piece]), argos_text(tgt.decode([[i, i]])[0])
        if got != want:
            raise MtkitError(
                f"--format argos: the target piece {piece!r} twice reads back as {got!r} through "
                f"the source sentencepiece model, {want!r} through the target's; an Argos package "
                "has one model for both sides (export with --format ctranslate2 instead)"
            )


def _readme(info: PackageInfo, checkpoint: str, quantization: str, prefix: str | None) -> str:
    meta = info.metadata()
    into = f" (the multilingual model, translating into {prefix})" if prefix else ""
    return (
        f"# {meta['from_name']} → {meta['to_name']}\n\nA translation model trained with "
        f"mtkit {__version__}, exported from {Path(checkpoint).name}{into} by `mtkit export "
        f"--format argos`: the CTranslate2 model ({quantization}) in `model/`, the source "
        "sentencepiece model as `sentencepiece.model`.\n"
    )


def _zip(root: Path, handle: BinaryIO) -> None:
    """The directory ``root`` as a zip archive of one top-level directory, as argos-train's
    ``shutil.make_archive`` writes it."""
    with zipfile.ZipFile(handle, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(root, root.name)
        for path in sorted(root.rglob("*")):
            archive.write(path, f"{root.name}/{path.relative_to(root).as_posix()}")


def check_output(out: Path, force: bool) -> None:
    """Refuse an output that is not a ``.argosmodel`` file name, or exists without ``force``."""
    if out.suffix != SUFFIX:
        raise MtkitError(f"{out}: an Argos Translate package is a file named *{SUFFIX}")
    if out.is_dir():
        raise MtkitError(f"{out}: is a directory")
    if out.exists() and not force:
        raise MtkitError(f"{out}: already exists (use --force to replace it)")


def export_argos(
    checkpoint: str | Path,
    out: str | Path,
    quantization: str = "float32",
    force: bool = False,
    source_lang: str | None = None,
    target_lang: str | None = None,
    package_version: str = "1.0",
) -> ArgosExport:
    """Write ``checkpoint`` as the Argos Translate package ``out`` (whole, or not at all)."""
    out = Path(out)
    if quantization not in QUANTIZATIONS:
        raise MtkitError(f"--quantization {quantization}: unknown ({', '.join(QUANTIZATIONS)})")
    check_output(out, force)
    loaded = load_for_inference(checkpoint)
    info, prefix = package_info(loaded, source_lang, target_lang, package_version)
    check_one_spm(loaded.src_tokenizer, loaded.tgt_tokenizer)
    ct2 = ctranslate2_module()
    provenance = dict(
        mtkit_version=__version__,
        ctranslate2_version=ct2.__version__,
        checkpoint=str(checkpoint),
        quantization=quantization,
        source_prefix=prefix,
    )
    with (
        staged_file(out) as handle,
        tempfile.TemporaryDirectory(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent) as tmp,
    ):
        root = Path(tmp) / info.dir_name
        (root / MODEL_DIR).mkdir(parents=True)
        convert_checked(loaded, root / MODEL_DIR, quantization, prefix)
        (root / SPM).write_bytes(loaded.src_tokenizer.proto)
        (root / METADATA).write_text(info.to_json(**provenance), encoding="utf-8")
        (root / README).write_text(_readme(info, str(checkpoint), quantization, prefix), "utf-8")
        _zip(root, handle)
    return ArgosExport(out, info, prefix)
