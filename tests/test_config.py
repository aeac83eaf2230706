"""Config dataclasses: YAML round trip, typed overrides, one-line errors."""

from dataclasses import asdict
from pathlib import Path

import pytest
import yaml

from mtkit.config import (
    ModelConfig,
    TrainConfig,
    apply_overrides,
    from_dict,
    load_yaml,
)
from mtkit.errors import MtkitError


def test_yaml_round_trip(tmp_path: Path) -> None:
    cfg = TrainConfig(data="d", lr=1e-3, adam_betas=[0.9, 0.99], max_updates=7)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(asdict(cfg)))  # as mtkit train writes it
    assert from_dict(TrainConfig, load_yaml(tmp_path / "c.yaml")) == cfg


@pytest.mark.parametrize(
    "overrides, expected",
    [
        ({"lr": "0.002"}, {"lr": 0.002}),
        (
            {"max_updates": "10", "validate_bleu": "false"},
            {"max_updates": 10, "validate_bleu": False},
        ),
        ({"lr": 1}, {"lr": 1.0}),  # an int is a valid float
        ({"data": "123"}, {"data": "123"}),  # strings stay strings for str fields
        ({"adam_betas": "[0.8, 0.9]"}, {"adam_betas": [0.8, 0.9]}),
    ],
)
def test_overrides_are_typed(overrides: dict, expected: dict) -> None:
    cfg = apply_overrides(TrainConfig(), overrides)
    assert {k: asdict(cfg)[k] for k in expected} == expected


@pytest.mark.parametrize(
    "data, message",
    [
        ({"nope": 1}, "unknown option 'nope'"),
        ({"max_updates": "ten"}, "'max_updates' must be int"),
        ({"max_updates": 1.5}, "'max_updates' must be int"),
        ({"validate_bleu": 1}, "'validate_bleu' must be bool"),
        ({"adam_betas": 0.9}, "'adam_betas' must be a list"),
    ],
)
def test_bad_values_name_the_key(data: dict, message: str) -> None:
    with pytest.raises(MtkitError, match=message):
        from_dict(TrainConfig, data, where="cfg.yaml")


@pytest.mark.parametrize(
    "text, message",
    [
        ("a: [1, 2\n", "line"),
        ("- 1\n- 2\n", "mapping"),
    ],
)
def test_bad_yaml(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(MtkitError, match=message):
        load_yaml(path)


def test_missing_and_empty_yaml(tmp_path: Path) -> None:
    with pytest.raises(MtkitError, match="no such config file"):
        load_yaml(tmp_path / "missing.yaml")
    (tmp_path / "empty.yaml").write_text("")
    assert load_yaml(tmp_path / "empty.yaml") == {}
    assert from_dict(ModelConfig, {}) == ModelConfig()


def test_yaml_exponent_floats(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("lr: 1e-3\nwarmup_init_lr: 5.0e-7\n")
    cfg = from_dict(TrainConfig, load_yaml(path))
    assert (cfg.lr, cfg.warmup_init_lr) == (0.001, 5e-7)
    with pytest.raises(MtkitError, match="'lr' must be float"):
        from_dict(TrainConfig, {"lr": "fast"})
