"""Run-ons without punctuation on an idle `mtkit serve`: how long one takes, what comes back,
and how soon a single sentence sent right after it is answered (issue 52).

For each checkpoint: starts `mtkit serve -m CKPT --threads N` on a free port, sends one POST of
test_2016_flickr captions joined into a 300-word and a 3,000-word line (lowercased, final full
stops dropped: one run-on sentence), each followed by one ordinary sentence, and prints the
seconds, the words that came back, and the sentence's milliseconds. A checkpoint that records
its longest training source (``source_pieces``) has such a line cut into parts at that length;
an older one decodes it up to its positions.

    .venv/bin/python benchmarks/bench_serve_runon.py CKPT [CKPT ...] [--threads 2]
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from multi30k import read_text

ROOT = Path(__file__).resolve().parent.parent
SENTENCE = "A man rides a bike down the street."


def run_on(words: int) -> str:
    """Test captions, lowercased without their full stops, joined up to ``words`` words."""
    found: list[str] = []
    for line in read_text("test_2016_flickr", "en"):
        found += line.rstrip(".").lower().split()
        if len(found) >= words:
            break
    return " ".join(found[:words])


def post(port: int, text: str) -> tuple[int, float, str]:
    """(status, seconds, translation) of one POST /translate."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    body = json.dumps({"q": text, "source": "en", "target": "de"})
    start = time.perf_counter()
    conn.request("POST", "/translate", body, {"Content-Type": "application/json"})
    reply = conn.getresponse()
    answer = json.loads(reply.read())
    return reply.status, time.perf_counter() - start, str(answer.get("translatedText", answer))


def serve(ckpt: str, threads: int, log: Path) -> tuple[subprocess.Popen, int]:
    """`mtkit serve` on a free port, once /health says it is ready."""
    args = [sys.executable, "-m", "mtkit", "serve", "-m", ckpt, "--port", "0"]
    args += ["--threads", str(threads), "--source-lang", "en", "--target-lang", "de"]
    proc = subprocess.Popen(args, stderr=log.open("wb"), stdout=subprocess.DEVNULL, cwd=ROOT)
    deadline = time.monotonic() + 120
    while not (found := re.search(r"listening on http://127\.0\.0\.1:(\d+)/", log.read_text())):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"mtkit serve did not start:\n{log.read_text()[-2000:]}")
        time.sleep(0.1)
    port = int(found.group(1))
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return proc, port
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"mtkit serve never got ready:\n{log.read_text()[-2000:]}")
        time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", nargs="+")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    print("| checkpoint | run-on words | status | seconds | words out | a sentence after (ms) |")
    print("|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for ckpt in args.checkpoints:
            proc, port = serve(ckpt, args.threads, Path(tmp) / "serve.log")
            try:
                post(port, SENTENCE)  # warm-up
                for words in (300, 3000):
                    status, seconds, text = post(port, run_on(words))
                    _, after, _ = post(port, SENTENCE)
                    print(
                        f"| {ckpt} | {words} | {status} | {seconds:.1f} | {len(text.split())} "
                        f"| {after * 1000:.0f} |",
                        flush=True,
                    )
            finally:
                proc.terminate()
                proc.wait(30)


if __name__ == "__main__":
    main()
