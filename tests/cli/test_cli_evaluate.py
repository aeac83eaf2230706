"""`mtkit evaluate` on the command line: sacrebleu's output, JSON, paired tests, one-line errors."""

import gzip
import json
import os
import subprocess
import sys
import types
from dataclasses import asdict
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from mtkit.cli import cli
from mtkit.config import EvaluateConfig, ModelConfig, SearchConfig, TranslateConfig
from mtkit.metrics import score

DATA = Path(__file__).parents[2] / "recipes" / "multi30k" / "data" / "val.de.gz"


def run(*args: object, stdin: bytes | None = None) -> Result:
    return CliRunner().invoke(cli, ["evaluate", *map(str, args)], input=stdin)


def sacrebleu(*args: object) -> str:
    env = {k: v for k, v in os.environ.items() if k != "SACREBLEU_FORMAT"} | {"NO_COLOR": "1"}
    command = [sys.executable, "-m", "sacrebleu", *map(str, args), "-q", "-nc"]
    return subprocess.run(command, capture_output=True, text=True, check=True, env=env).stdout


def stripped(text: str) -> list[str]:
    return sorted(line.strip() for line in text.splitlines() if line.strip())


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """60 Multi30k references, a second reference, and two systems of different quality."""
    ref = gzip.decompress(DATA.read_bytes()).decode().splitlines()[:60]
    variants = {
        "ref": ref,
        "ref2": [" ".join(reversed(line.split()[:3])) + " " + line for line in ref],
        "hyp": [line.replace(" ein ", " der ").replace("Mann", "mann") for line in ref],
        "hyp2": [" ".join(line.split()[::2]) for line in ref],
    }
    root = tmp_path_factory.mktemp("cli")
    paths = {}
    for name, lines in variants.items():
        paths[name] = root / f"{name}.de"
        paths[name].write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return paths


def test_help_lists_evaluate() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0 and "evaluate" in result.output
    result = CliRunner().invoke(cli, ["evaluate", "--help"])
    assert result.exit_code == 0 and "--compare" in result.output


def test_prints_what_sacrebleu_prints(files: dict[str, Path]) -> None:
    result = run(
        "-r",
        files["ref"],
        "-r",
        files["ref2"],
        "--tokenize",
        "intl",
        "--lowercase",
        stdin=files["hyp"].read_bytes(),
    )
    assert result.exit_code == 0, result.output
    options = ["-m", "bleu", "chrf", "ter", "-tok", "intl", "-lc", "--chrf-lowercase"]
    expected = sacrebleu(files["ref"], files["ref2"], "-i", files["hyp"], *options, "-f", "text")
    assert stripped(result.output) == stripped(expected)
    assert result.output.startswith("BLEU|nrefs:2|case:lc|eff:no|tok:intl|smooth:exp|version:")


def test_json_matches_sacrebleu_json(files: dict[str, Path]) -> None:
    result = run("-i", files["hyp"], "-r", files["ref"], "--metrics", "ter,bleu,chrf++", "--json")
    assert result.exit_code == 0, result.output
    ours = {item["name"]: item for item in json.loads(result.output)}
    assert list(ours) == ["TER", "BLEU", "chrF2++"]  # in the order asked for
    for args in (["-m", "bleu", "ter"], ["-m", "chrf", "-cw", "2"]):
        theirs = json.loads(sacrebleu(files["ref"], "-i", files["hyp"], *args, "-w", 4))
        for item in theirs if isinstance(theirs, list) else [theirs]:
            mine = ours[item["name"]]
            assert float(f"{mine['score']:.4f}") == item["score"]
            assert mine["signature"] == item["signature"]
            assert mine.get("verbose_score") == item.get("verbose_score")
    assert {"counts", "totals", "precisions", "bp", "ratio", "sys_len", "ref_len"} <= set(
        ours["BLEU"]
    )


def test_compare(files: dict[str, Path]) -> None:
    hyp, hyp2, ref = files["hyp"], files["hyp2"], files["ref"]
    result = run(
        "-i",
        hyp,
        "-r",
        ref,
        "--compare",
        hyp2,
        "--compare",
        hyp,
        "--metrics",
        "bleu,chrf",
        "--paired-bs-n",
        200,
    )
    assert result.exit_code == 0, result.output
    out = result.output.splitlines()
    assert out[0].startswith("Paired bootstrap resampling (200 resamples)")
    assert out[1].startswith("BLEU|nrefs:1|bs:200|seed:12345|case:mixed")
    assert out[2].split()[:2] == ["Baseline:", str(files["hyp"])]
    assert out[3].split()[0] == str(files["hyp2"]) and out[3].endswith("*")  # much worse
    assert out[4].endswith("(p = 1.0000)")  # the baseline against itself
    assert out[5].startswith("chrF2|nrefs:1|bs:200|seed:12345|")


def test_compare_ar_json(files: dict[str, Path]) -> None:
    result = run(
        "-i",
        files["hyp2"],
        "-r",
        files["ref"],
        "--compare",
        files["hyp"],
        "--paired",
        "ar",
        "--paired-ar-n",
        300,
        "--paired-bs-n",
        100,
        "--seed",
        3,
        "--metrics",
        "bleu",
        "--json",
    )
    assert result.exit_code == 0, result.output
    (bleu,) = json.loads(result.output)
    assert bleu["test"] == "ar" and bleu["samples"] == 300
    assert "ar:300" in bleu["signature"] and "seed:3" in bleu["signature"]
    base, better = bleu["systems"]
    assert base["p_value"] is None and 0 < better["p_value"] < 0.05
    assert better["score"] > base["score"]


@pytest.mark.parametrize(
    "make, args, message",
    [
        (
            {"h": b"a\nb\nc\n", "r": b"a\nb\n"},
            ["-i", "h", "-r", "r"],
            "line count mismatch: {h} has 3 lines, {r} has 2",
        ),
        (
            {"h": b"a\nb\n", "r": b"a\nb\n", "r2": b"a\n"},
            ["-i", "h", "-r", "r", "-r", "r2"],
            "line count mismatch: {r} has 2 lines, {r2} has 1",
        ),
        ({"r": b"a\n"}, ["-i", "missing", "-r", "r"], "{missing}: no such file"),
        (
            {"h": b"ok\n\xff\xfe\n", "r": b"a\nb\n"},
            ["-i", "h", "-r", "r"],
            "{h}:2: invalid UTF-8 (byte 0xff at byte 1 of the line)",
        ),
        (
            {"h": b"a\n", "r": b"a\n"},
            ["-i", "h", "-r", "r", "--metrics", "bleu,meteor"],
            "--metrics: unknown metric 'meteor' (known: bleu, chrf, chrf++, ter)",
        ),
        (
            {"h": b"a\n", "r": b"a\n"},
            ["-i", "h", "-r", "r", "--tokenize", "moses"],
            "--tokenize: unknown BLEU tokenizer 'moses'",
        ),
        ({"h": b"a\n"}, ["-i", "h"], "no reference given (-r REF)"),
        (
            {"h": b"a\n", "r": b"a\n"},
            ["-i", "h", "-r", "r", "--compare", "r", "--compare", "x"],
            "{x}: no such file",
        ),
    ],
)
def test_one_line_errors(tmp_path: Path, make: dict, args: list[str], message: str) -> None:
    names = {name: str(tmp_path / name) for name in ("h", "r", "r2", "missing", "x")}
    for name, data in make.items():
        Path(names[name]).write_bytes(data)
    result = run(*[names.get(arg, arg) for arg in args])
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    (line,) = result.output.strip().splitlines()  # one line, no traceback
    assert line.startswith(f"Error: {message.format(**names)}")


def test_bom_crlf_from_stdin(tmp_path: Path) -> None:
    ref = tmp_path / "ref.de"
    ref.write_bytes(b"\xef\xbb\xbfein Hund l\xc3\xa4uft im Park\r\n")
    result = run(
        "-r",
        ref,
        "--metrics",
        "bleu,ter",
        "--json",
        stdin=b"\xef\xbb\xbfein Hund l\xc3\xa4uft im Park\r\n",
    )
    assert result.exit_code == 0, result.output
    assert [item["score"] for item in json.loads(result.output)] == pytest.approx([100.0, 0.0])


def test_model_option_with_fake_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[TranslateConfig] = []

    def translate_lines(checkpoints: list[str], lines: list[str], config: TranslateConfig):
        seen.append(config)
        return list(lines)

    module = types.ModuleType("mtkit.pipeline.translate")
    module.translate_lines = translate_lines  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "mtkit.pipeline.translate", module)
    text = tmp_path / "same.txt"
    text.write_text("a b c d e\n")
    out = tmp_path / "hyp.txt"
    result = run(
        "-m",
        "m.pt",
        "--src",
        text,
        "-r",
        text,
        "--beam",
        3,
        "--device",
        "cpu",
        "-o",
        out,
        "--metrics",
        "chrf",
    )
    assert result.exit_code == 0, result.output
    assert result.output.startswith("chrF2|") and result.output.rstrip().endswith("= 100.0")
    assert (seen[0].search.beam, seen[0].device) == (3, "cpu")
    assert out.read_text() == "a b c d e\n"


def test_model_end_to_end(tmp_path: Path) -> None:
    """-m with the real translation engine and a tiny untrained checkpoint."""
    translate = pytest.importorskip("mtkit.pipeline.translate")
    from mtkit.checkpoint import save_checkpoint
    from mtkit.data.tokenizer import train_spm
    from mtkit.model.transformer import build_model

    words = "the a man woman dog cat runs walks on in red blue big small house street".split()
    sentences = [" ".join(words[(i * 7 + j) % len(words)] for j in range(6)) for i in range(200)]
    spm = train_spm(sentences, vocab_size=60)
    cfg = ModelConfig(
        src_vocab_size=60,
        tgt_vocab_size=60,
        d_model=16,
        ffn_dim=32,
        heads=2,
        encoder_layers=1,
        decoder_layers=1,
    )
    ckpt = tmp_path / "model.pt"
    save_checkpoint(
        {
            "model_config": asdict(cfg),
            "model": build_model(cfg).state_dict(),
            "spm": {"src": spm, "tgt": spm},
        },
        ckpt,
    )
    src, ref, out = tmp_path / "test.en", tmp_path / "test.de", tmp_path / "hyp.de"
    src.write_text("".join(f"{s}\n" for s in sentences[:5]))
    ref.write_text("".join(f"{s}\n" for s in sentences[5:10]))
    result = run(
        "-m", ckpt, "--src", src, "-r", ref, "--beam", 2, "--device", "cpu", "-o", out, "--json"
    )
    assert result.exit_code == 0, result.output
    config = TranslateConfig(SearchConfig(beam=2), device="cpu")
    hyps = translate.translate_lines([str(ckpt)], sentences[:5], config)
    assert out.read_text(encoding="utf-8") == "".join(f"{h}\n" for h in hyps)
    expected = score([h.rstrip() for h in hyps], [sentences[5:10]], EvaluateConfig())
    assert [item["score"] for item in json.loads(result.stdout)] == [r.score for r in expected]


def test_evaluate_a_multilingual_model(multi_run: Path, multi_dataset: Path, tmp_path: Path):
    """-m with --tgt-lang, and with the tagged validation sources as they are (issue 16)."""
    ckpt = multi_run / "checkpoint_best.pt"
    src = (multi_dataset / "valid.src.txt").read_text().splitlines()
    refs = (multi_dataset / "valid.tgt.txt").read_text().splitlines()
    (tmp_path / "en").write_text("".join(line.split(" ", 1)[1] + "\n" for line in src[8:16]))
    (tmp_path / "fr").write_text("".join(f"{line}\n" for line in refs[8:16]))
    result = run(
        "-m",
        ckpt,
        "--src",
        tmp_path / "en",
        "-r",
        tmp_path / "fr",
        "--tgt-lang",
        "fr",
        "--metrics",
        "bleu",
        "--json",
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)[0]["score"] > 99.99
    result = run(
        "-m",
        ckpt,
        "--src",
        multi_dataset / "valid.src.txt",
        "-r",
        multi_dataset / "valid.tgt.txt",
        "--metrics",
        "bleu",
        "--json",
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)[0]["score"] > 99.99
