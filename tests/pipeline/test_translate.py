"""The translate pipeline on a tiny random checkpoint: line rules, chunking, n-best, precision."""

import dataclasses
import io
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mtkit.checkpoint import save_checkpoint
from mtkit.config import ModelConfig, TranslateConfig
from mtkit.data.tokenizer import train_spm
from mtkit.engines import load_engine, native
from mtkit.engines.base import Translation
from mtkit.engines.native import NativeEngine
from mtkit.engines.parallel import ParallelEngine
from mtkit.errors import MtkitError
from mtkit.pipeline.translate import (
    format_results,
    read_lines,
    translate_file,
    translate_lines,
    translate_stream,
    translate_with,
)

pytestmark = pytest.mark.usefixtures("one_thread")


WORDS = "a man woman dog cat runs sits on the red blue green street house ball plays with".split()
FAST = dict(beam=2, max_len_a=0.0, max_len_b=4)  # short outputs keep the tests quick


def tcfg(**values) -> TranslateConfig:
    """A TranslateConfig from flat options, as the command line gives them."""
    return TranslateConfig.from_flat(values)


def corpus(seed: int, n: int = 300) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(2, 9))) for _ in range(n)]


def make_checkpoint(path: Path, seed: int = 0, spm_seed: int = 0) -> str:
    """A random-weight model with spm models trained on a small synthetic corpus."""
    spm = train_spm(corpus(spm_seed), vocab_size=60)
    torch.manual_seed(seed)
    cfg = ModelConfig(
        src_vocab_size=60,
        tgt_vocab_size=60,
        d_model=16,
        ffn_dim=32,
        heads=2,
        encoder_layers=1,
        decoder_layers=1,
        dropout=0.0,
        attention_dropout=0.0,
        max_positions=64,
    )
    from mtkit.model.transformer import build_model

    model = build_model(cfg)
    save_checkpoint(
        {
            "model_config": dataclasses.asdict(cfg),
            "model": model.state_dict(),
            "spm": {"src": spm, "tgt": spm},
        },
        path,
    )
    return str(path)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny.pt")


@pytest.fixture(scope="module")
def translator(ckpt: str) -> NativeEngine:
    return load_engine([ckpt], tcfg(max_input_tokens=12, chunk_lines=5, **FAST))


def run_stream(tr: NativeEngine, data: bytes) -> list[str]:
    out = io.BytesIO()
    count = translate_stream(tr, read_lines(io.BytesIO(data)), out)
    text = out.getvalue().decode("utf-8")
    assert text == "" or text.endswith("\n")
    lines = text.split("\n")[:-1]
    assert len(lines) == count * tr.config.search.nbest
    return lines


# any character but a newline; no lone surrogates (they are not text and cannot be UTF-8 encoded)
line_char = st.characters(blacklist_characters="\n", blacklist_categories=("Cs",))
line_text = st.text(line_char, max_size=30)
long_line = st.lists(st.sampled_from(WORDS), min_size=20, max_size=60).map(" ".join)
blank = st.sampled_from(["", " ", "   \t ", "\r", "\u3000", "\x00"])
input_lines = st.lists(st.one_of(line_text, long_line, blank), max_size=12)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=input_lines, trailing_newline=st.booleans())
@example(lines=[], trailing_newline=False)  # empty input
@example(lines=["", ""], trailing_newline=True)  # all blank: no batch to decode at all
@example(lines=[" ", "\t", "\u3000"], trailing_newline=False)
def test_one_output_line_per_input_line(
    translator: NativeEngine, lines: list[str], trailing_newline: bool
) -> None:
    data = "\n".join(lines).encode("utf-8") + (b"\n" if trailing_newline and lines else b"")
    out = run_stream(translator, data)
    expected = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    assert len(out) == expected
    for line, translation in zip(lines, out, strict=False):
        if not line.strip():
            assert translation == ""


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(st.one_of(st.text(max_size=20), long_line, blank), max_size=10))
def test_translate_with_returns_one_string_per_input(
    translator: NativeEngine, lines: list[str]
) -> None:
    out = translate_with(translator, lines)
    assert len(out) == len(lines)
    assert not any("\n" in t or "\r" in t for t in out)


def test_bom_crlf_and_invalid_utf8(capsys: pytest.CaptureFixture[str]) -> None:
    data = b"\xef\xbb\xbfHallo\r\nbad \xff byte\n\n\xef\xbb\xbfnot a BOM here\r\nlast"
    assert list(read_lines(io.BytesIO(data))) == [
        "Hallo",
        "bad \ufffd byte",
        "",
        "\ufeffnot a BOM here",
        "last",
    ]
    assert "<input>:2: invalid UTF-8 (byte 0xff at byte 5" in capsys.readouterr().err


def test_long_lines_are_truncated_with_a_warning(
    translator: NativeEngine, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = ["a man", "", " ".join(WORDS * 4), "the dog"]
    out = run_stream(translator, "\n".join(lines).encode())
    assert len(out) == 4 and out[1] == ""
    err = capsys.readouterr().err
    assert "line 3:" in err and "truncated to the first 12" in err and "line 1:" not in err


def test_chunks_and_batches_restore_input_order(ckpt: str) -> None:
    lines = corpus(seed=5, n=23) + ["", "a"]
    small = load_engine([ckpt], tcfg(chunk_lines=3, max_tokens=8, **FAST))
    large = load_engine([ckpt], tcfg(chunk_lines=1000, **FAST))
    one_by_one = [translate_with(large, [line])[0] for line in lines]
    assert translate_with(small, lines) == translate_with(large, lines) == one_by_one
    assert translate_lines([ckpt], lines, tcfg(**FAST)) == one_by_one


def test_nbest_tsv_layout(ckpt: str) -> None:
    tr = load_engine([ckpt], tcfg(beam=3, nbest=3, max_len_a=0.0, max_len_b=4))
    out = run_stream(tr, b"a man\n\nthe dog runs\n")
    assert len(out) == 9
    rows = [line.split("\t") for line in out]
    assert all(len(r) == 5 for r in rows)
    assert [(r[0], r[1]) for r in rows] == [(str(i), str(k)) for i in (1, 2, 3) for k in (1, 2, 3)]
    assert rows[3][2:] == ["0.0000", "0.0000", ""]  # the empty line
    for line in (1, 3):
        scores = [float(r[2]) for r in rows if r[0] == str(line)]
        assert scores == sorted(scores, reverse=True)


def test_format_results_cleans_tabs_in_nbest_rows() -> None:
    results = [[Translation("x y\tz", -1.0, -2.0)], []]
    assert format_results(results, 1, nbest=1) == "x y\tz\n\n"
    assert format_results(results, 7, nbest=2).splitlines()[0] == "7\t1\t-1.0000\t-2.0000\tx y z"


def test_int8_runs_and_keeps_line_count(ckpt: str) -> None:
    tr = load_engine([ckpt], tcfg(quantize="int8", device="cpu", **FAST))
    assert "quantized" in type(tr.models[0].output).__module__  # the tied projection too
    lines = corpus(seed=2, n=7) + [""]
    assert len(translate_with(tr, lines)) == 8


def test_cpu_matmul_onednn_packs_and_translates_as_the_default(ckpt: str) -> None:
    from mtkit.model.packed import PackedLinear, onednn_available

    lines = corpus(seed=5, n=12) + [""]
    packed = load_engine([ckpt], tcfg(device="cpu", **FAST))
    plain = load_engine([ckpt], tcfg(device="cpu", cpu_matmul="default", **FAST))
    assert isinstance(packed.models[0].output, PackedLinear) == onednn_available()
    assert plain.models[0].output is None  # tied projection, torch's matmul
    assert translate_with(packed, lines) == translate_with(plain, lines)
    with pytest.raises(MtkitError, match="--cpu-matmul must be one of onednn, default"):
        load_engine([ckpt], tcfg(cpu_matmul="mkl", **FAST))


def test_bf16_on_cpu_runs_and_fp16_is_refused(ckpt: str) -> None:
    tr = load_engine([ckpt], tcfg(dtype="bf16", device="cpu", **FAST))
    assert len(translate_with(tr, ["a man", "the dog"])) == 2
    with pytest.raises(MtkitError, match="fp16 needs a CUDA device"):
        load_engine([ckpt], tcfg(dtype="fp16", device="cpu"))
    with pytest.raises(MtkitError, match="--quantize int8 runs on CPU with --dtype fp32"):
        load_engine([ckpt], tcfg(dtype="bf16", quantize="int8", device="cpu"))


@pytest.mark.parametrize("cpu_matmul", ["onednn", "default"])
def test_bf16_decodes_as_fp32_for_most_sentences(ckpt: str, cpu_matmul: str) -> None:
    """bf16 linear layers (packed for oneDNN, or plain bf16 weights) against fp32, beam 5, on
    200 sentences of the tiny random model: its next-token distributions are nearly flat, so
    bf16 rounding flips close calls more often than a trained model's would. Measured on an
    AVX512-BF16 CPU: 177/200 equal (88.5%) with either matmul (greedy: 91%); another seed's
    model 98.5%. We ask for 80%: bf16 hardware and emulation round alike, but sum in another
    order."""
    lines = corpus(seed=11, n=200)
    fp32 = translate_with(load_engine([ckpt], tcfg(device="cpu", beam=5)), lines)
    engine = load_engine([ckpt], tcfg(device="cpu", dtype="bf16", beam=5, cpu_matmul=cpu_matmul))
    bf16 = translate_with(engine, lines)
    agreement = sum(a == b for a, b in zip(fp32, bf16, strict=True)) / len(lines)
    assert agreement >= 0.8, agreement
    assert next(engine.models[0].parameters()).dtype == torch.float32  # embeddings stay fp32


def test_dtype_auto_says_what_it_chose(ckpt: str, capsys, monkeypatch) -> None:
    from mtkit import precision

    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx2"}))
    load_engine([ckpt], tcfg(device="cpu", dtype="auto"))
    err = capsys.readouterr().err
    assert "dtype fp32 (auto: this CPU has no bf16 hardware" in err
    load_engine([ckpt], tcfg(device="cpu", dtype="bf16"))
    assert "warning: bf16 on a CPU without bf16 hardware" in capsys.readouterr().err
    load_engine([ckpt], tcfg(device="cpu", dtype="auto", quantize="int8"))
    assert "dtype fp32 (auto: int8 quantization" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flags, dtype, quantize",
    [
        ({"avx2"}, "fp32", "int8"),
        ({"avx2", "amx_bf16"}, "bf16", ""),
        ({"avx512_bf16"}, "bf16", ""),
    ],
)
def test_dtype_fast_is_bf16_where_it_has_a_verdict_else_int8(
    ckpt: str, capsys, monkeypatch, flags: set, dtype: str, quantize: str
) -> None:
    """The server's default (issue 52): what ``auto`` picks, int8 linear layers where that is
    fp32; the engine decodes exactly as one given those settings, and says what it chose."""
    from mtkit import precision

    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset(flags))
    fast = load_engine([ckpt], tcfg(device="cpu", dtype="fast", **FAST))
    said = capsys.readouterr().err
    assert (fast.config.dtype, fast.config.quantize) == (dtype, quantize)
    assert f"mtkit: dtype {quantize or dtype} (fast: " in said
    same = load_engine([ckpt], tcfg(device="cpu", dtype=dtype, quantize=quantize, **FAST))
    lines = corpus(seed=5, n=12)
    assert translate_with(fast, lines) == translate_with(same, lines)
    plain = load_engine([ckpt], tcfg(device="cpu", dtype="fast", quantize="int8", **FAST))
    assert (plain.config.dtype, plain.config.quantize) == ("fp32", "int8")  # as asked


def test_serve_runs_the_fast_path_unless_told(monkeypatch, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from mtkit.cli import cli
    from mtkit.pipeline import serve

    seen = []
    monkeypatch.setattr(serve, "serve", lambda models, config, served: seen.append(config) or 0)
    for extra in ([], ["--dtype", "fp32"]):
        result = CliRunner().invoke(cli, ["serve", "-m", str(tmp_path / "m.pt"), *extra])
        assert result.exit_code == 0, result.output
    assert [c.dtype for c in seen] == ["fast", "fp32"]
    assert [c.compile for c in seen] == ["auto", "auto"]


def test_ensemble_of_a_checkpoint_with_itself_equals_it_alone(ckpt: str) -> None:
    lines = corpus(seed=3, n=6)
    config = tcfg(**FAST)
    assert translate_lines([ckpt, ckpt], lines, config) == translate_lines([ckpt], lines, config)


def test_ensemble_refuses_different_sentencepiece_models(ckpt: str, tmp_path: Path) -> None:
    other = make_checkpoint(tmp_path / "other.pt", spm_seed=9)
    with pytest.raises(MtkitError, match="sentencepiece model differs"):
        load_engine([ckpt, other], tcfg())


def test_sampling_is_reproducible_through_the_pipeline(ckpt: str) -> None:
    config = tcfg(beam=1, sampling=True, top_p=0.9, seed=3, max_len_b=6)
    lines = corpus(seed=4, n=8)
    assert translate_lines([ckpt], lines, config) == translate_lines([ckpt], lines, config)


class Counted:
    """A progress bar stand-in: counts the lines it hears of."""

    n = 0

    def update(self, n: int) -> None:
        self.n += n


def test_workers_decode_as_one_worker_does(ckpt: str) -> None:
    """--workers 2 (two spawned processes, one thread each): every batch decoded as a
    one-thread engine decodes it, so hypotheses, scores and log-probabilities are equal; lines
    keep their place; progress hears of every line."""
    lines = ["", *corpus(seed=5, n=30), "  ", *corpus(seed=6, n=10)]
    options = dict(FAST, beam=3, nbest=2, max_tokens=40, threads=1, device="cpu")
    one = load_engine([ckpt], tcfg(**options))
    two = load_engine([ckpt], tcfg(workers=2, **options))
    assert isinstance(two, ParallelEngine)
    counted = Counted()
    got = two.translate(lines, first_number=7, progress=counted)
    assert got == one.translate(lines) and got[0] == got[31] == [] and len(got[1]) == 2
    assert counted.n == len(lines)
    whole = load_engine([ckpt], tcfg(**{**options, "max_tokens": 10**6}))  # a group: a batch
    groups = [lines[:5], lines[5:6], ["", " "], lines[6:]]
    assert two.translate_groups(groups) == [whole.translate(group) for group in groups]


def running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_an_interruption_ends_the_workers_and_the_engine(ckpt: str) -> None:
    """A signal (here KeyboardInterrupt from the progress bar) ends the workers (killed,
    not left to finish the batches queued: with the demo model that took 0.5 s instead of 7 s
    after a SIGTERM) and the engine then refuses to translate, in one line."""
    engine = load_engine([ckpt], tcfg(workers=2, threads=1, max_tokens=20, **FAST))
    assert len(engine.pids) == 2 and all(running(pid) for pid in engine.pids)

    class Interrupting:
        def update(self, n: int) -> None:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        engine.translate(corpus(seed=8, n=200), progress=Interrupting())
    for _ in range(100):
        if not any(running(pid) for pid in engine.pids):
            break
        time.sleep(0.05)
    assert not any(running(pid) for pid in engine.pids)
    with pytest.raises(MtkitError, match="workers were stopped"):
        engine.translate(["a man"])


def test_workers_through_the_pipeline_write_the_same_file(ckpt: str, tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_text("\n".join(corpus(seed=7, n=25)) + "\n", encoding="utf-8")
    outputs = []
    for workers in (1, 2):
        out = tmp_path / f"out{workers}.txt"
        stats = translate_file(
            [ckpt], str(source), str(out), tcfg(workers=workers, threads=1, max_tokens=30, **FAST)
        )
        assert stats.lines == 25
        outputs.append(out.read_text(encoding="utf-8"))
    assert outputs[0] == outputs[1] and outputs[0].count("\n") == 25


def test_workers_refuse_sampling_and_bad_counts(ckpt: str) -> None:
    with pytest.raises(MtkitError, match="--sampling .* takes --workers 1"):
        load_engine([ckpt], tcfg(workers=2, sampling=True))
    with pytest.raises(MtkitError, match="--workers must be >= 1, got 0"):
        tcfg(workers=0)


def test_failed_run_leaves_no_output_file(
    ckpt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "in.txt"
    source.write_text("\n".join(corpus(seed=1, n=12)) + "\n", encoding="utf-8")
    target = tmp_path / "out.txt"
    target.write_text("old\n")
    calls = []

    def failing_generate(*args, **kwargs):
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("disk on fire")
        return real_generate(*args, **kwargs)

    real_generate = native.generate
    monkeypatch.setattr(native, "generate", failing_generate)
    config = tcfg(chunk_lines=4, **FAST)
    with pytest.raises(RuntimeError, match="disk on fire"):
        translate_file([ckpt], str(source), str(target), config)
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "out.txt"]


def test_file_to_file_and_path_errors(ckpt: str, tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_bytes(b"a man\r\n\r\nthe dog")
    target = tmp_path / "out.txt"
    stats = translate_file([ckpt], str(source), str(target), tcfg(**FAST))
    assert stats.lines == 3 and len(target.read_text().split("\n")) == 4
    assert target.stat().st_mode & 0o644 == 0o644  # not mkstemp's 0600
    translate_file([ckpt], str(source), str(tmp_path / "new" / "out.txt"), tcfg(**FAST))
    assert (tmp_path / "new" / "out.txt").read_bytes() == target.read_bytes()
    with pytest.raises(MtkitError, match="no such input file"):
        translate_file([ckpt], str(tmp_path / "missing.txt"), "-", tcfg())
    with pytest.raises(MtkitError, match="no such checkpoint"):
        translate_file([str(tmp_path / "nope.pt")], str(source), "-", tcfg())


def test_progress_bar_counts_lines(ckpt: str, tmp_path: Path, capsys) -> None:
    source = tmp_path / "in.txt"
    source.write_text("a man\n\nthe dog\n", encoding="utf-8")
    config = tcfg(**FAST)
    translate_file([ckpt], str(source), str(tmp_path / "o.txt"), config, show_progress=True)
    assert "3 lines" in capsys.readouterr().err


def test_translate_hypotheses_are_scored(translator: NativeEngine) -> None:
    results = translator.translate(["a man", "   "])
    assert results[1] == []
    (best,) = results[0]
    assert isinstance(best.text, str) and best.score <= 0 and best.logprob <= 0


def test_input_is_read_lazily_a_chunk_at_a_time(translator: NativeEngine) -> None:
    """Each chunk's output is written (and flushed) before the next chunk is read: the first
    lines come out long before the last is read, and memory holds one chunk."""
    read = 0

    def source() -> Iterator[str]:
        nonlocal read
        for line in corpus(seed=6, n=23):
            read += 1
            yield line

    class Out(io.BytesIO):
        def __init__(self) -> None:
            super().__init__()
            self.flushed: list[int] = []

        def flush(self) -> None:
            self.flushed.append(read)  # input lines read when a chunk's output is out

    out = Out()
    assert translate_stream(translator, source(), out) == 23
    assert translator.config.chunk_lines == 5 and out.flushed == [5, 10, 15, 20, 23]
    assert out.getvalue().count(b"\n") == 23
