"""Language codes as datasets, checkpoints and exports write them."""

from __future__ import annotations

import pytest

from mtkit.languages import Languages


@pytest.mark.parametrize(
    ("mapping", "expected"),
    [
        ({"src_lang": "en", "tgt_lang": "de"}, Languages(("en",), ("de",))),
        ({"src_lang": "en", "tgt_lang": "de, fr"}, Languages(("en",), ("de", "fr"))),
        ({"src_lang": "en,cs", "tgt_lang": "de"}, Languages(("en", "cs"), ("de",))),
        ({"src_lang": "en", "tgt_lang": ""}, None),
        ({"src_lang": "en"}, None),
        ({"src_lang": 1, "tgt_lang": "de"}, None),
        ({"src_lang": ",", "tgt_lang": "de"}, None),
        (["en", "de"], None),
        (None, None),
    ],
)
def test_from_dict(mapping: object, expected: Languages | None) -> None:
    assert Languages.from_dict(mapping) == expected


def test_round_trip_and_pair() -> None:
    langs = Languages(("en",), ("de", "fr"))
    assert langs.to_dict() == {"src_lang": "en", "tgt_lang": "de,fr"}
    assert Languages.from_dict(langs.to_dict()) == langs
    assert langs.pair == ("en", "de,fr")
