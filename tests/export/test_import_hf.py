"""`mtkit import --format hf`: an OPUS-MT-like MarianMTModel (built offline, marian_helpers)
translates in mtkit exactly as in transformers; what cannot be imported is refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from export_helpers import TEST_LINES, Ckpt
from marian_helpers import hf_generate

from mtkit.checkpoint import load_checkpoint, load_for_inference
from mtkit.cli import cli
from mtkit.config import SearchConfig

transformers = pytest.importorskip(
    "transformers", reason="needs the 'hf' extra: pip install -e '.[hf]'"
)
from hf_import_helpers import BOUND, load_hf, ours  # noqa: E402

from mtkit.export.hf import export_hf  # noqa: E402
from mtkit.export.hf_import import import_hf  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")
VARIANTS = ["marian_joint", "marian_separate"]


@pytest.fixture(scope="module", params=VARIANTS)
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """(HF model, HF tokenizer, imported checkpoint path) per variant."""
    model_dir = request.getfixturevalue(request.param)
    out = tmp_path_factory.mktemp("imported") / "model.pt"
    import_hf(model_dir, out)
    return (*load_hf(model_dir), out)


def test_checkpoint_carries_the_vocabulary_and_special_ids(pair) -> None:
    hf, tok, path = pair
    ckpt = load_checkpoint(path)
    pad = hf.config.pad_token_id
    assert ckpt["special_ids"] == {"pad": pad, "unk": 1, "bos": pad, "eos": 0}
    assert pad == len(ckpt["vocab"]["tgt"]) - 1  # OPUS-MT: pad last, decoding starts from it
    assert ckpt["vocab"]["src"] == sorted(tok.encoder, key=tok.encoder.get)  # vocab.json's ids
    cfg = ckpt["model_config"]
    assert (cfg["ffn_activation"], cfg["output_bias"], cfg["scale_embedding"]) == (
        "silu",
        True,
        True,
    )
    torch.testing.assert_close(
        ckpt["model"]["output_bias"], hf.final_logits_bias[0], rtol=0, atol=0
    )


def test_tokenizer_gives_marian_tokenizers_ids(pair) -> None:
    _, tok, path = pair
    loaded = load_for_inference(path)
    odd = ["", "a", "  the  dog ", "☃ snowman 123", "Ünïcode — dashes", ">>de<< the dog"]
    for line in TEST_LINES + odd:
        assert loaded.src_tokenizer.encode_one(line) + [0] == tok(line)["input_ids"], line
    target = "der mann geht auf strasse"
    ids = tok(text_target=target)["input_ids"]
    assert loaded.tgt_tokenizer.encode_one(target) + [0] == ids
    assert loaded.tgt_tokenizer.decode([ids]) == [tok.decode(ids, skip_special_tokens=True)]


@pytest.mark.parametrize("beam, lenpen", [(1, 1.0), (4, 1.0), (4, 0.6), (4, 2.0)])
def test_translate_equals_generate(pair, beam: int, lenpen: float) -> None:
    hf, tok, path = pair
    want = hf_generate(
        hf, tok, TEST_LINES, BOUND, num_beams=beam, length_penalty=lenpen, early_stopping=True
    )
    assert ours(path, TEST_LINES, beam, lenpen) == want
    assert max(map(len, want)) < BOUND  # the limit never bound


def test_cli_translate_and_evaluate(pair, tmp_path: Path) -> None:
    hf, tok, path = pair
    src = tmp_path / "test.en"
    src.write_text("\n".join(TEST_LINES) + "\n", encoding="utf-8")
    out = tmp_path / "hyp.de"
    args = [
        "translate",
        "-m",
        str(path),
        "-i",
        str(src),
        "-o",
        str(out),
        "--beam",
        "4",
        "--max-len-a",
        "0",
        "--max-len-b",
        str(BOUND),
        "-q",
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    hyps = hf_generate(hf, tok, TEST_LINES, BOUND, num_beams=4, early_stopping=True)
    want = tok.batch_decode([[0, *ids] for ids in hyps], skip_special_tokens=True)
    assert out.read_text(encoding="utf-8").splitlines() == want
    ref = tmp_path / "ref.de"
    ref.write_text("\n".join(want) + "\n", encoding="utf-8")
    args = [
        "evaluate",
        "-m",
        str(path),
        "--src",
        str(src),
        "-r",
        str(ref),
        "--beam",
        "4",
        "--metrics",
        "bleu",
        "--json",
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output[result.output.index("[") :])[0]["score"] > 0


def test_logits_agree_at_every_step_of_a_forced_decode(pair) -> None:
    """Step by step with mtkit's decoding state, against transformers' full forward pass."""
    hf, tok, path = pair
    model = load_for_inference(path).model
    start = hf.config.decoder_start_token_id
    targets = [ids + [0] for ids in hf_generate(hf, tok, TEST_LINES, BOUND, num_beams=1)]
    batch = tok(TEST_LINES, padding=True, return_tensors="pt")
    length = max(map(len, targets))
    tgt_in = torch.full((len(targets), length), start)
    for i, t in enumerate(targets):
        tgt_in[i, 1 : len(t)] = torch.tensor(t[:-1])
    with torch.no_grad():
        theirs = hf(**batch, decoder_input_ids=tgt_in).logits  # (B, T, V)
        state = model.start_state(model.encode(batch["input_ids"]), length)
        steps = [model.decode_step(tgt_in[:, t], state) for t in range(length)]
    mine = torch.stack(steps, dim=1)
    keep = torch.arange(length)[None, :] < torch.tensor([len(t) for t in targets])[:, None]
    torch.testing.assert_close(mine[keep], theirs[keep], atol=1e-4, rtol=1e-4)


def test_mtkit_export_then_import_is_the_same_model(trained: Ckpt, tmp_path: Path) -> None:
    export_hf(trained.path, tmp_path / "hf")
    result = CliRunner().invoke(cli, ["import", str(tmp_path / "hf"), "-o", str(tmp_path / "m.pt")])
    assert result.exit_code == 0, result.output
    back, before = load_checkpoint(tmp_path / "m.pt"), load_checkpoint(trained.path)
    assert back["model"].keys() == before["model"].keys()
    for name, tensor in before["model"].items():
        assert torch.equal(back["model"][name], tensor), name  # bit-identical
    assert back["model_config"] == before["model_config"] and back["spm"] == before["spm"]
    assert "vocab" not in back and "special_ids" not in back  # mtkit's own ids: today's format
    for beam in (1, 4):
        assert ours(tmp_path / "m.pt", TEST_LINES, beam, 1.0) == ours(
            trained.path, TEST_LINES, beam, 1.0
        )


# -- refusals: one line, nothing written ----------------------------------------------------------


def test_import_writes_the_languages_of_the_tokenizer_or_the_command_line(
    marian_joint: Path, tmp_path: Path
) -> None:
    """tokenizer_config.json's source_lang/target_lang (null in save_pretrained's default),
    given or overridden a side at a time by --source-lang/--target-lang."""
    from mtkit.checkpoint import Checkpoint
    from mtkit.languages import Languages

    def run(model_dir: Path, *options: str) -> tuple[Languages | None, str]:
        out = tmp_path / "model.pt"
        args = ["import", str(model_dir), "-o", str(out), "--force", *options]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        return Checkpoint.load(out).languages, result.output

    languages, output = run(marian_joint)
    assert languages is None and "MarianMTModel languages not named," in output
    named = Path(shutil.copytree(marian_joint, tmp_path / "named"))
    config = json.loads((named / "tokenizer_config.json").read_text(encoding="utf-8"))
    config.update(source_lang="en", target_lang="de")
    (named / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    languages, output = run(named)
    assert languages == Languages(("en",), ("de",)) and "MarianMTModel en-de," in output
    assert run(named, "--target-lang", "fr")[0] == Languages(("en",), ("fr",))
    given = run(marian_joint, "--source-lang", "en", "--target-lang", "de,fr")[0]
    assert given == Languages(("en",), ("de", "fr"))
    assert run(marian_joint, "--source-lang", "en")[0] is None  # a side named nowhere: none


def refused(model_dir: Path, tmp_path: Path) -> str:
    out = tmp_path / "out" / "model.pt"
    result = CliRunner().invoke(cli, ["import", "--format", "hf", str(model_dir), "-o", str(out)])
    assert result.exit_code == 1, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert not out.exists() and not (tmp_path / "out").exists()
    return result.output


def broken_copy(marian_joint: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(marian_joint, tmp_path / "broken"))


@pytest.mark.parametrize(
    "missing", ["config.json", "source.spm", "target.spm", "vocab.json", "model.safetensors"]
)
def test_a_missing_file_is_named(marian_joint: Path, tmp_path: Path, missing: str) -> None:
    model_dir = broken_copy(marian_joint, tmp_path)
    (model_dir / missing).unlink()
    assert (missing if missing != "model.safetensors" else "no weights") in refused(
        model_dir, tmp_path
    )


@pytest.mark.parametrize(
    "key, value",
    [
        ("activation_function", "gelu_new"),
        ("add_bias_logits", True),
        ("normalize_before", True),
        ("decoder_attention_heads", 2),
        ("normalize_embedding", True),
    ],
)
def test_an_unsupported_option_is_named(marian_joint: Path, tmp_path: Path, key, value) -> None:
    model_dir = broken_copy(marian_joint, tmp_path)
    config = json.loads((model_dir / "config.json").read_text())
    (model_dir / "config.json").write_text(json.dumps({**config, key: value}))
    assert f"{key}={json.dumps(value)}" in refused(model_dir, tmp_path)


def test_an_unknown_weight_is_named(marian_joint: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    model_dir = broken_copy(marian_joint, tmp_path)
    state = load_file(model_dir / "model.safetensors")
    state["model.encoder.layernorm_embedding.weight"] = torch.ones(32)
    save_file(state, model_dir / "model.safetensors")
    assert "layernorm_embedding" in refused(model_dir, tmp_path)


class Payload:
    """Unpickling this calls ``Path.touch`` on a marker: code a crafted file would run."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_pickle_payload_never_runs(marian_joint: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    model_dir = broken_copy(marian_joint, tmp_path)
    state = load_file(model_dir / "model.safetensors")
    (model_dir / "model.safetensors").unlink()
    marker = tmp_path / "payload-ran"
    torch.save({**state, "evil": Payload(marker)}, model_dir / "pytorch_model.bin")
    output = refused(model_dir, tmp_path)
    assert "pytorch_model.bin" in output and "refused" in output
    assert not marker.exists()


def test_pytorch_model_bin_of_tensors_imports(marian_joint: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    model_dir = broken_copy(marian_joint, tmp_path)
    state = load_file(model_dir / "model.safetensors")
    (model_dir / "model.safetensors").unlink()
    torch.save(state, model_dir / "pytorch_model.bin")
    import_hf(model_dir, tmp_path / "a.pt")
    import_hf(marian_joint, tmp_path / "b.pt")
    a, b = load_checkpoint(tmp_path / "a.pt"), load_checkpoint(tmp_path / "b.pt")
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in b["model"])


def test_imported_model_exports_back_to_hf(pair, tmp_path: Path) -> None:
    """The export writes the imported vocabulary and special ids: transformers generates what
    mtkit generates, with the original's vocab.json, ids, activation and logits bias."""
    hf, tok, path = pair
    export_hf(path, tmp_path / "hf")
    back, back_tok = load_hf(tmp_path / "hf")
    assert back_tok.encoder == tok.encoder and back_tok.decoder == tok.decoder  # vocab.json(s)
    for key in (
        "pad_token_id",
        "eos_token_id",
        "decoder_start_token_id",
        "activation_function",
        "scale_embedding",
        "share_encoder_decoder_embeddings",
    ):
        assert getattr(back.config, key) == getattr(hf.config, key), key
    torch.testing.assert_close(back.final_logits_bias, hf.final_logits_bias, rtol=0, atol=0)
    for beam in (1, 4):
        got = hf_generate(back, back_tok, TEST_LINES, BOUND, num_beams=beam, early_stopping=True)
        assert got == ours(path, TEST_LINES, beam, 1.0)


@pytest.mark.parametrize("beam", [1, 4])
def test_imported_model_exports_to_ctranslate2_and_decodes_as_mtkit(
    pair, tmp_path: Path, beam: int
) -> None:
    """CTranslate2 gets the imported vocabulary and special ids (decoding starts from PAD,
    swish, the logits bias), and the engine encodes and decodes with them: same tokens."""
    pytest.importorskip("ctranslate2")
    from mtkit.config import TranslateConfig
    from mtkit.engines import load_engine
    from mtkit.export.ct2 import export_ct2

    _, _, path = pair
    out = export_ct2(path, tmp_path / "ct2")  # checked on a probe batch before it is written
    search = SearchConfig(beam=beam, max_len_a=0, max_len_b=BOUND, min_len=1)
    engine = load_engine([str(out)], TranslateConfig(search, engine="ctranslate2", device="cpu"))
    got = [hyps[0].text for hyps in engine.translate(TEST_LINES)]
    tgt = load_for_inference(path).tgt_tokenizer
    assert got == tgt.decode(ours(path, TEST_LINES, beam, 1.0))
