"""Hugging Face export: same logits, same tokens, same searches as mtkit; clear refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from export_helpers import TEST_LINES, Ckpt, greedy_reference, make_ckpt, pad

from mtkit.cli import cli
from mtkit.config import SearchConfig
from mtkit.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from mtkit.errors import MtkitError

transformers = pytest.importorskip(
    "transformers", reason="needs the 'hf' extra: pip install -e '.[hf]'"
)
from mtkit.export.hf import export_hf  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")


def load(out: Path) -> tuple[torch.nn.Module, object]:
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(out).eval()
    return model, transformers.AutoTokenizer.from_pretrained(out)


@pytest.fixture(scope="module")
def exported(trained: Ckpt, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("hf") / "model"
    export_hf(trained.path, out)
    return load(out)


def sources(ck: Ckpt, lines: list[str]) -> torch.Tensor:
    return pad([ids + [EOS_ID] for ids in ck.src.encode(lines)])


@pytest.mark.parametrize("variant", ["trained", "share_all_embeddings", "tie_output=False"])
def test_logits_agree_at_every_step(
    variant: str, trained: Ckpt, ckpt_dir: Path, spms: dict, tmp_path: Path
) -> None:
    if variant == "trained":
        ck = trained
    elif variant == "share_all_embeddings":
        ck = make_ckpt(ckpt_dir, spms, share_all_embeddings=True)
    else:
        ck = make_ckpt(ckpt_dir, spms, tie_output=False)
    export_hf(ck.path, tmp_path / "hf")
    hf, _ = load(tmp_path / "hf")
    src = sources(ck, TEST_LINES)  # padded batch
    targets = [greedy_reference(ck.model, ids, 12) + [EOS_ID] for ids in ck.src.encode(TEST_LINES)]
    tgt_in = pad([[BOS_ID] + t[:-1] for t in targets])
    with torch.no_grad():
        ours = ck.model.decode(tgt_in, ck.model.encode(src))
        theirs = hf(input_ids=src, attention_mask=src.ne(PAD_ID), decoder_input_ids=tgt_in).logits
    keep = tgt_in.ne(PAD_ID)  # every forced-decoding step of every sentence
    torch.testing.assert_close(theirs[keep], ours[keep], atol=1e-4, rtol=1e-4)


def test_tokenizer_gives_our_ids_plus_eos(exported, trained: Ckpt) -> None:
    _, tok = exported
    assert type(tok).__name__ == "MarianTokenizer"
    odd = ["", "a", "  the  dog ", "☃ snowman 123", "Ünïcode — dashes"]
    for line in TEST_LINES + odd:
        assert tok(line)["input_ids"] == trained.src.encode_one(line) + [EOS_ID], line
    target = "der mann geht auf strasse"
    assert tok(text_target=target)["input_ids"] == trained.tgt.encode_one(target) + [EOS_ID]
    ids = [BOS_ID] + trained.tgt.encode_one(target) + [EOS_ID, PAD_ID]
    assert tok.decode(ids, skip_special_tokens=True) == target
    assert (tok.pad_token_id, tok.unk_token_id, tok.eos_token_id) == (0, 1, 3)


def test_config_and_generation_defaults(exported) -> None:
    hf, _ = exported
    c, g = hf.config, hf.generation_config
    assert (c.model_type, c.activation_function, c.scale_embedding) == ("marian", "relu", True)
    assert (c.decoder_start_token_id, c.pad_token_id, c.eos_token_id) == (BOS_ID, PAD_ID, EOS_ID)
    assert not c.share_encoder_decoder_embeddings and c.tie_word_embeddings
    assert hf.lm_head.weight.data_ptr() == hf.model.decoder.embed_tokens.weight.data_ptr()
    assert not hf.final_logits_bias.any()
    d = SearchConfig()
    assert (g.num_beams, g.length_penalty, g.early_stopping) == (d.beam, d.lenpen, True)
    assert (g.decoder_start_token_id, g.forced_eos_token_id) == (BOS_ID, EOS_ID)


def hf_generate(hf, src: torch.Tensor, bound: int, **kwargs) -> list[list[int]]:
    """HF generate with mtkit's bound: ``bound`` tokens, then forced EOS (max_length counts the
    decoder start token)."""
    with torch.no_grad():
        out = hf.generate(
            input_ids=src,
            attention_mask=src.ne(PAD_ID),
            max_length=bound + 2,
            min_new_tokens=1,
            **kwargs,
        )
    return [[t for t in row.tolist()[1:] if t not in (EOS_ID, PAD_ID)] for row in out]


@pytest.mark.parametrize("bound", [3, 30])  # 3: some outputs hit the bound and get forced EOS
def test_greedy_generate_equals_greedy_search(exported, trained: Ckpt, bound: int) -> None:
    hf, _ = exported
    got = hf_generate(hf, sources(trained, TEST_LINES), bound, num_beams=1, do_sample=False)
    want = [greedy_reference(trained.model, ids, bound) for ids in trained.src.encode(TEST_LINES)]
    assert got == want
    assert any(len(w) == bound for w in want) == (bound == 3)


@pytest.mark.parametrize("beam, lenpen", [(1, 1.0), (4, 1.0), (4, 0.6), (5, 2.0)])
def test_generate_equals_mtkit_search(exported, trained: Ckpt, beam: int, lenpen: float) -> None:
    """Same tokens whenever no hypothesis reaches the length limit (there, HF scores the forced
    EOS as log 1 = 0, mtkit with the model's log p(EOS): see docs_snippets/export.md)."""
    from mtkit.decoding.search import generate

    hf, _ = exported
    src = sources(trained, TEST_LINES)
    got = hf_generate(hf, src, 30, num_beams=beam, length_penalty=lenpen, early_stopping=True)
    cfg = SearchConfig(beam=beam, lenpen=lenpen, max_len_a=0, max_len_b=30, min_len=1)
    want = [h[0].tokens for h in generate([trained.model], src, cfg)]
    assert got == want
    assert max(map(len, want)) < 30  # the limit never bound


def test_pre_norm_is_refused_naming_the_option(ckpt_dir: Path, spms: dict, tmp_path: Path):
    ck = make_ckpt(ckpt_dir, spms, pre_norm=True)
    with pytest.raises(MtkitError, match="pre_norm"):
        export_hf(ck.path, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    args = ["export", "-m", str(ck.path), "-f", "hf", str(tmp_path / "o")]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1 and "pre_norm" in result.output
    assert list(tmp_path.iterdir()) == []  # nothing half-written


def test_cli_export_overwrite_and_missing(trained: Ckpt, tmp_path: Path) -> None:
    out = tmp_path / "hf"
    run = CliRunner().invoke
    assert run(cli, ["export", "-m", str(trained.path), "-f", "hf", str(out)]).exit_code == 0
    assert (out / "config.json").is_file() and (out / "source.spm").is_file()
    again = run(cli, ["export", "-m", str(trained.path), "-f", "hf", str(out)])
    assert again.exit_code == 1 and "already exists" in again.output and "--force" in again.output
    forced = run(cli, ["export", "-m", str(trained.path), "-f", "hf", "--force", str(out)])
    assert forced.exit_code == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["hf"]
    missing = run(cli, ["export", "-m", str(tmp_path / "nope.pt"), "-f", "hf", str(tmp_path / "x")])
    assert missing.exit_code == 1 and "no such checkpoint" in missing.output
