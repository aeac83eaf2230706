"""What every decoding engine offers, and the text handling they share.

An engine translates lines; for each line it returns up to ``nbest`` :class:`Translation`
objects, best first, or none for a line with nothing to translate (empty, whitespace only, or
no sentencepiece pieces). Search options may change per call (the server batches requests with
equal options); an engine refuses options it cannot honour with a one-line error. Every engine
shares one skeleton (:class:`Engine`): encode, batch by length, decode, put back in order.
"""

from __future__ import annotations

import math
import sys
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from mtkit.config import SearchConfig, TranslateConfig
from mtkit.cpu import Resolved
from mtkit.data.batching import token_batches
from mtkit.data.lines import Numbers, line_numbers
from mtkit.data.sentence_style import SentenceStyle
from mtkit.data.source_words import SourceWords
from mtkit.data.tags import tag_lines
from mtkit.data.tokenizer import Tokenizer
from mtkit.engines.results import Progress, Translation, warn
from mtkit.errors import MtkitError
from mtkit.languages import Languages


@dataclass(frozen=True)
class ModelInfo:
    """What an engine knows of its model beyond the weights: enough to encode its input."""

    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    max_positions: int
    languages: Languages | None
    trained_pieces: int | None = None  # the longest training source (Engine.trained_pieces)
    sentence_style: SentenceStyle = SentenceStyle()  # Engine.sentence_style
    source_words: SourceWords = SourceWords()  # Engine.source_words


# a line's constraints: target phrases, each the piece ids its translation must contain
Phrases = list[list[int]]


class Engine(ABC):
    """A loaded model that translates lines of text: the skeleton every engine shares.

    :meth:`translate` encodes the lines with :attr:`src_tokenizer` (cut to
    :attr:`max_source_pieces`), batches them by length, hands the batches to
    :meth:`decode_batches` and puts each line's hypotheses back at its place. An engine
    implements :meth:`decode_batch` (one batch of piece ids to hypotheses) and may override
    :meth:`decode_batches` to run several batches at once.
    """

    config: TranslateConfig  # runtime settings and the default search
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    max_positions: int  # the model's position limit: a source of max_positions - 1 pieces + EOS
    model_languages: Languages | None  # what the model names, None when it does not
    # the longest source the model was trained on (pieces; the checkpoint's source_pieces),
    # None where not recorded
    trained_pieces: int | None = None
    # how the training sources' sentences start and end, and their words (empty where not
    # recorded)
    sentence_style: SentenceStyle = SentenceStyle()
    source_words: SourceWords = SourceWords()

    @property
    def max_source_pieces(self) -> int:
        """Longest source a line is truncated to (pieces, EOS not counted)."""
        return min(self.config.max_input_tokens, self.max_positions - 1)

    @property
    def unit_pieces(self) -> int:
        """Longest unit the text layer hands over: :attr:`max_source_pieces`, and no longer
        than the model was trained on where that is recorded (longer sentences are cut into
        parts at this length, each translated)."""
        cap = self.max_source_pieces
        return cap if self.trained_pieces is None else min(cap, self.trained_pieces)

    def languages(self) -> Languages | None:
        """The language codes the model names (None: it names none)."""
        return self.model_languages

    def check(self, search: SearchConfig) -> None:
        """Refuse (MtkitError, one line) search options this engine cannot honour; every
        valid SearchConfig runs unless an engine says otherwise."""
        return None

    @abstractmethod
    def decode_batch(
        self, rows: list[list[int]], search: SearchConfig, phrases: list[Phrases] | None = None
    ) -> list[list[Translation]]:
        """One batch: source piece ids per row (non-empty, no EOS) -> each row's hypotheses;
        with ``search.constraints``, ``phrases`` are each row's constraints."""

    def decode_batches(
        self,
        batches: list[list[list[int]]],
        search: SearchConfig,
        progress: Progress | None,
        phrases: list[list[Phrases]] | None = None,
    ) -> list[list[list[Translation]]]:
        """Several batches, in order (one after the other here); ``progress`` hears of each."""
        found = []
        for b, rows in enumerate(batches):
            found.append(
                self.decode_batch(rows, search, None if phrases is None else phrases[b])
                if rows
                else []
            )
            if progress is not None:
                progress.update(len(rows))
        return found

    def encode(
        self, lines: Sequence[str], first_number: Numbers = 1, quiet: bool = False
    ) -> list[list[int]]:
        """Piece ids per line, as :func:`encode_sources` gives them for this engine."""
        return encode_sources(
            self.src_tokenizer,
            lines,
            self.max_source_pieces,
            first_number,
            self.config.tgt_lang,
            quiet,
        )

    def translate(
        self,
        lines: Sequence[str],
        search: SearchConfig | None = None,
        first_number: Numbers = 1,
        progress: Progress | None = None,
        constraints: Sequence[Sequence[str]] | None = None,
    ) -> list[list[Translation]]:
        """Per line, up to ``search.nbest`` translations, best first; [] for a line with
        nothing to translate. ``first_number`` numbers the lines in warnings (or gives each
        line's number); ``progress`` is told how many lines each batch finished. With
        ``search.constraints``, ``constraints`` are each line's target phrases (none: every
        line unconstrained), which its translations contain. With ``search.guard`` an ALL
        CAPS or Title Case line is translated lowercased, its case put back, and a line whose
        translation degenerates is translated another way (:mod:`mtkit.engines.guard`)."""
        search = search or self.config.search
        if not search.guard:
            return self.search_lines(lines, search, first_number, progress, constraints)[1]
        from mtkit.engines.guard import guarded  # it calls back here: imported when used

        return guarded(self, lines, search, first_number, progress, constraints)

    def search_lines(
        self,
        lines: Sequence[str],
        search: SearchConfig,
        first_number: Numbers = 1,
        progress: Progress | None = None,
        constraints: Sequence[Sequence[str]] | None = None,
        quiet: bool = False,
    ) -> tuple[list[list[int]], list[list[Translation]]]:
        """:meth:`translate` without the guard: each line's source piece ids, and its
        translations; ``quiet``: no warning for lines cut to the engine's limit."""
        self.check(search)
        sources = self.encode(lines, first_number, quiet)
        phrases = (
            self.encode_constraints(sources, constraints, search, first_number)
            if search.constraints
            else None
        )
        if constraints is not None and phrases is None:
            raise MtkitError("constraints were given to a search without a constraint kind")
        batches = list(source_batches(sources, self.config.max_tokens))
        found = self.decode_batches(
            [[sources[i] for i in index] for index in batches],
            search,
            progress,
            None if phrases is None else [[phrases[i] for i in index] for index in batches],
        )
        kept = [i for index in batches for i in index]
        if progress is not None:
            progress.update(len(lines) - len(kept))  # lines with nothing to translate
        results = placed(len(lines), kept, [hyps for batch in found for hyps in batch])
        if phrases is not None:
            results = self._unmet(lines, results, search, first_number)
        return sources, results

    def encode_constraints(
        self,
        sources: list[list[int]],
        constraints: Sequence[Sequence[str]] | None,
        search: SearchConfig,
        first_number: Numbers = 1,
    ) -> list[Phrases]:
        """Each line's phrases as target piece ids (empty ones dropped); a line whose phrases
        need more pieces than its length limit allows is refused, naming it."""
        texts = [[] for _ in sources] if constraints is None else constraints
        if len(texts) != len(sources):
            raise MtkitError(f"{len(texts)} constraint lists for {len(sources)} lines")
        ids = iter(self.tgt_tokenizer.encode([p for line in texts for p in line]))
        tags = set(self.src_tokenizer.tag_ids)
        found: list[Phrases] = []
        numbers = line_numbers(first_number, len(sources))
        for number, row, line in zip(numbers, sources, texts, strict=True):
            phrases = [p for p in (next(ids) for _ in line) if p]
            need = sum(len(p) for p in phrases)
            pieces = len(row) - (1 if row and row[0] in tags else 0)
            limit = search.max_target_length(pieces, self.max_positions - 1)
            if row and need > limit:
                raise MtkitError(
                    f"line {number}: its constraints need {need} target pieces, more than the "
                    f"length limit of {limit} for its {pieces} source pieces (--max-len-a "
                    f"{search.max_len_a:g}, --max-len-b {search.max_len_b})"
                )
            found.append(phrases)
        return found

    def _unmet(
        self,
        lines: Sequence[str],
        results: list[list[Translation]],
        search: SearchConfig,
        first_number: Numbers,
    ) -> list[list[Translation]]:
        """Lines for which no hypothesis met the constraints (the search ran out of length,
        or other rules banned a phrase): translated without them, with a warning each."""
        failed = [i for i, hyps in enumerate(results) if hyps and hyps[0].score == -math.inf]
        if not failed:
            return results
        numbers = line_numbers(first_number, len(lines))
        for i in failed:
            warn(
                f"line {numbers[i]}: no translation within the length limit meets its "
                "constraints; translated without them"
            )
        _, again = self.search_lines(
            [lines[i] for i in failed], search.replace(constraints=""), [numbers[i] for i in failed]
        )
        for i, hyps in zip(failed, again, strict=True):
            results[i] = hyps
        return results

    def translate_groups(
        self, groups: Sequence[Sequence[str]], search: SearchConfig | None = None
    ) -> list[list[list[Translation]]]:
        """Each group of lines decoded as one batch, as given (for callers that batch
        themselves: the engine benchmark gives every engine the same batches)."""
        search = search or self.config.search
        self.check(search)
        encoded = [self.encode(group) for group in groups]
        kept = [[i for i, row in enumerate(rows) if row] for rows in encoded]
        batches = [[rows[i] for i in index] for rows, index in zip(encoded, kept, strict=True)]
        found = self.decode_batches(batches, search, None)
        return [
            placed(len(group), index, hyps)
            for group, index, hyps in zip(groups, kept, found, strict=True)
        ]


def announce_dtype(asked: str, resolved: Resolved) -> None:
    """The one line saying what ``--dtype auto`` or ``fast`` chose and why; the bf16
    emulation warning."""
    if resolved.warning:
        warn(resolved.warning)
    if asked in ("auto", "fast"):
        name = "int8" if resolved.quantize else resolved.name
        print(f"mtkit: dtype {name} ({resolved.reason})", file=sys.stderr, flush=True)


def encode_sources(
    tokenizer: Tokenizer,
    lines: Sequence[str],
    cap: int,
    first_number: Numbers = 1,
    tgt_lang: str = "",
    quiet: bool = False,
) -> list[list[int]]:
    """Piece ids per line (no EOS), cut to ``cap`` pieces with a warning naming the line
    (unless ``quiet``); [] for lines with nothing to translate. Unpaired surrogates become
    U+FFFD first. A multilingual model's lines get their target-language tag
    (:func:`tag_lines`)."""
    lines = tag_lines(lines, tgt_lang, tokenizer.tags, first_number)
    texts = [line.encode("utf-8", "replace").decode("utf-8") for line in lines]
    ids = tokenizer.encode([text if text.strip() else "" for text in texts])
    for number, row in zip(line_numbers(first_number, len(ids)), ids, strict=True):
        if len(row) > cap and not quiet:
            warn(
                f"line {number}: {len(row)} pieces, truncated to the first {cap} "
                "(--max-input-tokens)"
            )
    return [row[:cap] for row in ids]


def source_batches(sources: list[list[int]], max_tokens: int) -> Iterator[list[int]]:
    """Indices of the non-empty ``sources`` in batches of at most ``max_tokens`` tokens (EOS
    and padding counted), longest first."""
    todo = [i for i, row in enumerate(sources) if row]
    for batch in token_batches([len(sources[i]) + 1 for i in todo], max_tokens):
        yield [todo[j] for j in batch]


def placed(count: int, index: list[int], hyps: list[list[Translation]]) -> list[list[Translation]]:
    """``count`` lines' results: ``hyps[j]`` at line ``index[j]``, [] where nothing was decoded."""
    results: list[list[Translation]] = [[] for _ in range(count)]
    for i, line_hyps in zip(index, hyps, strict=True):
        results[i] = line_hyps
    return results


def one_line(text: str) -> str:
    """A translation on one line: CR and LF that a model might produce become spaces."""
    return text.replace("\r", " ").replace("\n", " ")


def best_texts(results: list[list[Translation]]) -> list[str]:
    """The best translation of each line, "" for lines with nothing to translate."""
    return [hyps[0].text if hyps else "" for hyps in results]
