"""`mtkit translate --draft`: the teacher's greedy output, and one-line refusals."""

from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from translate_helpers import make_checkpoint

from mtkit.checkpoint import Checkpoint
from mtkit.cli import cli
from mtkit.data.shortlist import Shortlist

GREEDY = ["--beam", "1", "--max-len-a", "0", "--max-len-b", "6", "--threads", "1"]
LINES = b"a man runs\nthe red dog sits on the street\n\ncat\na woman plays ball on the house\n"


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, str]:
    """A teacher, a draft sharing its spm models (other weights) and one with other spm models."""
    where = tmp_path_factory.mktemp("spec")
    teacher = make_checkpoint(where / "teacher.pt")
    torch.manual_seed(3)
    payload = torch.load(teacher, weights_only=False)
    payload["model"] = {
        k: v + 0.05 * torch.randn_like(v) if v.is_floating_point() else v
        for k, v in payload["model"].items()
    }
    draft = where / "draft.pt"
    torch.save(payload, draft)
    return teacher, str(draft), make_checkpoint(where / "other.pt", spm_seed=1)


@pytest.fixture(autouse=True, scope="module")
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def run(args: list[str], stdin: bytes = LINES):
    return CliRunner().invoke(cli, ["translate", "-q", *args], input=stdin)


def test_draft_gives_the_teachers_greedy_output(ckpts: tuple[str, str, str]) -> None:
    teacher, draft, _ = ckpts
    greedy = run(["-m", teacher, *GREEDY])
    assert greedy.exit_code == 0, greedy.output
    for k in ("1", "3"):
        spec = run(["-m", teacher, "--draft", draft, "--draft-tokens", k, *GREEDY])
        assert spec.exit_code == 0, spec.output
        assert spec.stdout == greedy.stdout
    ensemble = run(["-m", teacher, "-m", draft, *GREEDY])
    spec = run(["-m", teacher, "-m", draft, "--draft", draft, *GREEDY])
    assert spec.stdout == ensemble.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            [],
            "--draft speeds up greedy decoding: it needs --beam 1 and no --sampling (got --beam 5)",
        ),
        (["--sampling"], "it needs --beam 1 and no --sampling (got --beam 1 --sampling)"),
        (["--beam", "1", "--alignment"], "--draft cannot be combined with --alignment"),
        (["--beam", "1", "--constraints"], "--draft cannot be combined with --constraints"),
        (["--beam", "1", "--draft-tokens", "0"], "--draft-tokens"),
        (["--beam", "1", "--draft-confidence", "1"], "--draft-confidence"),
        (["--beam", "1", "--engine", "ctranslate2"], "--draft runs with --engine mtkit only"),
        (["--beam", "1", "--shortlist", "x.gz"], "--draft cannot be combined with --shortlist"),
    ],
)
def test_draft_with_options_it_cannot_honour_is_refused(
    ckpts: tuple[str, str, str], args: list[str], message: str
) -> None:
    teacher, draft, _ = ckpts
    result = run(["-m", teacher, "--draft", draft, *args])
    assert result.exit_code != 0
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_draft_with_other_vocabularies_is_refused_by_name(ckpts: tuple[str, str, str]) -> None:
    teacher, _, other = ckpts
    result = run(["-m", teacher, "--draft", other, *GREEDY])
    assert result.exit_code != 0
    assert f"--draft {other}: its src sentencepiece model differs" in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    missing = str(Path(other).with_name("missing.pt"))
    result = run(["-m", teacher, "--draft", missing, *GREEDY])
    assert result.exit_code != 0 and "missing.pt" in result.output


def shortlist_of(ckpt: str, out: Path, frequent: tuple[int, ...]) -> str:
    """A shortlist for ``ckpt``'s vocabularies: per source id s the target 4 + s mod 7."""
    src, tgt = Checkpoint.load(ckpt).tokenizers()
    rows = tuple((4 + s % 7,) for s in range(len(src)))
    with out.open("wb") as handle:
        Shortlist(rows, frequent, src.sha256, tgt.sha256, len(src), len(tgt), "test", 1).write(
            handle
        )
    return str(out)


def test_an_int8_draft_within_a_shortlist_gives_the_teachers_greedy_output(
    ckpts: tuple[str, str, str], tmp_path: Path
) -> None:
    teacher, draft, other = ckpts
    greedy = run(["-m", teacher, *GREEDY])
    greedy8 = run(["-m", teacher, "--quantize", "int8", *GREEDY])
    small = shortlist_of(teacher, tmp_path / "small.gz", (9, 12))
    full = shortlist_of(
        teacher, tmp_path / "full.gz", tuple(range(len(Checkpoint.load(teacher).tokenizers()[1])))
    )
    for extra in (
        ["--draft-quantize", "int8"],
        ["--draft-confidence", "0.6", "--draft-tokens", "6"],
        ["--draft-shortlist", small],
        ["--draft-shortlist", full, "--draft-quantize", "int8"],
        ["--quantize", "int8", "--draft-quantize", "none", "--draft-shortlist", small],
        ["--draft-dtype", "bf16"],
        ["--draft-dtype", "bf16", "--draft-shortlist", small],
    ):
        spec = run(["-m", teacher, "--draft", draft, *extra, *GREEDY])
        assert spec.exit_code == 0, spec.output
        expected = greedy8 if "--quantize" in extra else greedy
        assert spec.stdout == expected.stdout, extra
    foreign = shortlist_of(other, tmp_path / "other.gz", (9,))
    for args, message in (
        (
            ["--draft-shortlist", small],
            "--draft-shortlist and --draft-confidence need --draft",
        ),
        (["--draft-dtype", "bf16"], "--draft-dtype, --draft-shortlist and --draft-confidence"),
        (
            ["--draft", draft, "--draft-dtype", "bf16", "--draft-quantize", "int8"],
            "--draft-quantize int8 runs with --draft-dtype fp32 only (got --draft-dtype bf16)",
        ),
        (
            ["--draft", draft, "--dtype", "bf16", "--draft-quantize", "int8"],
            "--draft-quantize int8 needs an fp32 draft (it would be bf16: add --draft-dtype fp32)",
        ),
        (
            ["--draft", draft, "--draft-dtype", "fp16"],
            "--draft-dtype fp16 needs a CUDA device; on CPU use fp32 or bf16",
        ),
        (
            ["--draft", draft, "--draft-shortlist", foreign],
            f"--draft-shortlist {foreign}: built for another source vocabulary",
        ),
    ):
        result = run(["-m", teacher, *args, *GREEDY])
        assert result.exit_code != 0
        assert message in result.output
        assert len(result.output.strip().splitlines()) == 1, result.output
