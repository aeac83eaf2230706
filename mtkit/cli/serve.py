"""`mtkit serve -m CKPT`: a LibreTranslate-compatible HTTP server that batches across requests."""

from __future__ import annotations

import sys
from functools import partial
from typing import Any

import click

from mtkit.cli.common import CommaList, config_option, user_errors
from mtkit.cli.translate import SEARCH_OPTIONS, search_options
from mtkit.config import BATCHING, LOG_LEVELS, ServeConfig, ServedPath, TranslateConfig

# search options a server takes per request (alternatives -> nbest) or not at all (sampling)
# (tgt_lang: a multilingual server takes the target per request; workers: one decoding loop)
# (constraints: a request gives them as a glossary)
NOT_SERVED = {
    "nbest",
    "sampling",
    "top_k",
    "top_p",
    "temperature",
    "seed",
    "tgt_lang",
    "workers",
    "constraints_in_input",
    "constraints_ordered",
}
NOT_SERVED |= {"scores", "word_scores"}  # a request asks for them ("scores": true)
option = partial(config_option, config=ServeConfig)


def served_search_options(func: Any) -> Any:
    """`mtkit translate`'s search and runtime options, less those in NOT_SERVED; the fast
    path's (:class:`~mtkit.config.ServedPath`) with the server's own defaults."""
    rows = [row for row in SEARCH_OPTIONS if row[1] not in NOT_SERVED]
    return search_options(func, rows, dict.fromkeys(ServedPath().defaults(), ServedPath))


@click.command()
@click.option(
    "-m",
    "--model",
    "models",
    multiple=True,
    required=True,
    type=click.Path(),
    help="Checkpoint (repeat for an ensemble), or with --engine ctranslate2 an exported directory.",
)
@option("--host", help="Address to listen on (127.0.0.1: this machine only).")
@option("--port", type=click.IntRange(0, 65535), help="Port (0: any free port).")
@option("--source-lang", help="Source language code (default: the checkpoint's).")
@option("--target-lang", help="Target language code (default: the checkpoint's).")
@option(
    "--batching",
    type=click.Choice(BATCHING),
    help="step: a sentence joins the running search at its next step and leaves it the step "
    "it ends (mtkit's engine); request: requests are batched whole (CTranslate2 and --workers "
    "always).",
)
@option(
    "--max-batch-tokens",
    type=click.IntRange(1),
    help="Source pieces per batch, over all the requests in it.",
)
@option(
    "--slice-tokens",
    type=click.IntRange(0),
    help="A long request's source pieces decoded at once while other requests decode or wait "
    "(--batching request: per batch, beside the short ones; 0: no limit).",
)
@option(
    "--decoders",
    type=click.IntRange(0),
    help="--batching step on a CPU: processes decoding at once, the --threads shared among "
    "them (0: one per thread, at most 4; 1: one decoding thread in the server's process).",
)
@option(
    "--max-wait-ms",
    type=click.FloatRange(0),
    help="How long a request may wait for others to batch with (0: never waits).",
)
@option("--queue-size", type=click.IntRange(1), help="Requests waiting; more get 503.")
@option(
    "--timeout",
    type=click.FloatRange(0, min_open=True),
    help="Seconds from a request's arrival to its answer; later: 504.",
)
@option("--max-body-bytes", type=click.IntRange(1), help="Larger request bodies get 413.")
@option("--max-chars", type=click.IntRange(1), help="Characters of text per request.")
@option("--max-lines", type=click.IntRange(1), help="Lines per request (texts split on newlines).")
@option(
    "--max-glossary-terms",
    type=click.IntRange(0),
    help='Entries of a request\'s own glossary ("glossary": [[source, target], ...]).',
)
@option("--max-file-bytes", type=click.IntRange(1), help="Larger uploaded files get 413.")
@option(
    "--file-ttl",
    type=click.FloatRange(0, min_open=True),
    help="Seconds a translated file can be downloaded; then it is removed.",
)
@option(
    "--api-key",
    envvar="MTKIT_API_KEY",
    show_envvar=True,
    help="Require this key on POST /translate and /translate_file.",
)
@option(
    "--rate-limit",
    type=click.IntRange(0),
    help="Requests a minute per API key, or per client address without one; beyond: 429 "
    "with Retry-After (0: no limit).",
)
@option(
    "--cors-origins",
    type=CommaList(),
    help="Origins whose pages may call the server (CORS), comma-separated: * for any, as "
    "LibreTranslate; '' for none.",
)
@option(
    "--log-level",
    type=click.Choice(LOG_LEVELS),
    help="Logging level; one line per request at info.",
)
@served_search_options
def serve(models: tuple[str, ...], **options: Any) -> None:
    """Serve a model over HTTP: POST /translate and /translate_file (LibreTranslate's API),
    GET /languages, /health, /docs, and a page at /. Batches concurrent requests; stops cleanly
    on SIGTERM."""
    from mtkit.pipeline.serve import serve as run_server

    with user_errors():
        names = set(ServeConfig.__dataclass_fields__)
        serve_config = ServeConfig(**{k: v for k, v in options.items() if k in names})
        given = {k: v for k, v in options.items() if k not in names and v is not None}
        given = {**ServedPath().defaults(), **given}
        config = TranslateConfig.from_flat(given, where="mtkit serve")
        sys.exit(run_server(list(models), config, serve_config))
