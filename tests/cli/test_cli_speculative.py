"""`mtkit translate --draft`: the teacher's greedy output, and one-line refusals."""

from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from test_cli_translate import make_checkpoint

from mtkit.cli import cli

GREEDY = ["--beam", "1", "--max-len-a", "0", "--max-len-b", "6", "--threads", "1"]
LINES = b"a man runs\nthe red dog sits on the street\n\ncat\na woman plays ball on the house\n"


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, str]:
    """A teacher, a draft sharing its spm models (other weights) and one with other spm models."""
    where = tmp_path_factory.mktemp("spec")
    teacher = make_checkpoint(where / "teacher.pt")
    torch.manual_seed(3)
    payload = torch.load(teacher, weights_only=False)
    payload["model"] = {k: v + 0.05 * torch.randn_like(v) if v.is_floating_point() else v
                        for k, v in payload["model"].items()}  # fmt: skip
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
        (["--beam", "1", "--engine", "ctranslate2"], "--draft runs with --engine mtkit only"),
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
