"""mtkit.checkpoint.schema: the Checkpoint type's fields, the language codes training and
averaging write, and the fallbacks of files written before a field existed."""

import json
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import torch
from checkpoint_helpers import make_ckpt
from click.testing import CliRunner
from training.training_helpers import train_args

from mtkit.checkpoint import (
    Checkpoint,
    ResumeState,
    load_checkpoint,
    load_for_inference,
    save_checkpoint,
)
from mtkit.cli import cli
from mtkit.config import TrainConfig
from mtkit.data.tokenizer import SpecialIds, Tokenizer
from mtkit.errors import MtkitError
from mtkit.languages import Languages
from mtkit.training.average import average_checkpoints
from mtkit.training.state import TrainState, rng_state

# -- the Checkpoint type ---------------------------------------------------------------------


def same(a: Any, b: Any) -> bool:
    """Equal plain data, tensors compared exactly."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    return type(a) is type(b) and a == b


def plain(value: Any) -> bool:
    """Only tensors and plain containers (what torch.load(weights_only=True) reads)."""
    if isinstance(value, dict):
        return all(isinstance(k, str | int) and plain(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return all(map(plain, value))
    return value is None or isinstance(value, torch.Tensor | str | bytes | int | float | bool)


def full_checkpoint(spm_bytes: bytes) -> Checkpoint:
    """A checkpoint with every field set, none at its default."""
    payload, model = make_ckpt(spm_bytes)
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.tensor([[5, 6, 3]]), torch.tensor([[2, 7]])).sum().backward()
    optimizer.step()
    pieces = [Tokenizer(spm_bytes).sp.IdToPiece(i) for i in range(60)]
    return Checkpoint(
        model_config=model.cfg,
        model=model.state_dict(),
        spm={"src": spm_bytes, "tgt": spm_bytes},
        vocab={"src": pieces[::-1], "tgt": pieces[::-1]},
        special_ids=SpecialIds(pad=59, unk=58, bos=59, eos=0),
        languages=Languages(("en",), ("de", "fr")),
        tag_ids=(7, 9),
        train_config=asdict(TrainConfig(data="data-bin", seed=3)),
        averaged_from=["a.pt", "b.pt"],
        imported_from={"format": "hf", "path": "opus-mt-en-de"},
        resume=ResumeState(
            optimizer=optimizer.state_dict(),
            scheduler={"last_epoch": 4},
            rng=[rng_state()],
            state=TrainState(update=4, epoch=2).to_dict(),
            scaler={"scale": 1024.0},
        ),
    )


FIELDS = (
    "model_config",
    "model",
    "spm",
    "vocab",
    "special_ids",
    "languages",
    "tag_ids",
    "train_config",
    "averaged_from",
    "imported_from",
)


def test_every_field_round_trips(tmp_path: Path, spm_bytes: bytes) -> None:
    ckpt = full_checkpoint(spm_bytes)
    ckpt.save(tmp_path / "a.pt")
    loaded = Checkpoint.load(tmp_path / "a.pt")
    assert {f for f in FIELDS if not same(getattr(ckpt, f), getattr(loaded, f))} == set()
    assert loaded.resume is not None and ckpt.resume is not None
    assert same(asdict(loaded.resume), asdict(ckpt.resume))
    assert (loaded.resume.update, loaded.resume.epoch) == (4, 2)
    assert loaded.where == str(tmp_path / "a.pt")
    payload = load_checkpoint(
        tmp_path / "a.pt"
    )  # the file: plain data, codes as datasets write them
    assert plain(payload)
    assert (payload["src_lang"], payload["tgt_lang"], payload["tag_ids"]) == ("en", "de,fr", [7, 9])
    assert (payload["update"], payload["epoch"]) == (4, 2)
    assert loaded.training_config() == TrainConfig(data="data-bin", seed=3)
    model = loaded.build_model()
    assert model.tag_ids == (7, 9) and model.special_ids == ckpt.special_ids


def test_an_inference_checkpoint_has_no_training_state(tmp_path: Path, spm_bytes: bytes) -> None:
    payload, _ = make_ckpt(spm_bytes)
    save_checkpoint({**payload, "optimizer": {}, "scheduler": {}}, tmp_path / "a.pt")  # no rng
    ckpt = Checkpoint.load(tmp_path / "a.pt")
    assert ckpt.resume is None and ckpt.languages is None and ckpt.tag_ids == ()
    assert set(ckpt.to_payload()) == {"model_config", "train_config", "spm", "model", "tag_ids"}


@pytest.mark.parametrize(
    "change, message",
    [
        ({"model_config": None}, "lacks 'model_config'"),
        ({"model": None}, "lacks 'model'"),
        ({"spm": None}, "lacks 'spm'"),
        ({"spm": {"src": b"x"}}, "spm must hold the 'src' and 'tgt' sentencepiece models"),
        ({"model_config": {"d_modle": 8}}, "model_config: unknown option 'd_modle'"),
        ({"train_config": [1]}, "train_config must be a mapping"),
        ({"vocab": {"src": ["a"]}}, "vocab must hold 'src' and 'tgt' lists of pieces"),
        ({"special_ids": {"pad": 0}}, "special_ids without a vocab"),
        ({"tag_ids": "7"}, "tag_ids must be a list of ids"),
    ],
)
def test_a_bad_field_is_a_one_line_error(
    tmp_path: Path, spm_bytes: bytes, change: dict, message: str
) -> None:
    payload, _ = make_ckpt(spm_bytes)
    payload = {k: v for k, v in {**payload, **change}.items() if v is not None}
    path = tmp_path / "bad.pt"
    save_checkpoint(payload, path)
    with pytest.raises(MtkitError) as err:
        Checkpoint.load(path)
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value)
    assert "\n" not in str(err.value)


def train_tiny(data: Path, run: Path) -> Checkpoint:
    result = CliRunner().invoke(cli, train_args(data, run, "--max-updates", "1"))
    assert result.exit_code == 0, result.output
    return Checkpoint.load(run / "checkpoint_last.pt")


def test_training_writes_the_datasets_languages(tmp_path: Path, tiny_dataset: Path) -> None:
    ckpt = train_tiny(tiny_dataset, tmp_path / "run")
    assert ckpt.languages == Languages(("en",), ("de",)) and ckpt.tag_ids == ()
    raw = load_checkpoint(tmp_path / "run" / "checkpoint_last.pt")
    assert (raw["src_lang"], raw["tgt_lang"]) == ("en", "de")
    data = tmp_path / "moved"  # the codes are the file's own: the dataset may go
    shutil.copytree(tiny_dataset, data)
    train_tiny(data, tmp_path / "run2")
    shutil.rmtree(data)
    loaded = load_for_inference(tmp_path / "run2" / "checkpoint_last.pt")
    assert loaded.languages == Languages(("en",), ("de",))


def test_a_multilingual_run_writes_its_languages_and_tags(multi_run: Path) -> None:
    path = multi_run / "checkpoint_best.pt"
    ckpt = Checkpoint.load(path)
    src, _ = ckpt.tokenizers()
    assert ckpt.languages == Languages(("en",), ("de", "fr", "cs"))
    assert len(ckpt.tag_ids) == 3 and ckpt.tag_ids == src.tag_ids
    assert load_checkpoint(path)["tag_ids"] == list(src.tag_ids)
    loaded = load_for_inference(path)
    assert loaded.model.tag_ids == ckpt.tag_ids and loaded.languages == ckpt.languages


def test_old_files_fall_back_as_before(tmp_path: Path, spm_bytes: bytes, tiny_dataset) -> None:
    old = Path(__file__).parents[1] / "fixtures" / "old-default.pt"
    assert not {"src_lang", "tag_ids"} & set(load_checkpoint(old))
    ckpt = Checkpoint.load(old)
    assert ckpt.languages is None and ckpt.tag_ids == () and ckpt.resume is None
    assert load_for_inference(old).languages is None
    payload, _ = make_ckpt(spm_bytes)  # no codes of its own: its train_config's ...
    given = {"data": str(tmp_path / "gone"), "src_lang": "en", "tgt_lang": "fr"}
    save_checkpoint({**payload, "train_config": given}, tmp_path / "a.pt")
    assert Checkpoint.load(tmp_path / "a.pt").languages == Languages(("en",), ("fr",))
    data = tmp_path / "data"  # ... else its dataset's manifest.json, while it is there
    shutil.copytree(tiny_dataset, data)
    save_checkpoint({**payload, "train_config": {"data": str(data)}}, tmp_path / "b.pt")
    assert Checkpoint.load(tmp_path / "b.pt").languages == Languages(("en",), ("de",))
    (data / "manifest.json").write_text(json.dumps({"src_lang": "en"}))
    assert Checkpoint.load(tmp_path / "b.pt").languages is None


def test_averaging_keeps_languages_and_tags_and_refuses_others(
    tmp_path: Path, spm_bytes: bytes
) -> None:
    ckpt = full_checkpoint(spm_bytes)
    for name in ("a.pt", "b.pt"):
        ckpt.save(tmp_path / name)
    average_checkpoints([tmp_path / "a.pt", tmp_path / "b.pt"], tmp_path / "avg.pt")
    averaged = Checkpoint.load(tmp_path / "avg.pt")
    assert averaged.languages == ckpt.languages and averaged.tag_ids == ckpt.tag_ids
    assert averaged.vocab == ckpt.vocab and averaged.special_ids == ckpt.special_ids
    assert averaged.resume is None
    assert averaged.averaged_from == [str(tmp_path / "a.pt"), str(tmp_path / "b.pt")]
    ckpt.languages = Languages(("en",), ("de",))
    ckpt.save(tmp_path / "c.pt")
    with pytest.raises(MtkitError) as err:
        average_checkpoints([tmp_path / "a.pt", tmp_path / "c.pt"], tmp_path / "avg2.pt")
    assert str(err.value) == (
        f"{tmp_path / 'c.pt'}: languages en-de differ from {tmp_path / 'a.pt'}'s (en-de,fr); "
        "only models of the same languages can be averaged"
    )
    assert not (tmp_path / "avg2.pt").exists()
