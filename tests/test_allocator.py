"""mtkit.allocator: a beam search's freed tensors are reused without new page faults (glibc)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mtkit import allocator

# Beam 5 over 32 sentences with an 8,000-word vocabulary: every step's logits are 5 MB. Prints
# the minor page faults of five more identical searches after a first one.
PROBE = """
import resource, sys, torch
from mtkit.allocator import keep_freed_memory
from mtkit.config import ModelConfig, SearchConfig
from mtkit.decoding.search import generate
from mtkit.model.transformer import build_model
if sys.argv[1] == "keep":
    assert keep_freed_memory()
torch.set_num_threads(1)
torch.manual_seed(0)
cfg = ModelConfig(d_model=32, ffn_dim=64, heads=4, encoder_layers=1, decoder_layers=1,
                  dropout=0.0, attention_dropout=0.0)
model = build_model(cfg).eval()
src = torch.randint(4, 8000, (32, 12))
src[:, -1] = 3  # EOS
search = SearchConfig(beam=5, min_len=20, max_len_a=0, max_len_b=20)
with torch.inference_mode():
    generate([model], src, search)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(5):
        generate([model], src, search)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults(mode: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode], check=True, capture_output=True, text=True
    )
    return int(out.stdout)


@pytest.mark.skipif(not allocator.uses_glibc(), reason="mallopt settings are glibc's")
def test_a_second_search_reuses_the_memory_of_the_first() -> None:
    logits_pages = 160 * 8000 * 4 // 4096
    kept, default = faults("keep"), faults("default")
    # five searches of 21 steps each fault fewer pages than three steps' logits fill (measured:
    # 211 or 2,501 kept, 19,000-126,000 with glibc's defaults, which hand them back)
    assert kept < 3 * logits_pages, (kept, default)
    assert kept * 5 < default, (kept, default)


def test_elsewhere_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(allocator.platform, "libc_ver", lambda: ("musl", "1.2"))
    assert not allocator.keep_freed_memory()


def test_cpu_training_and_decoding_apply_it(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from mtkit.config import ModelConfig, SearchConfig, TrainConfig, TranslateConfig
    from mtkit.engines import native
    from mtkit.errors import MtkitError
    from mtkit.training import step

    calls: list[str] = []
    monkeypatch.setattr(step, "keep_freed_memory", lambda: calls.append("train") or True)
    monkeypatch.setattr(native, "keep_freed_memory", lambda: calls.append("decode") or True)
    mcfg = ModelConfig(
        src_vocab_size=20,
        tgt_vocab_size=20,
        d_model=16,
        ffn_dim=32,
        heads=2,
        encoder_layers=1,
        decoder_layers=1,
    )
    step.Stepper(TrainConfig(device="cpu", run_dir=str(tmp_path)), mcfg)
    assert calls == ["train"]
    cfg = TranslateConfig(SearchConfig(beam=1), device="cpu")
    with pytest.raises(MtkitError, match="missing.pt"):  # after the device's set-up
        native.load([str(tmp_path / "missing.pt")], cfg, announce=False)
    assert calls == ["train", "decode"]
