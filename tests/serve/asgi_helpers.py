"""POST /translate through the FastAPI app's ASGI interface, in-process (no server, no port)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from mtkit.serve.app import create_app
from mtkit.serve.service import Service


def post(service: Service, fields: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """POST /translate with a JSON body (en -> de unless ``fields`` says otherwise): the status
    and the decoded answer."""
    body = json.dumps({"source": "en", "target": "de", **fields}).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/translate",
        "raw_path": b"/translate",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 9),
        "server": ("test", 80),
    }
    incoming = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict] = []

    async def receive() -> dict:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(create_app(service)(scope, receive, send))
    return sent[0]["status"], json.loads(b"".join(m.get("body", b"") for m in sent[1:]))
