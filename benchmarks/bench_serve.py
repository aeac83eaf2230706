"""`mtkit serve` under load: what batching across requests buys.

Starts `mtkit serve` on 127.0.0.1 and sends single sentences of Multi30k test_2016_flickr (en)
from 1, 8, 32 and 128 concurrent keep-alive connections (a small asyncio HTTP/1.1 client in this
process; every level bounded by ``--sentences`` and ``--time-limit``). Per level: sentences/s,
p50/p95/p99 latency, and the ratio of the throughput to offline batched ``engine.translate`` of
the same sentences in this run (the engine `mtkit translate` uses, same threads and search).

Two server configurations: the default (step-level batching, ``--max-batch-tokens`` 2048),
and one request at a time (``--batching request --max-wait-ms 0 --max-batch-tokens 1``: every
sentence is over the budget, so each runs alone), the way a server behind a lock works. ``--server
NAME=OPTIONS`` (repeatable) replaces them, to compare batcher settings in one run, e.g.
``--server "wait 5=" --server "wait 20=--max-wait-ms 20"``.

Without a checkpoint, a random transformer-small (joint 8k spm trained on Multi30k train;
cached under .bench/translate/, as bench_translate.py builds it) is used, and every output is
forced to ``--random-len`` tokens so that all rows compare equal work.

``--mixed``: beside the clients of each level, one more client sends odd work in a loop: a
text of about ``--long-words`` words on one line (test sentences joined; ``--run-on``:
lowercased, without punctuation, as a paste without sentence ends), then requests the server
must refuse (malformed JSON, a lone surrogate, a wrong type), one a second. The table then
gives the single sentences' latency under that load, for step-level batching (the default:
sentences join and leave the running search) and whole-request batching (``--batching
request``, slices of a long request beside the short ones), and the long text's
time alone on the idle server beside its times under the load;
every single-sentence answer is checked against offline translation through the same text
layer (CTranslate2 and int8, whose output may depend on the other sentences of a batch: the
differences counted), refusals must be 4xx, and the server log must hold no traceback. "all
work vs offline" adds the long texts' sentences translated while the clients ran (a text
counted by the share of its time inside that window).

``--engine ctranslate2`` (CKPT an exported directory) and ``--quantize int8`` run the server and
the offline reference alike.

    .venv/bin/python benchmarks/bench_serve.py [CKPT] [--sentences 300] [--threads 1]
    .venv/bin/python benchmarks/bench_serve.py CKPT --mixed --concurrency 32 --threads 2
    .venv/bin/python benchmarks/bench_serve.py CT2_DIR --engine ctranslate2 --mixed ...
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from multi30k import random_checkpoint, read_text

from mtkit.precision import resolve_dtype

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".bench" / "translate"
ONE_AT_A_TIME = ["--batching", "request", "--max-wait-ms", "0", "--max-batch-tokens", "1"]
CONFIGS = {"batched": [], "one at a time": ONE_AT_A_TIME}


def cpu() -> tuple[str, str]:
    """The CPU model and its flags, from /proc/cpuinfo where there is one."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine(), "?"
    model = re.search(r"^model name\s*:\s*(.*)$", text, re.M)
    flags = re.search(r"^flags\s*:\s*(.*)$", text, re.M)
    return (model.group(1) if model else "?"), (flags.group(1) if flags else "?")


def search_values(random_len: int, random_model: bool, beam: int) -> dict[str, float]:
    """The search of every row: beam ``beam``, outputs forced to ``random_len`` tokens for a
    random model."""
    forced = dict(max_len_a=0.0, max_len_b=random_len, min_len=random_len)
    return {"beam": beam, **(forced if random_model else {})}


def flags(values: dict[str, float]) -> list[str]:
    return [
        part for key, value in values.items() for part in (f"--{key.replace('_', '-')}", str(value))
    ]


def offline(
    ckpt: str, lines: list[str], search: dict[str, float], threads: int, runtime: dict[str, str]
) -> tuple[float, dict[str, str]]:
    """Sentences/s of batched engine.translate over ``lines`` (after a warm-up batch), and
    each line's translation through the text layer, as the server gives it (``runtime``: the
    engine and its precision, as the server runs)."""
    from mtkit.config import TranslateConfig
    from mtkit.engines import load_engine
    from mtkit.text import translate_text

    config = TranslateConfig.from_flat({**search, **runtime, "threads": threads})
    engine = load_engine([ckpt], config)
    engine.translate(lines[:32])
    start = time.perf_counter()
    engine.translate(lines)
    rate = len(lines) / (time.perf_counter() - start)
    return rate, dict(zip(lines, translate_text(engine, lines, "en"), strict=True))


class Server:
    def __init__(self, ckpt: str, options: list[str], log: Path) -> None:
        args = [
            sys.executable,
            "-m",
            "mtkit",
            "serve",
            "-m",
            ckpt,
            "--port",
            "0",
            "--source-lang",
            "en",
            "--target-lang",
            "de",
            "--log-level",
            "warning",
            "--queue-size",
            "1024",
            "--timeout",
            "600",
            *options,
        ]
        self.log = log
        self.proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log.open("wb")
        )
        deadline = time.monotonic() + 120
        while not (found := re.search(r"listening on http://127\.0\.0\.1:(\d+)/", self.text())):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                raise SystemExit(f"mtkit serve did not start:\n{self.text()}")
            time.sleep(0.1)
        self.port = int(found.group(1))
        while not self.ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                raise SystemExit(f"mtkit serve did not load the model:\n{self.text()}")
            time.sleep(0.1)

    def ready(self) -> bool:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            conn.request("GET", "/health")
            return conn.getresponse().status == 200
        except OSError:
            return False
        finally:
            conn.close()

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        self.proc.terminate()
        if self.proc.wait(60) != 0:
            raise SystemExit(f"mtkit serve exited with {self.proc.returncode}:\n{self.text()}")


async def post(reader: Any, writer: Any, body: bytes) -> tuple[int, bytes]:
    """One POST /translate on a keep-alive connection: (status, body)."""
    head = (
        f"POST /translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
        f"application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    writer.write(head.encode() + body)
    status = await reader.readline()
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return int(status.split()[1]), await reader.readexactly(length)


async def client(
    port: int, todo: list[str], latencies: list[float], deadline: float, answers: dict[str, str]
) -> None:
    """One keep-alive connection sending one sentence per request until ``todo`` is empty."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while todo and time.monotonic() < deadline:
            line = todo.pop()
            body = json.dumps({"q": line, "source": "en", "target": "de"}).encode()
            start = time.perf_counter()
            status, answer = await post(reader, writer, body)
            if status != 200:
                raise SystemExit(f"request failed: {status} {answer[:200]!r}")
            latencies.append(time.perf_counter() - start)
            answers[line] = json.loads(answer)["translatedText"]
    finally:
        writer.close()


ODD = [
    b'{"q": "a man", "source": "en"',
    b'{"q": "\\ud800 a man", "source": "en", "target": "de"}',
    b'{"q": 7, "source": "en", "target": "de"}',
]


async def odd_client(port: int, long_text: str, stop: asyncio.Event, seen: dict) -> None:
    """Long texts and requests to refuse, in turn, one a second, until ``stop`` (a new
    connection for each: a server may close one after a refusal)."""
    long = json.dumps({"q": long_text, "source": "en", "target": "de"}).encode()
    while not stop.is_set():
        for body in [long, *ODD]:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                start = time.perf_counter()
                status, _ = await post(reader, writer, body)
            finally:
                writer.close()
            key = "long" if body is long else "odd"
            seen.setdefault(key, []).append((status, time.perf_counter() - start))
            if body is long:
                seen.setdefault("long_spans", []).append((start, time.perf_counter()))
            if stop.is_set():
                break
            await asyncio.sleep(1.0)


async def alone(port: int, text: str) -> float:
    """Seconds one request of ``text`` takes on an idle server."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        start = time.perf_counter()
        status, answer = await post(
            reader, writer, json.dumps({"q": text, "source": "en", "target": "de"}).encode()
        )
    finally:
        writer.close()
    if status != 200:
        raise SystemExit(f"the long text alone failed: {status} {answer[:200]!r}")
    return time.perf_counter() - start


async def load(
    port: int, lines: list[str], clients: int, limit: float, long_text: str = ""
) -> tuple[float, list, dict, dict, float]:
    """Sentences/s of the single-sentence clients, their latencies and answers, what the odd
    client saw, and how much of the long texts' work fell while the clients ran (each text
    counted by the share of its time inside that window, as slices progress evenly)."""
    todo, latencies, answers, seen = list(reversed(lines)), [], {}, {}
    start = time.perf_counter()
    deadline = time.monotonic() + limit
    stop = asyncio.Event()
    odd = asyncio.create_task(odd_client(port, long_text, stop, seen)) if long_text else None
    await asyncio.gather(
        *(client(port, todo, latencies, deadline, answers) for _ in range(clients))
    )
    end = time.perf_counter()
    rate = len(latencies) / (end - start)
    if odd is not None:
        stop.set()
        await odd
    inside = sum(
        max(0.0, min(b, end) - max(a, start)) / (b - a) for a, b in seen.get("long_spans", [])
    )
    return rate, latencies, answers, seen, inside


def percentile(values: list[float], q: float) -> float:
    return (
        statistics.quantiles(values, n=100, method="inclusive")[q - 1]
        if len(values) > 1
        else values[0]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint", nargs="?", help="a trained checkpoint (default: random)")
    parser.add_argument("--sentences", type=int, default=300, help="per concurrency level")
    parser.add_argument("--concurrency", default="1,8,32,128")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per level")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (server, offline)")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument(
        "--engine", default="mtkit", help="server and offline (ctranslate2: CKPT an exported dir)"
    )
    parser.add_argument(
        "--quantize",
        default="",
        choices=["", "int8"],
        help="server and offline int8 (mtkit engine)",
    )
    parser.add_argument(
        "--dtype",
        default="fast",
        help="server and offline precision (fast: `mtkit serve`'s default; fp32: translate's)",
    )
    parser.add_argument("--random-len", type=int, default=20, help="forced output length")
    parser.add_argument(
        "--mixed",
        action="store_true",
        help="a client of long and invalid requests beside each level",
    )
    parser.add_argument("--long-words", type=int, default=3000)
    parser.add_argument(
        "--run-on",
        action="store_true",
        help="--mixed's long text as a run-on: lowercased, without punctuation",
    )
    parser.add_argument(
        "--server",
        action="append",
        metavar="NAME=OPTIONS",
        help="a server configuration: a name and `mtkit serve` options (repeatable)",
    )
    args = parser.parse_args()
    configs = dict(CONFIGS)
    if args.server:
        named = [item.partition("=") for item in args.server]
        bad = [item for item in args.server if "=" not in item]
        if bad:
            parser.error(f"--server takes NAME=OPTIONS, got {bad[0]!r}")
        configs = {name: options.split() for name, _, options in named}
    elif args.mixed:
        configs = {"step (default)": [], "request (--batching request)": ["--batching", "request"]}

    model, cpu_flags = cpu()
    print(f"CPU: {model} ({os.cpu_count()} cores)\nflags: {cpu_flags}", flush=True)
    ckpt = args.checkpoint or str(random_checkpoint(WORK))
    lines = read_text("test_2016_flickr", "en")[: args.sentences]
    search = search_values(args.random_len, args.checkpoint is None, args.beam)
    runtime = {"engine": args.engine, "dtype": args.dtype}
    runtime |= {"quantize": args.quantize} if args.quantize else {}
    # fp32 mtkit decodes a sentence alike in any batch; bf16 (oneDNN's kernel depends on the
    # row count: a row's last bits may differ), CTranslate2 (its issue #693) and int8
    # (activation scales per batch) may not, so there the differences are counted
    resolved = resolve_dtype("cpu", args.dtype, args.quantize)
    exact = args.engine == "mtkit" and resolved.name == "fp32"
    exact = exact and not (args.quantize or resolved.quantize)
    print(f"precision: {args.dtype} -> {'int8' if resolved.quantize else resolved.name}")
    threads = ["--threads", str(args.threads), *flags(runtime)]
    base, expected = offline(ckpt, lines, search, args.threads, runtime)
    long_text, long_sentences = "", 0
    if args.mixed:
        pool, taken = read_text("test_2016_flickr", "en"), []
        while sum(len(s.split()) for s in taken) < args.long_words and len(taken) < len(pool):
            taken.append(pool[len(taken)])
        long_text, long_sentences = " ".join(taken), len(taken)
        if args.run_on:  # one sentence as typed, of the same words
            long_text = re.sub(r"[^\w\s']", "", long_text).lower()
        shape = "a run-on (no punctuation, lowercased)" if args.run_on else "a text"
        print(
            f"mixed load: {shape} of {len(long_text.split())} words ({long_sentences} "
            "sentences) on one line and "
            f"{len(ODD)} invalid requests, in turn, one a second"
        )
    print(
        f"model: {ckpt}; search: {' '.join(flags(search))}; threads {args.threads}; "
        f"{' '.join(flags(runtime))}"
    )
    print(f"offline batched engine.translate: {base:.1f} sentences/s ({len(lines)} sentences)\n")
    print(
        "| server | clients | sentences | sentences/s | p50 ms | p95 ms | p99 ms | vs offline "
        "| all work vs offline | long requests (s) | long text alone (s) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    WORK.mkdir(parents=True, exist_ok=True)
    for name, options in configs.items():
        server = Server(ckpt, [*flags(search), *threads, *options], WORK / "serve.log")
        try:
            asyncio.run(load(server.port, lines[:16], 4, 60))  # warm-up
            by_itself = f"{asyncio.run(alone(server.port, long_text)):.1f}" if long_text else "-"
            for clients in map(int, args.concurrency.split(",")):
                rate, lat, answers, seen, long_share = asyncio.run(
                    load(server.port, lines, clients, args.time_limit, long_text)
                )
                p50, p95, p99 = (percentile(lat, q) * 1000 for q in (50, 95, 99))
                long = " ".join(f"{t:.1f}" for _, t in seen.get("long", [])) or "-"
                # all work: the long texts' sentences done while the clients ran, too
                work = rate * (1 + long_share * long_sentences / len(lat))
                print(
                    f"| {name} | {clients} | {len(lat)} | {rate:.1f} | {p50:.0f} | {p95:.0f} "
                    f"| {p99:.0f} | {rate / base:.2f}x | {work / base:.2f}x | {long} "
                    f"| {by_itself} |",
                    flush=True,
                )
                check(answers, expected, seen, exact)
        finally:
            server.stop()
        if "Traceback" in server.text():
            raise SystemExit(f"a traceback in the server log:\n{server.text()[-3000:]}")


def check(answers: dict[str, str], expected: dict[str, str], seen: dict, exact: bool) -> None:
    """Every answer as offline translation gives it (``exact``; otherwise the differences
    are counted and printed); long ones 200, odd ones 4xx."""
    wrong = [line for line, text in answers.items() if text != expected[line]]
    if wrong and exact:
        raise SystemExit(f"{len(wrong)} answers differ from offline translation, e.g. {wrong[0]!r}")
    if wrong:
        print(
            f"({len(wrong)} of {len(answers)} answers differ from offline translation: batches "
            f"of other sentences, other rounding; e.g. {wrong[0]!r})",
            flush=True,
        )
    statuses = [status for status, _ in seen.get("long", [])]
    bad = [s for s in statuses if s != 200] + [
        s for s, _ in seen.get("odd", []) if not 400 <= s < 500
    ]
    if bad:
        raise SystemExit(f"unexpected statuses under mixed load: {bad}")


if __name__ == "__main__":
    main()
