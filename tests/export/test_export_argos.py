"""`mtkit export --format argos` without Argos Translate: the archive's layout and metadata, a
decode that does what argostranslate 1.11 does with the package, multilingual models packaged
for one target, the one-sentencepiece-model check, and refusals that leave nothing behind.

The package installed into Argos Translate itself: test_export_argos_install.py."""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path

import pytest
import sentencepiece as spm
from click.testing import CliRunner
from export_helpers import TEST_LINES, TRAIN, Ckpt

from mtkit.checkpoint import Checkpoint
from mtkit.cli import cli
from mtkit.config import TranslateConfig
from mtkit.data.tokenizer import Tokenizer
from mtkit.errors import MtkitError
from mtkit.formats.argos import PackageInfo, argos_text, detokenize, read_package
from mtkit.languages import Languages
from mtkit.pipeline.translate import translate_lines

ct2 = pytest.importorskip("ctranslate2", reason="needs the 'ct2' extra: pip install -e '.[ct2]'")
from mtkit.export import argos as argos_export  # noqa: E402
from mtkit.export.argos import check_one_spm, export_argos  # noqa: E402
from mtkit.export.ct2 import export_ct2  # noqa: E402

ARGOS_SEARCH = {"beam": 4, "lenpen": 0.2, "spans": False, "device": "cpu", "engine": "ctranslate2"}


def argos_decode(package: Path, lines: list[str]) -> list[str]:
    """What argostranslate 1.11's apply_packaged_translation does with an installed package
    (one sentence a line, compute type float32): sentencepiece.model encodes, CTranslate2
    decodes with Argos' settings, the same sentencepiece model detokenizes."""
    sp = spm.SentencePieceProcessor(model_file=str(package / "sentencepiece.model"))
    translator = ct2.Translator(str(package / "model"), compute_type="float32")
    out = []
    for line in lines:  # a paragraph of one sentence: one call
        (result,) = translator.translate_batch(
            [sp.encode(line, out_type=str)],
            replace_unknowns=True,
            max_batch_size=32,
            batch_type="tokens",
            beam_size=4,
            num_hypotheses=1,
            length_penalty=0.2,
            return_scores=True,
        )
        out.append(detokenize(sp, result.hypotheses[0]))
    return out


def multi_lines(multi_dataset: Path) -> list[str]:
    """English sources of the multilingual model's validation split, without their tags."""
    src = (multi_dataset / "valid.src.txt").read_text(encoding="utf-8").splitlines()
    return [line.split(" ", 1)[1] for line in src[:8]]


def install(path: Path, into: Path) -> Path:
    """Argos' install_from_path: extract the zip; the one directory it holds."""
    with zipfile.ZipFile(path) as archive:
        archive.extractall(into)
    (package,) = into.iterdir()
    return package


@pytest.fixture(scope="module")
def package(trained: Ckpt, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("argos") / "en_de.argosmodel"
    export_argos(trained.path, out, source_lang="en", target_lang="de")
    return out


def test_the_archive_holds_what_argos_reads(package: Path, trained: Ckpt) -> None:
    top = "translate-en_de-1_0"
    with zipfile.ZipFile(package) as archive:
        names = set(archive.namelist())
        assert archive.read(f"{top}/sentencepiece.model") == trained.src.proto
        config = json.loads(archive.read(f"{top}/model/config.json"))
        readme = archive.read(f"{top}/README.md").decode()
    assert {
        f"{top}/",
        f"{top}/metadata.json",
        f"{top}/README.md",
        f"{top}/model/",
        f"{top}/model/model.bin",
        f"{top}/model/config.json",
        f"{top}/sentencepiece.model",
    } <= names
    assert all(n.startswith(f"{top}/") for n in names)
    assert not any(n.endswith((".spm", "mtkit.json")) for n in names)  # Argos' files only
    assert config["add_source_bos"] is False and config["add_source_eos"] is True
    meta = read_package(package)
    assert {
        k: meta[k]
        for k in (
            "package_version",
            "argos_version",
            "from_code",
            "from_name",
            "to_code",
            "to_name",
            "type",
        )
    } == {
        "package_version": "1.0",
        "argos_version": "1.11",
        "from_code": "en",
        "from_name": "English",
        "to_code": "de",
        "to_name": "German",
        "type": "translate",
    }
    assert meta["mtkit"]["quantization"] == "float32" and meta["mtkit"]["source_prefix"] is None
    assert readme.startswith("# English → German\n")


def test_argos_decoding_equals_mtkits_ctranslate2_engine(
    package: Path, trained: Ckpt, tmp_path: Path
) -> None:
    """Separate vocabularies: the target pieces go through the source model, as in Argos."""
    assert trained.src.proto != trained.tgt.proto
    lines = TEST_LINES + ["the dog", "a red house on the street"]
    want = translate_lines(
        [str(export_ct2(trained.path, tmp_path / "ct2"))],
        lines,
        TranslateConfig.from_flat(ARGOS_SEARCH),
    )
    assert argos_decode(install(package, tmp_path / "packages"), lines) == want
    assert all(want)


def test_a_multilingual_model_is_packaged_for_one_target(
    multi_run: Path, multi_dataset: Path, tmp_path: Path
) -> None:
    ckpt = multi_run / "checkpoint_best.pt"
    ct2_dir = export_ct2(ckpt, tmp_path / "ct2")
    lines = multi_lines(multi_dataset)
    result = export_argos(ckpt, tmp_path / "fr.argosmodel", target_lang="fr")
    assert result.source_prefix == ">>fr<<"
    meta = read_package(result.path)
    assert (meta["from_code"], meta["to_code"]) == ("en", "fr")  # en: the checkpoint's
    assert meta["mtkit"]["source_prefix"] == ">>fr<<"
    package = install(result.path, tmp_path / "packages")
    config = json.loads((package / "model" / "config.json").read_text())
    assert (config["add_source_bos"], config["bos_token"]) == (True, ">>fr<<")
    assert config["decoder_start_token"] == "<s>"  # the decoder still starts from BOS
    want = {
        lang: translate_lines(
            [str(ct2_dir)], lines, TranslateConfig.from_flat({**ARGOS_SEARCH, "tgt_lang": lang})
        )
        for lang in ("fr", "de")
    }
    assert argos_decode(package, lines) == want["fr"] != want["de"]


def test_languages_come_from_the_checkpoint(trained: Ckpt, tmp_path: Path) -> None:
    named = tmp_path / "named.pt"
    Checkpoint.of(
        trained.model, trained.src, trained.tgt, languages=Languages(("en",), ("de",))
    ).save(named)
    meta = read_package(export_argos(named, tmp_path / "a.argosmodel").path)
    assert (meta["from_code"], meta["to_code"]) == ("en", "de")
    out = export_argos(
        named, tmp_path / "b.argosmodel", source_lang="fr", target_lang="pt", package_version="2.1"
    )
    assert out.info.dir_name == "translate-fr_pt-2_1"
    assert read_package(out.path)["to_name"] == "Portuguese"


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


EN_DE = ["--source-lang", "en", "--target-lang", "de"]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ([], r"--source-lang: the checkpoint names no source language; give the code"),
        (["--source-lang", "en"], r"--target-lang: the checkpoint names no target language"),
        (
            ["--source-lang", "en_US", "--target-lang", "de"],
            r"--source-lang en_US: not a language code for Argos Translate",
        ),
        ([*EN_DE, "--package-version", "v1"], r"--package-version v1: expected numbers"),
        (
            [*EN_DE, "{t}/pkg.zip"],
            r"pkg\.zip: an Argos Translate package is a file named "
            r"\*\.argosmodel",
        ),
        ([*EN_DE, "{t}/old.argosmodel"], r"old\.argosmodel: already exists \(use --force"),
        ([*EN_DE, "{t}/dir.argosmodel"], r"dir\.argosmodel: is a directory"),
        (
            ["--format", "ctranslate2", "--target-lang", "de", "{t}/ct2"],
            r"--target-lang applies to --format argos only",
        ),
        (
            ["--format", "hf", "--package-version", "2.0", "{t}/hf"],
            r"--package-version applies to --format argos only",
        ),
    ],
)
def test_mistakes_are_one_line_and_write_nothing(
    trained: Ckpt, tmp_path: Path, args: list[str], error: str
) -> None:
    (tmp_path / "old.argosmodel").write_bytes(b"an older package")
    (tmp_path / "dir.argosmodel").mkdir()
    args = [a.replace("{t}", str(tmp_path)) for a in args]
    if not any(a.startswith(str(tmp_path)) for a in args):
        args.append(str(tmp_path / "new" / "pkg.argosmodel"))
    if "--format" not in args:
        args = ["--format", "argos", *args]
    before = _tree(tmp_path)
    result = CliRunner().invoke(cli, ["export", "-m", str(trained.path), *args])
    assert result.exit_code != 0
    assert result.output.count("\n") == 1 and result.output.startswith("Error: "), result.output
    assert re.search(error, result.output), result.output
    assert _tree(tmp_path) == before and sorted(p.name for p in tmp_path.iterdir()) == [
        "dir.argosmodel",
        "old.argosmodel",
    ]


def test_multilingual_mistakes_name_the_target(multi_run: Path, tmp_path: Path) -> None:
    ckpt = multi_run / "checkpoint_best.pt"
    with pytest.raises(
        MtkitError,
        match=r"^--target-lang: the model is multilingual \(cs, de, "
        r"fr\) and an Argos package translates into one language; name it$",
    ):
        export_argos(ckpt, tmp_path / "x.argosmodel")
    with pytest.raises(
        MtkitError,
        match=r"^--target-lang es: the model does not translate "
        r"into it \(known: cs, de, fr\)$",
    ):
        export_argos(ckpt, tmp_path / "x.argosmodel", target_lang="es")
    assert list(tmp_path.iterdir()) == []


def test_force_replaces_whole_and_a_failure_keeps_the_old_package(
    trained: Ckpt, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "p.argosmodel"
    out.write_bytes(b"an older package")

    def broken(*args: object, **kwargs: object) -> None:
        raise MtkitError("export check failed: (simulated)")

    with monkeypatch.context() as m:
        m.setattr(argos_export, "convert_checked", broken)
        with pytest.raises(MtkitError, match="simulated"):
            export_argos(trained.path, out, force=True, source_lang="en", target_lang="de")
    assert out.read_bytes() == b"an older package" and list(tmp_path.iterdir()) == [out]
    export_argos(
        trained.path, out, force=True, source_lang="en", target_lang="de", quantization="int8"
    )
    assert read_package(out)["mtkit"]["quantization"] == "int8"
    assert list(tmp_path.iterdir()) == [out]


def byte_fallback_spm() -> bytes:
    """A target model with byte pieces (<0xE2>...), which a model without them cannot decode."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.Train(
        sentence_iterator=iter([t for _, t in TRAIN]),
        model_writer=model,
        model_type="bpe",
        vocab_size=340,
        byte_fallback=True,
        pad_id=0,
        unk_id=1,
        bos_id=2,
        eos_id=3,
        minloglevel=2,
    )
    return model.getvalue()


def test_one_sentencepiece_model_must_decode_every_target_piece(trained: Ckpt) -> None:
    check_one_spm(trained.src, trained.tgt)  # separate models, ordinary pieces: packaged
    check_one_spm(trained.src, trained.src)
    with pytest.raises(
        MtkitError,
        match=r"^--format argos: the target piece '<0x00>' twice "
        r"reads back as '<0x00><0x00>' through the source sentencepiece model",
    ):
        check_one_spm(trained.src, Tokenizer(byte_fallback_spm()))


@pytest.mark.parametrize(
    ("decoded", "text"),
    [("▁der▁mann", "der mann"), ("der", "der"), ("a_b", "a b"), ("", ""), ("  x", " x")],
)
def test_argos_text(decoded: str, text: str) -> None:
    assert argos_text(decoded) == text


def test_package_info() -> None:
    info = PackageInfo("en", "xx", "1.2.3")
    assert info.dir_name == "translate-en_xx-1_2_3"
    meta = info.metadata(checkpoint="m.pt")
    assert (meta["from_name"], meta["to_name"]) == ("English", "xx")  # a name, or the code
    assert meta["mtkit"] == {"checkpoint": "m.pt"}
    for bad in ("", "en/de", "en,de", "en_US", "-en"):
        with pytest.raises(MtkitError, match="--target-lang"):
            PackageInfo("en", bad)
