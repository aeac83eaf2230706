"""Sequence-level distillation (Kim & Rush 2016): :class:`DistillConfig`, how `mtkit distill`
translates a corpus's source side with a teacher, in parts that survive an interruption."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from mtkit.config.common import from_dict
from mtkit.config.search import TranslateConfig
from mtkit.errors import MtkitError

# what makes a finished part of one job a part of another: the settings that change what is
# translated (the search, the engine, the precision), not where or how fast (device, threads)
JOB_SETTINGS = (
    "engine",
    "dtype",
    "quantize",
    "max_input_tokens",
    "tgt_lang",
    "split_sentences",
    "spans",
)


@dataclass
class DistillConfig:
    """`mtkit distill`: the teacher's search (beam 5 by default) and the corpus's parts."""

    translate: TranslateConfig = field(default_factory=TranslateConfig)
    part_lines: int = 10000  # lines per part; each part is written whole, and kept when stopped
    parts_dir: str = ""  # where the parts are kept until the output is whole ("": OUTPUT.parts)
    keep_parts: bool = False  # keep the parts directory once the output is written

    def __post_init__(self) -> None:
        search, translate = self.translate.search, self.translate
        rules = [
            (self.part_lines >= 1, f"--part-lines must be positive, got {self.part_lines}"),
            (
                search.nbest == 1
                and translate.format == "text"
                and not search.alignment
                and not search.scores
                and not search.constraints,
                "mtkit distill writes one translation per source line: no --nbest, --format, "
                "--alignment, --scores or constraints",
            ),
        ]
        for ok, message in rules:
            if not ok:
                raise MtkitError(message)

    def job(self) -> dict[str, Any]:
        """The settings a finished part was translated with (plain data, for job.json)."""
        runtime = {name: getattr(self.translate, name) for name in JOB_SETTINGS}
        search = dataclasses.asdict(self.translate.search)
        return {"part_lines": self.part_lines, "search": search, **runtime}

    @classmethod
    def from_flat(cls, values: dict[str, Any], where: str = "config") -> DistillConfig:
        """From one flat mapping (command-line flags): DistillConfig's own fields, the rest to
        :meth:`TranslateConfig.from_flat`."""
        own = {"part_lines", "parts_dir", "keep_parts"}
        translate = TranslateConfig.from_flat(
            {k: v for k, v in values.items() if k not in own}, where
        )
        return from_dict(
            cls, {**{k: v for k, v in values.items() if k in own}, "translate": translate}, where
        )
