"""`mtkit translate --warm SECONDS`: the model kept loaded in a resident process between calls.

A one-line `mtkit translate` spends most of its time before the first sentence: importing
torch (about 1.4 s on a 2-core CPU) and reading the model. With ``--warm`` the command is a
thin client (:func:`translate_warm`, which imports neither): it sends its input to a resident
process that loaded the same checkpoints with the same settings and writes back what that
process answered. The first call starts the process (:func:`serve_warm`, ``python -m
mtkit.pipeline.warm``) and waits for it; the process leaves after ``SECONDS`` without a call.

The answer is what `mtkit translate` without ``--warm`` writes, byte for byte: the process reads
the input as sent (the same line decoding, errors naming the same lines) and translates it with
:func:`~mtkit.pipeline.translate.translate_stream`; its warnings come back on the client's
stderr. A process serves the checkpoints (paths, sizes and modification times) and the settings
it was started with: a changed checkpoint or option is another process. Its Unix socket lies in
a directory of the user's own (``$XDG_RUNTIME_DIR/mtkit``, else ``/tmp/mtkit-UID``, mode 0700),
named by a hash of both; a socket whose process is gone is replaced. Calls are answered one at a
time. Text input only (``--format text``).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mtkit.config import TranslateConfig
from mtkit.errors import MtkitError
from mtkit.pipeline.translate_paths import STDIO, TranslateStats, check_paths

START_SECONDS = 300  # the most a first call waits for the process to load its model
POLL = 0.05
LOG = "warm.log"  # the processes' stderr, beside their sockets
MAX_DIR = 80  # the longest socket directory: a socket's name adds 26 bytes


def translate_warm(
    checkpoints: list[str],
    input: str,
    output: str,
    config: TranslateConfig,
    seconds: float,
) -> TranslateStats:
    """``input`` translated into ``output`` by the resident process for ``checkpoints`` and
    ``config`` (started, and waited for, where there is none)."""
    if config.format != "text":
        raise MtkitError(f"--warm: text input only, not --format {config.format}")
    check_paths(input, output)
    for path in checkpoints:
        if not Path(path).is_file():
            raise MtkitError(f"{path}: no such checkpoint")
    start = time.perf_counter()
    data = sys.stdin.buffer.read() if input == STDIO else Path(input).read_bytes()
    path = socket_path(checkpoints, config)
    request = {
        "input": base64.b64encode(data).decode("ascii"),
        "name": "<stdin>" if input == STDIO else input,  # as read_lines names it in errors
    }
    answer = _ask(path, request) or _ask(_started(path, checkpoints, config, seconds), request)
    if answer is None:
        raise MtkitError(f"--warm: the resident process at {path} did not answer")
    sys.stderr.write(answer.get("stderr", ""))
    if "error" in answer:
        raise MtkitError(answer["error"])
    text = base64.b64decode(answer["output"])
    if output == STDIO:
        sys.stdout.buffer.write(text)
        sys.stdout.buffer.flush()
    else:
        from mtkit.staging import staged_file

        with staged_file(output) as handle:
            handle.write(text)
    return TranslateStats(int(answer["lines"]), time.perf_counter() - start)


def socket_path(checkpoints: list[str], config: TranslateConfig) -> Path:
    """Where the process for ``checkpoints`` (as they are on disk now) and ``config`` listens."""
    files = []
    for path in checkpoints:
        stat = Path(path).stat()
        files.append([str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns])
    key = json.dumps([files, asdict(config)], sort_keys=True, default=str)
    return runtime_dir() / f"{hashlib.sha256(key.encode()).hexdigest()[:20]}.sock"


def runtime_dir() -> Path:
    """The user's own directory for the sockets (created, mode 0700; refused if another
    user's): ``$XDG_RUNTIME_DIR/mtkit`` where a socket path there fits (``AF_UNIX`` takes about
    100 bytes), else ``/tmp/mtkit-UID``."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    folder = Path(f"/tmp/mtkit-{os.getuid()}")
    if base and len(str(Path(base) / "mtkit")) <= MAX_DIR:
        folder = Path(base) / "mtkit"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if folder.stat().st_uid != os.getuid():
        raise MtkitError(f"--warm: {folder} belongs to another user")
    return folder


def _ask(path: Path, request: dict[str, Any]) -> dict[str, Any] | None:
    """The process's answer to ``request``; None where no process listens at ``path`` (a
    socket left by one that is gone is removed)."""
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.connect(str(path))
    except FileNotFoundError:
        return None
    except ConnectionRefusedError:
        path.unlink(missing_ok=True)
        return None
    with client:
        _send(client, request)
        try:
            return _receive(client)
        except (ConnectionError, ValueError):
            return None


def _started(path: Path, checkpoints: list[str], config: TranslateConfig, seconds: float) -> Path:
    """Start the process for ``path`` and wait until it listens."""
    log = path.parent / LOG
    command = [
        sys.executable,
        "-m",
        "mtkit.pipeline.warm",
        str(path),
        json.dumps(asdict(config)),
        str(seconds),
        *[str(Path(p).resolve()) for p in checkpoints],
    ]
    with open(log, "ab") as err:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=err, stderr=err, start_new_session=True
        )
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if _listening(path):
            return path
        if process.poll() is not None and not _listening(path):
            raise MtkitError(f"--warm: the resident process failed: {_last_line(log)}")
        time.sleep(POLL)
    process.kill()
    raise MtkitError(f"--warm: the resident process did not start in {START_SECONDS} s")


def _listening(path: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
        _send(probe, {})  # a probe: answered with nothing
        return True


def _last_line(log: Path) -> str:
    lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    return lines[-1] if lines else f"see {log}"


def _send(conn: socket.socket, message: dict[str, Any]) -> None:
    body = json.dumps(message).encode("utf-8")
    conn.sendall(len(body).to_bytes(8, "big") + body)


def _receive(conn: socket.socket) -> dict[str, Any]:
    size = int.from_bytes(_exactly(conn, 8), "big")
    return json.loads(_exactly(conn, size))


def _exactly(conn: socket.socket, size: int) -> bytes:
    parts, left = [], size
    while left:
        part = conn.recv(min(left, 1 << 20))
        if not part:
            raise ConnectionError("closed before the end of a message")
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


# ---------------------------------------------------------------------------------------------
# The resident process


def serve_warm(path: Path, checkpoints: list[str], config: TranslateConfig, seconds: float) -> None:
    """Load the model, listen at ``path`` and answer calls one at a time; leave after
    ``seconds`` without one (or at once where another process listens there already)."""
    from mtkit.engines import load_engine
    from mtkit.text.glossary import read_glossary

    engine = load_engine(checkpoints, config)
    glossary = (
        read_glossary(config.glossary, config.glossary_ignore_case) if config.glossary else None
    )
    if _listening(path):
        return
    path.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(16)
    server.settimeout(seconds)
    try:
        while True:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                return
            with conn:
                conn.settimeout(None)
                with contextlib.suppress(ConnectionError, ValueError, OSError):
                    request = _receive(conn)
                    if "input" in request:
                        source = io.BytesIO(base64.b64decode(request["input"]))
                        source.name = str(request.get("name", "<input>"))
                        _send(conn, _translated(engine, source, glossary))
    finally:
        server.close()
        path.unlink(missing_ok=True)


def _translated(engine: Any, source: io.BytesIO, glossary: Any) -> dict[str, Any]:
    """The answer to one call: the output, its line count and what was said on stderr, or the
    error (a user's mistake, in one line) instead of the output."""
    from mtkit.pipeline.translate import read_lines, translate_stream

    out, err = io.BytesIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            count = translate_stream(engine, read_lines(source), out, None, None, glossary)
        except MtkitError as error:
            return {"error": str(error), "stderr": err.getvalue()}
    output = base64.b64encode(out.getvalue()).decode("ascii")
    return {"output": output, "lines": count, "stderr": err.getvalue(), "pid": os.getpid()}


def main() -> None:
    """``python -m mtkit.pipeline.warm SOCKET CONFIG_JSON SECONDS CHECKPOINT...``"""
    from mtkit.config import from_dict

    path, config, seconds, *checkpoints = sys.argv[1:]
    settings = from_dict(TranslateConfig, json.loads(config), "--warm")
    serve_warm(Path(path), checkpoints, settings, float(seconds))


if __name__ == "__main__":
    main()
