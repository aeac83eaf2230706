"""`mtkit export --format argos` against Argos Translate itself: the package installs with
argostranslate 1.11 (in its own venv, ``.bench/venv-argos``: `make argos-venv`) and translates
through argostranslate's API exactly as `mtkit translate --engine ctranslate2` does.

Argos decodes with beam 4 and length penalty 0.2 and masks no spans, so mtkit is asked for the
same. Its compute
type is ``auto``: int8 on this CPU; the int8 package runs at Argos' defaults against mtkit on
the int8 CTranslate2 export, the float32 one with ARGOS_COMPUTE_TYPE=float32 against mtkit on
the float32 export. Only Argos' sentence splitter is replaced (see argos_driver.py): MiniSBD
would download its model, and each line here is one sentence.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from export_helpers import TEST_LINES, Ckpt

from mtkit.cli import cli

pytest.importorskip("ctranslate2", reason="needs the 'ct2' extra: pip install -e '.[ct2]'")
ROOT = Path(__file__).resolve().parents[2]
ARGOS_PYTHON = ROOT / ".bench" / "venv-argos" / "bin" / "python"
DRIVER = Path(__file__).with_name("argos_driver.py")
if not ARGOS_PYTHON.exists():
    pytest.skip(
        f"needs argostranslate 1.11 in its own venv, {ARGOS_PYTHON.parent.parent} (missing): "
        "make argos-venv",
        allow_module_level=True,
    )
# Argos' search; no spans (mtkit keeps numbers, URLs, ... verbatim by default, Argos has no such)
SEARCH = ["--engine", "ctranslate2", "--beam", "4", "--lenpen", "0.2", "--no-spans", "-q"]


def mtkit(*args: str) -> None:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output


def mtkit_translate(model: Path, lines: list[str], work: Path, *options: str) -> list[str]:
    """`mtkit translate --engine ctranslate2` with Argos' search settings."""
    (work / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    mtkit(
        "translate",
        "-m",
        str(model),
        "-i",
        str(work / "in.txt"),
        "-o",
        str(work / "out.txt"),
        *SEARCH,
        *options,
    )
    return (work / "out.txt").read_text(encoding="utf-8").splitlines()


def argos_translate(
    package: Path, pair: tuple[str, str], lines: list[str], home: Path, **settings: str
) -> dict:
    """Install ``package`` into a fresh Argos (its own HOME) and translate ``lines``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARGOS_", "XDG_"))}
    env.update(
        HOME=str(home),
        XDG_DATA_HOME=str(home / "data"),
        XDG_CACHE_HOME=str(home / "cache"),
        XDG_CONFIG_HOME=str(home / "config"),
        ARGOS_INTRA_THREADS="1",
        **settings,
    )
    done = subprocess.run(
        [str(ARGOS_PYTHON), str(DRIVER), str(package), *pair],
        input=json.dumps(lines),
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def export_both(ckpt: Path, out: Path, quantization: str, *argos: str) -> tuple[Path, Path]:
    """The same checkpoint as a .argosmodel and as a CTranslate2 directory."""
    package, ct2 = out / "model.argosmodel", out / "ct2"
    mtkit(
        "export",
        "-m",
        str(ckpt),
        "--format",
        "argos",
        "--quantization",
        quantization,
        *argos,
        str(package),
    )
    mtkit(
        "export",
        "-m",
        str(ckpt),
        "--format",
        "ctranslate2",
        "--quantization",
        quantization,
        str(ct2),
    )
    return package, ct2


@pytest.mark.parametrize(
    ("quantization", "settings"), [("int8", {}), ("float32", {"ARGOS_COMPUTE_TYPE": "float32"})]
)
def test_installs_and_translates_as_mtkit(
    trained: Ckpt, tmp_path: Path, quantization: str, settings: dict[str, str]
) -> None:
    package, ct2 = export_both(
        trained.path, tmp_path, quantization, "--source-lang", "en", "--target-lang", "de"
    )
    lines = TEST_LINES[:8]
    got = argos_translate(package, ("en", "de"), lines, tmp_path / "home", **settings)
    (installed,) = got["installed"]
    assert installed == {
        "from_code": "en",
        "from_name": "English",
        "to_code": "de",
        "to_name": "German",
        "package_version": "1.0",
        "argos_version": "1.11",
        "type": "translate",
        "dir": "translate-en_de-1_0",
        "tokenizer": "SentencePieceTokenizer",
    }
    assert Path(got["package_dir"], "translate-en_de-1_0", "model", "model.bin").is_file()
    assert got["languages"] == ["en", "de"] and got["sentencizer"] == "OneSentence"
    assert got["translations"] == mtkit_translate(ct2, lines, tmp_path)
    assert all(got["translations"])


def test_a_multilingual_model_installs_for_one_target(
    multi_run: Path, multi_dataset: Path, tmp_path: Path
) -> None:
    ckpt = multi_run / "checkpoint_best.pt"
    package, ct2 = export_both(ckpt, tmp_path, "float32", "--target-lang", "fr")
    src = (multi_dataset / "valid.src.txt").read_text(encoding="utf-8").splitlines()
    lines = [line.split(" ", 1)[1] for line in src[:8]]  # English, without the tags
    got = argos_translate(
        package, ("en", "fr"), lines, tmp_path / "home", ARGOS_COMPUTE_TYPE="float32"
    )
    assert [(p["from_code"], p["to_code"]) for p in got["installed"]] == [("en", "fr")]
    want = mtkit_translate(ct2, lines, tmp_path, "--tgt-lang", "fr")
    assert got["translations"] == want
    assert want != mtkit_translate(ct2, lines, tmp_path, "--tgt-lang", "de")  # fr, visibly
