"""A multilingual model (issue 16) exported to Hugging Face and CTranslate2: the tokenizer knows
the target-language tags and encodes them as mtkit does; each direction translates the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtkit.config import TranslateConfig
from mtkit.data.tags import tag_lines
from mtkit.data.tokenizer import EOS_ID, PAD_ID, Tokenizer
from mtkit.pipeline.translate import translate_lines

transformers = pytest.importorskip("transformers", reason="needs the 'hf' extra")
pytest.importorskip("ctranslate2", reason="needs the 'ct2' extra")
from mtkit.export.ct2 import export_ct2  # noqa: E402
from mtkit.export.hf import export_hf  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")
LANGS = ("de", "fr", "cs")
SEARCH = {"beam": 4, "max_len_a": 0.0, "max_len_b": 30, "device": "cpu"}


@pytest.fixture(scope="module")
def ckpt(multi_run: Path) -> str:
    return str(multi_run / "checkpoint_best.pt")


@pytest.fixture(scope="module")
def lines(multi_dataset: Path) -> list[str]:
    """The English sources of the validation split (untagged), and a few odd lines."""
    src = (multi_dataset / "valid.src.txt").read_text().splitlines()
    return [line.split(" ", 1)[1] for line in src[:8]]


@pytest.fixture(scope="module")
def hf_dir(ckpt: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("hf-multi") / "model"
    export_hf(ckpt, out)
    return out


def test_the_tokenizer_knows_the_tags_and_encodes_them_as_mtkit(
    hf_dir: Path, lines: list[str]
) -> None:
    tok = transformers.AutoTokenizer.from_pretrained(hf_dir)
    assert type(tok).__name__ == "MarianTokenizer"
    assert tok.supported_language_codes == [">>de<<", ">>fr<<", ">>cs<<"]
    src = Tokenizer.from_file(hf_dir / "source.spm")
    odd = ["", "a", "  the  dog ", "☃ snowman", ">>fr<<the cat", "the >>de<< cat"]
    for lang in LANGS:
        for line in lines + odd:
            # what `mtkit translate --tgt-lang` encodes, and what MarianTokenizer gives
            (tagged,) = tag_lines([line], lang, src.tags)
            assert tok(tagged)["input_ids"] == src.encode_one(tagged) + [EOS_ID], (lang, line)
            if line.strip() and not line.startswith(">>fr<<"):
                assert tagged == f">>{lang}<< {line}"
            for code in src.tags:  # lines that already carry a tag keep theirs
                carried = f"{code} {line}"
                (kept,) = tag_lines([carried], lang, src.tags)
                assert tok(carried)["input_ids"] == src.encode_one(kept) + [EOS_ID]
                assert tok(carried)["input_ids"][0] == src.piece_to_id(code)


def test_hf_generate_equals_mtkit_in_every_direction(
    hf_dir: Path, ckpt: str, lines: list[str]
) -> None:
    import torch

    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(hf_dir).eval()
    tok = transformers.AutoTokenizer.from_pretrained(hf_dir)
    outputs = {}
    for lang in LANGS:
        want = translate_lines(
            [ckpt], lines, TranslateConfig.from_flat({**SEARCH, "tgt_lang": lang})
        )
        batch = tok([f">>{lang}<< {line}" for line in lines], return_tensors="pt", padding=True)
        with torch.no_grad():
            out = hf.generate(**batch, num_beams=4, max_length=32, min_new_tokens=1)
        ids = [[t for t in row.tolist()[1:] if t not in (EOS_ID, PAD_ID)] for row in out]
        assert tok.batch_decode(ids, skip_special_tokens=True) == want, lang
        outputs[lang] = want
    assert len({tuple(v) for v in outputs.values()}) == 3  # three languages, visibly


def test_ctranslate2_equals_mtkit_in_every_direction(
    ckpt: str, lines: list[str], tmp_path: Path
) -> None:
    out = export_ct2(ckpt, tmp_path / "ct2")
    for lang in LANGS:
        flat = {**SEARCH, "tgt_lang": lang}
        want = translate_lines([ckpt], lines, TranslateConfig.from_flat(flat))
        got = translate_lines(
            [str(out)], lines, TranslateConfig.from_flat({**flat, "engine": "ctranslate2"})
        )
        assert got == want, lang
    # the engine refuses a language the model does not know, naming those it knows
    from mtkit.errors import MtkitError

    with pytest.raises(
        MtkitError, match=r"^--tgt-lang es: unknown target language \(known: cs, de, fr\)$"
    ):
        translate_lines(
            [str(out)],
            lines,
            TranslateConfig.from_flat({"engine": "ctranslate2", "tgt_lang": "es"}),
        )
