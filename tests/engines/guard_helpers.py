"""A scripted stand-in engine for the decoding guard's tests: each line's translation is a
function of its source text, so a test decides which lines degenerate and how."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

from mtkit.config import SearchConfig, TranslateConfig
from mtkit.data.tokenizer import Tokenizer, train_spm
from mtkit.engines.base import Engine, Phrases, Translation
from mtkit.engines.confidence import Confidence
from mtkit.languages import Languages

WORDS = "a man woman dog cat runs sits on the red blue street house ball plays".split()
GARBAGE = "Ein „GGGGGGGGGGGGCCCCCCCCCCCC…"  # what an ALL CAPS line gave the demo model


@cache
def tokenizer() -> Tokenizer:
    """Pieces for lower, upper and title case text (byte fallback: any character)."""
    rng = random.Random(0)
    text = [" ".join(rng.choices(WORDS, k=rng.randint(2, 9))) for _ in range(300)]
    text += [line.upper() for line in text[:50]] + [line.title() for line in text[50:100]]
    return Tokenizer(train_spm(text, vocab_size=400, byte_fallback=True))


def caps_garbage(source: str) -> str:
    """The demo model on case: garbage for a line with an upper case letter, else a copy."""
    return GARBAGE if any(c.isupper() for c in source) else f"de: {source}"


@dataclass
class Scripted(Engine):
    """Lines decoded back to text and translated by ``script``; ``seen`` records what it was
    given (source, constraint pieces) and ``scores`` gives each hypothesis a confidence."""

    script: Callable[[str], str]
    src_tokenizer: Tokenizer = field(default_factory=tokenizer)
    tgt_tokenizer: Tokenizer = field(default_factory=tokenizer)
    config: TranslateConfig = field(default_factory=TranslateConfig)
    max_positions: int = 1024
    model_languages: Languages | None = None
    seen: list[tuple[str, Phrases]] = field(default_factory=list)

    def decode_batch(
        self, rows: list[list[int]], search: SearchConfig, phrases: list[Phrases] | None = None
    ) -> list[list[Translation]]:
        texts = self.src_tokenizer.decode(rows)
        self.seen.extend(zip(texts, phrases or [[] for _ in rows], strict=True))
        out = []
        for text in texts:
            found = self.script(text)
            hyps = []
            for k in range(search.nbest):
                hyp = found if k == 0 else f"{found} {k}"
                pieces = len(self.tgt_tokenizer.encode([hyp])[0])
                scored = (
                    Confidence(
                        (-0.5,) * (pieces + 1),
                        tuple((-0.5,) for _ in hyp.split()),
                        -0.5 * (pieces + 1),
                    )
                    if search.scores
                    else None
                )
                hyps.append(Translation(hyp, -1.0 - k, -2.0 - k, pieces, None, scored))
            out.append(hyps)
        return out

    def sources(self) -> list[str]:
        return [text for text, _ in self.seen]
