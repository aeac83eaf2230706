"""`mtkit serve`: :class:`ServeConfig`, validated when built."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from mtkit.errors import MtkitError

LOG_LEVELS = ("debug", "info", "warning", "error")
# an origin as a browser sends it: scheme://host[:port], no path (chrome-extension://ID too)
ORIGIN = re.compile(r"[a-z][a-z0-9+.-]*://[^/\s]+")


BATCHING = ("step", "request")  # --batching: step-level (a running search) or whole batches


@dataclass(frozen=True)
class ServedPath:
    """How `mtkit serve` runs its model where `mtkit translate` would take its own defaults:
    the fast path (issue 52). ``--dtype fast``: bf16 where this CPU's bf16 hardware has a
    recorded verdict, int8 linear layers elsewhere (:func:`mtkit.precision.resolve_dtype`);
    ``--compile auto``: the decoder's step compiled where it can be (a CPU, mtkit's engine),
    its graphs built at start-up (the first start of an architecture and precision compiles
    for minutes; later ones load them from the cache). ``--dtype fp32 --compile off`` keep the
    path of `mtkit translate`'s defaults."""

    dtype: str = "fast"
    compile: str = "auto"

    def defaults(self) -> dict[str, str]:
        """The fields, as `mtkit serve`'s options give them."""
        return asdict(self)


@dataclass
class ServeConfig:
    """`mtkit serve`: the HTTP side, the cross-request batcher and the request limits."""

    host: str = "127.0.0.1"
    port: int = 8000
    source_lang: str = ""  # "": read from the checkpoint (error if it holds none)
    target_lang: str = ""
    batching: str = "step"  # step: sentences join and leave a running search; request: batches
    max_batch_tokens: int = 2048  # source pieces (+EOS) per batch, over all requests in it
    max_wait_ms: float = 5.0  # how long the oldest waiting request may wait for others
    # a long request's source pieces decoding beside others, per decoding process (0: no cap)
    slice_tokens: int = 256
    decoders: int = 0  # step-level batching's decoding processes (0: one per core, at most 4)
    queue_size: int = 256  # requests waiting for the model; beyond: 503 with Retry-After
    timeout: float = 30.0  # seconds from arrival to answer; beyond: 504
    max_body_bytes: int = 1_000_000  # beyond: 413
    max_chars: int = 20_000  # characters of text per request; beyond: 400
    max_lines: int = 200  # lines per request (texts split on newlines); beyond: 400
    max_glossary_terms: int = 100  # a request's own glossary entries; beyond: 400
    max_file_bytes: int = 5_000_000  # an uploaded file (POST /translate_file); beyond: 413
    file_ttl: float = 600.0  # seconds a translated file can be downloaded, then removed
    api_key: str = ""  # "": no key; else required on POST /translate and /translate_file
    rate_limit: int = 0  # requests a minute per API key (or per client without one); 0: off
    cors_origins: list[str] = field(default_factory=lambda: ["*"])  # []: no CORS headers
    log_level: str = "info"  # per-request lines are logged at info

    def __post_init__(self) -> None:
        self.cors_origins = [origin.strip() for origin in self.cors_origins if origin.strip()]
        wrong = [o for o in self.cors_origins if o != "*" and not ORIGIN.fullmatch(o)]
        rules = [
            (0 <= self.port <= 65535, f"--port must be in 0..65535, got {self.port}"),
            (
                self.batching in BATCHING,
                f"--batching must be one of {', '.join(BATCHING)}, got {self.batching!r}",
            ),
            (self.max_batch_tokens >= 1, "--max-batch-tokens must be positive"),
            (self.max_wait_ms >= 0, "--max-wait-ms must be >= 0"),
            (self.slice_tokens >= 0, "--slice-tokens must be >= 0"),
            (self.decoders >= 0, "--decoders must be >= 0"),
            (self.queue_size >= 1, "--queue-size must be positive"),
            (self.timeout > 0, "--timeout must be positive"),
            (self.max_body_bytes >= 1, "--max-body-bytes must be positive"),
            (self.max_chars >= 1, "--max-chars must be positive"),
            (self.max_lines >= 1, "--max-lines must be positive"),
            (self.max_glossary_terms >= 0, "--max-glossary-terms must be >= 0"),
            (self.rate_limit >= 0, "--rate-limit must be >= 0"),
            (
                not wrong,
                f"--cors-origins: {', '.join(wrong)} is not an origin such as "
                "https://example.org or chrome-extension://ID (no path, no slash at "
                "the end), nor *",
            ),
            (self.max_file_bytes >= 1, "--max-file-bytes must be positive"),
            (self.file_ttl > 0, "--file-ttl must be positive"),
            (
                self.log_level in LOG_LEVELS,
                f"--log-level must be one of {', '.join(LOG_LEVELS)}, got {self.log_level!r}",
            ),
            (
                bool(self.source_lang) == bool(self.target_lang),
                "give both --source-lang and --target-lang, or neither",
            ),
        ]
        for ok, message in rules:
            if not ok:
                raise MtkitError(message)
