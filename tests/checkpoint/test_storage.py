"""mtkit.checkpoint.storage: round trip, atomic writes, and refusal of anything that is not
plain data."""

import os
import pickle
from pathlib import Path

import pytest
import torch
from checkpoint_helpers import make_ckpt

from mtkit.checkpoint import (
    load_checkpoint,
    load_for_inference,
    save_checkpoint,
)
from mtkit.errors import MtkitError


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
    refusals = [
        (path, "refused: loading it would call posix.system"),
        (raw, "refused: not a checkpoint of tensors and plain data"),
    ]
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
