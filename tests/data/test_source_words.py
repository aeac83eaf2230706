"""The training sources' words: counted over runs of letters, most frequent first, a tag not a
word; recorded as a list and read back, a bad one refused in one line."""

from __future__ import annotations

import pytest

from mtkit.data.source_words import MAX_LETTERS, SourceWords, words_of
from mtkit.errors import MtkitError


def test_words_are_letter_runs_lowercased_most_frequent_first() -> None:
    found = words_of([">>de<< A dog's T-shirt, 2 dogs.", "a DOG", "Ölbild über-all"])
    assert found.words == ("a", "dog", "s", "t", "shirt", "dogs", "ölbild", "über", "all")
    assert found.rank["dog"] == 1 and found.rank["all"] == 8
    assert set(found.letters) == set("dogastshirtölbildüberall")
    assert len(words_of(["".join(chr(0x4E00 + i) for i in range(200))]).letters) == MAX_LETTERS


def test_the_record_round_trips_and_a_bad_one_is_refused_in_one_line() -> None:
    words = SourceWords(("the", "dog"))
    assert SourceWords.from_list(words.to_list()) == words and not SourceWords()
    for bad in [{}, "the", ["the", ""], ["the", 3]]:
        with pytest.raises(MtkitError, match=r"^x.pt: source_words: must be a list of words$"):
            SourceWords.from_list(bad, "x.pt: source_words")
