"""CTranslate2 export: float32 decoding equals mtkit's; batching keeps lines in place; refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from export_helpers import TEST_LINES, Ckpt, greedy_reference, make_ckpt, pad

from mtkit.cli import cli
from mtkit.config import TranslateConfig
from mtkit.data.tokenizer import EOS_ID
from mtkit.engines import load_engine
from mtkit.engines.base import best_texts
from mtkit.errors import MtkitError

pytest.importorskip("ctranslate2", reason="needs the 'ct2' extra: pip install -e '.[ct2]'")
from mtkit.engines.ct2 import max_target_len  # noqa: E402
from mtkit.export.ct2 import export_ct2  # noqa: E402


def tcfg(**values) -> TranslateConfig:
    """A TranslateConfig for the ctranslate2 engine from flat options, as the CLI gives them."""
    return TranslateConfig.from_flat({"engine": "ctranslate2", **values})


def translate_lines_ct2(model_dir: Path, lines: list[str], cfg: TranslateConfig) -> list[str]:
    return best_texts(load_engine([str(model_dir)], cfg).translate(lines))


@pytest.fixture(scope="module")
def ct2_dir(trained: Ckpt, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_ct2(trained.path, tmp_path_factory.mktemp("ct2") / "fp32")


class Counted:
    """A progress bar stand-in: counts the lines it hears of."""

    n = 0

    def update(self, n: int) -> None:
        self.n += n


def greedy_lines(ck: Ckpt, lines: list[str], cfg: TranslateConfig) -> list[str]:
    out = []
    for ids in ck.src.encode(lines):
        bound = max_target_len(len(ids), cfg.search, ck.model.cfg.max_positions - 1)
        out.append(ck.tgt.decode([greedy_reference(ck.model, ids, bound)])[0] if ids else "")
    return out


@pytest.mark.parametrize("bound", [3, 30])
def test_float32_greedy_equals_greedy_search(ct2_dir: Path, trained: Ckpt, bound: int) -> None:
    cfg = tcfg(beam=1, max_len_a=0, max_len_b=bound, device="cpu")
    assert translate_lines_ct2(ct2_dir, TEST_LINES, cfg) == greedy_lines(trained, TEST_LINES, cfg)


def test_pre_norm_exports_and_decodes_the_same(trained_pre_norm: Ckpt, tmp_path: Path) -> None:
    out = export_ct2(trained_pre_norm.path, tmp_path / "ct2")
    cfg = tcfg(beam=1, max_len_a=0, max_len_b=20, device="cpu")
    want = greedy_lines(trained_pre_norm, TEST_LINES, cfg)
    assert translate_lines_ct2(out, TEST_LINES, cfg) == want


@pytest.mark.parametrize("overrides", [{"share_all_embeddings": True}, {"tie_output": False}])
def test_embedding_variants(overrides: dict, ckpt_dir: Path, spms: dict, tmp_path: Path) -> None:
    ck = make_ckpt(ckpt_dir, spms, **overrides)  # untrained: outputs run to the bound
    out = export_ct2(ck.path, tmp_path / "ct2")
    cfg = tcfg(beam=1, max_len_a=0, max_len_b=6, device="cpu")
    assert translate_lines_ct2(out, TEST_LINES[:4], cfg) == greedy_lines(ck, TEST_LINES[:4], cfg)


def test_lines_keep_their_place_across_bounds_and_batches(ct2_dir: Path, trained: Ckpt) -> None:
    lines = ["", TEST_LINES[0], "   ", *TEST_LINES[1:6], "", TEST_LINES[6]]
    # bounds depend on source length (several groups); max_tokens forces several batches
    cfg = tcfg(beam=1, max_len_a=0.5, max_len_b=2, max_tokens=12, device="cpu")
    got = translate_lines_ct2(ct2_dir, lines, cfg)
    assert len(got) == len(lines) and got[0] == got[2] == got[8] == ""
    assert got == greedy_lines(trained, lines, cfg)


def test_workers_decode_batches_at_once_with_the_same_output(ct2_dir: Path) -> None:
    """--workers 2: inter_threads 2, every batch submitted at once; lines keep their place and
    the outputs and scores equal one worker's on the same threads."""
    lines = ["", *TEST_LINES, "  ", *TEST_LINES[::-1]]
    options = dict(beam=3, max_tokens=12, device="cpu", threads=1)
    one = load_engine([str(ct2_dir)], tcfg(**options))
    two = load_engine([str(ct2_dir)], tcfg(workers=2, **options))
    assert two.translator.num_translators == 2
    counted = Counted()
    got = two.translate(lines, progress=counted)
    assert got[0] == got[len(TEST_LINES) + 1] == []

    def texts_scores(results: list) -> list:  # logprob is NaN here, never equal to itself
        return [[(h.text, h.score, h.tokens) for h in hyps] for hyps in results]

    assert texts_scores(got) == texts_scores(one.translate(lines))
    assert counted.n == len(lines)


@pytest.mark.parametrize("beam, lenpen", [(1, 1.0), (4, 1.0), (4, 0.6), (5, 0.0)])
def test_search_equals_mtkit_search(ct2_dir: Path, trained: Ckpt, beam: int, lenpen: float):
    """Same output whenever no hypothesis reaches the length limit (there CTranslate2 ends it
    without EOS where mtkit forces EOS: see docs_snippets/export.md)."""
    from mtkit.decoding.search import generate

    cfg = tcfg(beam=beam, lenpen=lenpen, max_len_a=0, max_len_b=30, device="cpu")
    src = pad([ids + [EOS_ID] for ids in trained.src.encode(TEST_LINES)])
    hyps = [h[0].tokens for h in generate([trained.model], src, cfg.search)]
    assert translate_lines_ct2(ct2_dir, TEST_LINES, cfg) == trained.tgt.decode(hyps)
    assert max(map(len, hyps)) < 30  # the limit never bound


def test_int8_export_is_smaller_and_translates(trained: Ckpt, ct2_dir: Path, tmp_path: Path):
    out = export_ct2(trained.path, tmp_path / "int8", quantization="int8")
    assert (out / "model.bin").stat().st_size < (ct2_dir / "model.bin").stat().st_size
    cfg = tcfg(beam=2, device="cpu")
    got = translate_lines_ct2(out, TEST_LINES + [""], cfg)
    assert len(got) == len(TEST_LINES) + 1 and all(got[:-1]) and got[-1] == ""


def test_long_lines_are_cut_with_a_warning(ct2_dir: Path, trained: Ckpt, capsys) -> None:
    cfg = tcfg(beam=1, max_len_a=0, max_len_b=10, max_input_tokens=3, device="cpu")
    line = "the man runs on the red street"
    ids = trained.src.encode_one(line)[:3]
    want = trained.tgt.decode([greedy_reference(trained.model, ids, 10)])
    assert translate_lines_ct2(ct2_dir, ["a", line], cfg)[1:] == want
    assert "line 2:" in capsys.readouterr().err


def test_sampling_is_seeded(ct2_dir: Path) -> None:
    cfg = tcfg(sampling=True, beam=1, top_k=0, temperature=2.0, seed=7, device="cpu")
    first = translate_lines_ct2(ct2_dir, TEST_LINES, cfg)
    assert translate_lines_ct2(ct2_dir, TEST_LINES, cfg) == first
    cfg = tcfg(sampling=True, top_k=0, temperature=2.0, seed=8, device="cpu")
    assert translate_lines_ct2(ct2_dir, TEST_LINES, cfg) != first


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(lenpen_style="gnmt"), "lenpen_style"),
        (dict(nbest=2), "nbest"),
        (dict(unk_penalty=1.0), "unk_penalty"),
        (dict(device="tpu"), "unknown device"),
        (dict(quantize="int4"), "--quantize must be int8"),
        (dict(beam=0), "--beam"),
    ],
)
def test_unsupported_options_are_refused(ct2_dir: Path, change: dict, message: str) -> None:
    with pytest.raises(MtkitError, match=message):
        translate_lines_ct2(ct2_dir, ["a dog"], tcfg(**change))


@pytest.mark.parametrize("change", [dict(lenpen_style="gnmt"), dict(nbest=2)])
def test_unsupported_options_per_call_are_refused(ct2_dir: Path, change: dict) -> None:
    engine = load_engine([str(ct2_dir)], tcfg())
    search = engine.config.search.replace(**change)
    with pytest.raises(MtkitError, match=next(iter(change))):
        engine.check(search)
    with pytest.raises(MtkitError, match=next(iter(change))):
        engine.translate(["a dog"], search)


@pytest.mark.parametrize("lines", [[], [""], ["", ""], ["  ", "\t"]])
def test_blank_and_empty_input_give_empty_lines(ct2_dir: Path, lines: list[str]) -> None:
    """All-blank input once crashed the chunker (max() of an empty sequence)."""
    assert translate_lines_ct2(ct2_dir, lines, tcfg()) == [""] * len(lines)


def test_not_an_exported_directory(tmp_path: Path, ct2_dir: Path) -> None:
    with pytest.raises(MtkitError, match="no source.spm"):
        translate_lines_ct2(tmp_path, ["a"], tcfg())
    for name in ("source.spm", "target.spm"):
        (tmp_path / name).write_bytes((ct2_dir / name).read_bytes())
    with pytest.raises(MtkitError, match="not a CTranslate2 model directory"):
        translate_lines_ct2(tmp_path, ["a"], tcfg())


def test_cli_export(trained: Ckpt, tmp_path: Path) -> None:
    out, run = tmp_path / "ct2", CliRunner().invoke
    args = ["export", "-m", str(trained.path), "--format", "ctranslate2", str(out)]
    result = run(cli, [*args, "--quantization", "int8_float32"])
    assert result.exit_code == 0, result.output
    names = {p.name for p in out.iterdir()}
    assert {"model.bin", "config.json", "source.spm", "target.spm", "mtkit.json"} <= names
    again = run(cli, args)
    assert again.exit_code == 1 and "already exists" in again.output
    assert run(cli, [*args, "--force"]).exit_code == 0
    bad = run(cli, [*args, "--force", "--quantization", "int4"])
    assert bad.exit_code == 2 and "int4" in bad.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ct2"]  # no temporaries left


def test_translate_cli_engine_ctranslate2(ct2_dir: Path, trained: Ckpt, tmp_path: Path) -> None:
    lines = [*TEST_LINES, "", "   "]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    inp, out = str(tmp_path / "in.txt"), str(tmp_path / "out.txt")
    args = ["translate", "--engine", "ctranslate2", "-m", str(ct2_dir), "-i", inp, "-o", out]
    args += ["--beam", "1", "-q"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    got = (tmp_path / "out.txt").read_text().split("\n")[:-1]
    cfg = tcfg(beam=1)
    assert got == translate_lines_ct2(ct2_dir, TEST_LINES, cfg) + ["", ""]
    bad = CliRunner().invoke(
        cli,
        [
            "translate",
            "--engine",
            "ctranslate2",
            "-m",
            str(ct2_dir),
            "-m",
            str(ct2_dir),
            "-i",
            str(tmp_path / "in.txt"),
        ],
    )
    assert bad.exit_code == 1 and "one exported model directory" in bad.output
