"""The search framework: the table of searches, each search's option check, and steppers that
hand out every input as soon as it is done, with exactly generate's output."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch
from search_helpers import same, sources, tiny_model

import mtkit.decoding
from mtkit.config import SearchConfig
from mtkit.decoding import generate
from mtkit.decoding.constraints import Constraints
from mtkit.decoding.ensemble import Ensemble
from mtkit.decoding.search import SEARCHES, check, search_kind, stepper_class
from mtkit.decoding.speculative import Draft
from mtkit.decoding.stepper import Stepper
from mtkit.errors import MtkitError

pytestmark = pytest.mark.usefixtures("one_thread")

OPTIONS = {  # kind -> (search options, constrained, draft)
    "greedy": (dict(beam=1), False, False),
    "sampling": (dict(sampling=True, nbest=2, top_k=5), False, False),
    "beam": (dict(beam=3, nbest=2), False, False),
    "constrained": (dict(beam=2, constraints="unordered"), True, False),
    "speculative": (dict(beam=1), False, True),
}


def test_every_kind_resolves_to_its_row_of_the_table() -> None:
    assert set(OPTIONS) == set(SEARCHES)
    for kind, (options, constrained, draft) in OPTIONS.items():
        assert search_kind(SearchConfig(**options), constrained, draft) == kind
        assert issubclass(stepper_class(kind), Stepper) and stepper_class(kind).kind == kind
    # a draft is used by plain greedy decoding only
    assert search_kind(SearchConfig(beam=4), draft=True) == "beam"
    assert search_kind(SearchConfig(beam=1), constrained=True, draft=True) == "constrained"


@pytest.mark.parametrize(
    ("options", "constrained", "draft", "message"),
    [
        (dict(sampling=True), True, False, "--sampling cannot honour constraints"),
        (dict(beam=5), False, True, "it needs --beam 1 and no --sampling (got --beam 5)"),
        (dict(sampling=True), False, True, "(got --beam 1 --sampling)"),
        (dict(beam=1, constraints="ordered"), True, True, "--draft cannot be combined with --con"),
        (dict(beam=1, alignment=True), False, True, "--draft cannot be combined with --alignment"),
    ],
)
def test_each_search_refuses_what_it_cannot_honour(options, constrained, draft, message) -> None:
    with pytest.raises(MtkitError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check(SearchConfig(**options), constrained, draft)


def test_options_every_search_honours_pass_its_check() -> None:
    for options, constrained, draft in OPTIONS.values():
        check(SearchConfig(**options), constrained, draft)


def start(kind: str, model, src: torch.Tensor, cfg: SearchConfig) -> Stepper:
    given = {
        "sampling": [torch.Generator().manual_seed(cfg.seed)],
        "constrained": [[Constraints([[7]]) for _ in range(len(src))]],
        "speculative": [Draft(tiny_model(seed=3), tokens=2)],
    }
    return stepper_class(kind)(Ensemble([model]), src, cfg, *given.get(kind, []))


@pytest.mark.parametrize("kind", list(OPTIONS))
def test_an_input_is_handed_out_as_soon_as_it_is_done(kind: str) -> None:
    """Limits of 2, 30 and 6 tokens: the short inputs leave long before the long one, each
    handed out once, and every input's hypotheses are generate's, exactly."""
    model, src = tiny_model(), sources([2, 30, 6])
    options, constrained, draft = OPTIONS[kind]
    cfg = SearchConfig(max_len_a=1.0, max_len_b=0, min_len=0, **options)
    stepper = start(kind, model, src, cfg)
    handed: dict[int, tuple[int, list]] = {}  # input -> (steps taken when handed out, n-best)
    with torch.inference_mode():
        while True:
            for i, hyps in stepper.finished():
                assert i not in handed
                handed[i] = (stepper.steps, hyps)
            if stepper.done:
                break
            stepper.step()
    assert sorted(handed) == [0, 1, 2]
    slack = 3 if kind == "speculative" else 1  # a pass gains up to draft tokens + 1 positions
    assert handed[0][0] <= 2 + slack < handed[1][0]  # the 2-token input, long before the 30's
    assert handed[2][0] <= 6 + slack < handed[1][0]
    extra = {
        "constrained": dict(constraints=[Constraints([[7]]) for _ in range(3)]),
        "speculative": dict(draft=Draft(tiny_model(seed=3), tokens=2)),
    }
    same([handed[i][1] for i in range(3)], generate([model], src, cfg, **extra.get(kind, {})))


def test_the_searches_import_no_search_but_through_the_table() -> None:
    """No cycle: a search module imports the framework (ensemble, hypotheses, stepper, the pure
    functions), never search.py or another search."""
    package = Path(mtkit.decoding.__file__).parent
    searches = {module.rsplit(".", 1)[1] for module, _ in SEARCHES.values()} | {"search"}
    for name in searches - {"search"}:
        tree = ast.parse((package / f"{name}.py").read_text(encoding="utf-8"))
        imported = {
            node.module.rsplit(".", 1)[1]
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            and (node.module or "").startswith("mtkit.decoding.")
        }
        assert not imported & searches, f"{name}.py imports {sorted(imported & searches)}"
