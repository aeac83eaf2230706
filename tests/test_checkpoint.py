"""Checkpoints: round trip, atomic writes, and refusal of anything that is not plain data."""

import os
import pickle
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from mtkit.checkpoint import load_checkpoint, load_for_inference, save_checkpoint
from mtkit.config import ModelConfig
from mtkit.data.tokenizer import train_spm
from mtkit.errors import MtkitError
from mtkit.model.transformer import build_model

WORDS = "the a man woman dog cat runs walks on in red blue big small house street".split()


@pytest.fixture(scope="module")
def spm_bytes() -> bytes:
    lines = [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(6)) for i in range(200)]
    return train_spm(lines, vocab_size=60)


def make_ckpt(spm_bytes: bytes) -> tuple[dict, torch.nn.Module]:
    cfg = ModelConfig(src_vocab_size=60, tgt_vocab_size=60, d_model=16, ffn_dim=32, heads=2,
                      encoder_layers=1, decoder_layers=1)  # fmt: skip
    model = build_model(cfg)
    payload = {"model_config": asdict(cfg), "model": model.state_dict(),
               "spm": {"src": spm_bytes, "tgt": spm_bytes}}  # fmt: skip
    return payload, model


def test_round_trip(tmp_path: Path, spm_bytes: bytes) -> None:
    payload, model = make_ckpt(spm_bytes)
    save_checkpoint(payload, tmp_path / "a.pt")
    loaded = load_for_inference(tmp_path / "a.pt")
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[name], tensor)
    assert loaded.src_tokenizer.proto == spm_bytes
    assert [p.name for p in tmp_path.iterdir()] == ["a.pt"]  # no temporary left behind


def test_refuses_code(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    path = tmp_path / "evil.pt"
    torch.save({"format": "mtkit-checkpoint", "x": Evil()}, path)
    raw = tmp_path / "raw.pt"
    raw.write_bytes(pickle.dumps(Evil()))
    refusals = [(path, "refused: loading it would call posix.system"),
                (raw, "refused: not a checkpoint of tensors and plain data")]  # fmt: skip
    for crafted, message in refusals:
        with pytest.raises(MtkitError) as refused:
            load_checkpoint(crafted)
        assert str(refused.value).startswith(f"{crafted}: {message}")
        assert "\n" not in str(refused.value)
        assert not marker.exists()
    # the files are real attacks: a plain unpickling runs the command
    torch.load(path, weights_only=False)
    assert marker.exists()
    marker.unlink()
    pickle.loads(raw.read_bytes())
    assert marker.exists()


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "unreadable|not a checkpoint"),
        (b"hello world", "unreadable|not a checkpoint"),
    ],
)
def test_garbage(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.pt"
    path.write_bytes(content)
    with pytest.raises(MtkitError, match=message):
        load_checkpoint(path)


def test_truncated_other_tool_and_version(tmp_path: Path, spm_bytes: bytes) -> None:
    payload, _ = make_ckpt(spm_bytes)
    save_checkpoint(payload, tmp_path / "a.pt")
    data = (tmp_path / "a.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(MtkitError, match="unreadable"):
        load_checkpoint(tmp_path / "cut.pt")
    torch.save({"state_dict": {}}, tmp_path / "other.pt")
    with pytest.raises(MtkitError, match="not an mtkit checkpoint"):
        load_checkpoint(tmp_path / "other.pt")
    torch.save({**payload, "format": "mtkit-checkpoint", "format_version": 99}, tmp_path / "v.pt")
    with pytest.raises(MtkitError, match="format 99"):
        load_checkpoint(tmp_path / "v.pt")
    with pytest.raises(MtkitError, match="no such checkpoint"):
        load_checkpoint(tmp_path / "missing.pt")


def test_failed_write_leaves_old_file(tmp_path: Path, spm_bytes: bytes, monkeypatch) -> None:
    payload, _ = make_ckpt(spm_bytes)
    save_checkpoint(payload, tmp_path / "a.pt")
    before = (tmp_path / "a.pt").read_bytes()

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(MtkitError, match="No space left"):
        save_checkpoint(payload, tmp_path / "a.pt")
    assert (tmp_path / "a.pt").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.pt"]
    with pytest.raises(MtkitError, match="No space left"):  # no directory made for it stays
        save_checkpoint(payload, tmp_path / "nodir" / "b.pt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.pt"]
    monkeypatch.undo()
    save_checkpoint(payload, tmp_path / "nodir" / "b.pt")
    assert load_checkpoint(tmp_path / "nodir" / "b.pt")["format"] == "mtkit-checkpoint"
