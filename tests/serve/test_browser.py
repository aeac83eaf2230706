"""The page at / in a real browser: headless Chromium (Debian's `chromium`), driven through the
DevTools protocol over a websocket: type a sentence, click Translate, read the translation.

`make test` installs chromium where it can (root with apt); elsewhere this test skips, naming
what is missing, except under CI (CI=true), where a missing browser fails it.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from serve_helpers import Server, best

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def need(missing: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{missing}: CI must run the browser test (make test installs chromium)")
    pytest.skip(f"{missing}: the browser test needs it")


class DevTools:
    """A minimal DevTools-protocol client: commands to one page over the browser's websocket."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.session: str | None = None

    def __call__(self, method: str, **params: Any) -> dict[str, Any]:
        message: dict[str, Any] = {"id": next(self.ids), "method": method, "params": params}
        if self.session:
            message["sessionId"] = self.session
        self.ws.send(json.dumps(message))
        while True:  # events come in between; wait for the answer to this command
            reply = json.loads(self.ws.recv(timeout=20))
            if reply.get("id") == message["id"]:
                assert "error" not in reply, reply
                return reply["result"]

    def open(self, url: str) -> None:
        target = self("Target.createTarget", url=url)["targetId"]
        self.session = self("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]

    def js(self, expression: str) -> Any:
        found = self("Runtime.evaluate", expression=expression, returnByValue=True)
        return found["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 20) -> Any:
        deadline = time.monotonic() + timeout
        while not (value := self.js(expression)):
            assert time.monotonic() < deadline, f"timed out waiting for {expression}"
            time.sleep(0.05)
        return value

    def click(self, selector: str) -> None:
        """A real mouse click at the middle of the element."""
        box = self.js(
            f"JSON.stringify(document.querySelector('{selector}').getBoundingClientRect())"
        )
        rect = json.loads(box)
        x, y = rect["x"] + rect["width"] / 2, rect["y"] + rect["height"] / 2
        for kind in ("mousePressed", "mouseReleased"):
            self("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)


def start_chromium(profile: Path) -> tuple[subprocess.Popen, str]:
    args = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-proxy-server",
        "--no-first-run",
        "--disable-dev-shm-usage",
        "--remote-debugging-address=127.0.0.1",
        "--remote-debugging-port=0",
        f"--user-data-dir={profile}",
        "about:blank",
    ]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline, seen = time.monotonic() + 30, []
    assert proc.stderr is not None
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        seen.append(line)
        if found := re.search(r"DevTools listening on (ws://\S+)", line):
            return proc, found.group(1)
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"chromium did not start: {''.join(seen)[-2000:]}")


STORY = ["a man plays with the red ball. the dog runs.", "", "two women walk on the street"]


def test_the_page_translates_in_a_browser(ckpt: str, tmp_path: Path, start_server) -> None:
    if CHROMIUM is None:
        need("chromium (Debian package `chromium`) not found")
    try:
        import websockets.sync.client  # noqa: F401
    except ImportError:
        need("the Python package websockets (mtkit[dev]) is not installed")
    from websockets.sync.client import connect

    server: Server = start_server()
    proc, url = start_chromium(tmp_path / "profile")
    pair = "document.getElementById('pair').textContent"
    try:
        with connect(url, max_size=None, open_timeout=10) as ws:
            page = DevTools(ws)
            page.open(f"http://127.0.0.1:{server.port}/")
            assert "English (en)" in page.wait_for(f"{pair}.includes('\u2192') && {pair}")
            page.js("document.getElementById('source').focus()")
            page("Input.insertText", text="a man plays with the red ball")
            page.click("#translate")
            shown = page.wait_for("document.getElementById('target').value")
            status = page.js("document.getElementById('status').textContent")
            story = tmp_path / "story.txt"
            story.write_text("".join(line + "\n" for line in STORY), encoding="utf-8")
            root = page("DOM.getDocument")["root"]["nodeId"]
            node = page("DOM.querySelector", nodeId=root, selector="#file")["nodeId"]
            page("DOM.setFileInputFiles", files=[str(story)], nodeId=node)
            page.click("#translate-file")
            link = "document.getElementById('download')"
            url = page.wait_for(f"!{link}.hidden && {link}.href")
            fetched = f"fetch({json.dumps(url)}).then(r => r.text())"
            got = page(
                "Runtime.evaluate", expression=fetched, awaitPromise=True, returnByValue=True
            )["result"]["value"]
    finally:
        proc.kill()
        proc.wait(10)
    assert shown == best(ckpt, ["a man plays with the red ball"])[0]
    assert status.startswith("Done in")
    assert got == "".join(line + "\n" for line in best(ckpt, STORY, "--split-sentences"))
    assert "GET / 200" in server.stderr() and "POST /translate 200" in server.stderr()
