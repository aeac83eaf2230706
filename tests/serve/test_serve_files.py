"""POST /translate_file and GET /download_file against a real server: each format comes back
with its structure (and as /translate gives its text), and each rule for untrusted uploads is
held to with a crafted request: size, content, zip bombs, DTDs, names, expiry, owners."""

from __future__ import annotations

import copy
import http.client
import io
import json
import re
import socket
import stat
import sys
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

import docx
import pytest
import srt
from click.testing import CliRunner
from docx.text.paragraph import Paragraph as DocxParagraph
from serve_helpers import FAST, Server

from mtkit.cli import cli as main
from mtkit.text.files.wordml import Paragraph

sys.path.insert(0, str(Path(__file__).parents[1] / "text"))
from file_helpers import (  # noqa: E402
    BILLION_LAUGHS,
    EXTERNAL,
    SRT,
    build_docx,
    runs,
    with_doctype,
    zip_bomb,
)

LIMIT = 100_000  # --max-file-bytes of the module's server
KEY = "s3cret"
TEXT = "A man runs on the street. The dog sits.\n\n  the cat plays with a ball\r\nred house\n"
PAGE = '<p>a man <b>runs</b> on the <a href="/x">street</a></p>\n<ul><li>the dog</li></ul>\n'


@pytest.fixture(scope="module")
def server(ckpt: str, tmp_path_factory: pytest.TempPathFactory):
    log = tmp_path_factory.mktemp("files") / "server.log"
    started = Server(ckpt, log, "--max-file-bytes", str(LIMIT))
    yield started
    assert started.stop() == 0, started.stderr()


def form(name: str, data: bytes, **fields: str) -> tuple[bytes, dict[str, str]]:
    """A multipart/form-data body with ``fields`` and a file, and its headers."""
    boundary = uuid.uuid4().hex
    head = f"--{boundary}\r\nContent-Disposition: form-data; name="
    parts = [
        f'{head}"{key}"\r\n\r\n{value}\r\n'.encode()
        for key, value in {"source": "en", "target": "de", **fields}.items()
    ]
    parts.append(
        f'{head}"file"; filename="{name}"\r\nContent-Type: application/octet-stream'
        "\r\n\r\n".encode()
        + data
        + b"\r\n"
    )
    body = b"".join(parts) + f"--{boundary}--\r\n".encode()
    return body, {"Content-Type": f"multipart/form-data; boundary={boundary}"}


def fetch(
    server: Server,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    source: str = "127.0.0.1",
) -> tuple[int, dict, bytes]:
    """(status, headers, raw body) of one request, sent from address ``source``."""
    conn = http.client.HTTPConnection(
        "127.0.0.1", server.port, timeout=60, source_address=(source, 0)
    )
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def upload(
    server: Server, name: str, data: bytes, headers: dict | None = None, **fields: str
) -> tuple[int, Any]:
    body, form_headers = form(name, data, **fields)
    status, _, answer = fetch(
        server, "POST", "/translate_file", body, {**form_headers, **(headers or {})}
    )
    return status, json.loads(answer)


def translated_file(server: Server, name: str, data: bytes) -> tuple[dict, bytes, str]:
    """Upload, then download: (download headers, bytes, the download path)."""
    status, answer = upload(server, name, data)
    assert status == 200, answer
    url = urllib.parse.urlsplit(answer["translatedFileUrl"])
    assert (url.hostname, url.port) == ("127.0.0.1", server.port)
    status, headers, body = fetch(server, "GET", url.path)
    assert status == 200, body
    return headers, body, url.path


def test_a_text_file_comes_back_as_translate_gives_its_text(server: Server) -> None:
    headers, body, path = translated_file(server, "notes.txt", TEXT.encode())
    assert re.fullmatch(r"/download_file/[A-Za-z0-9_-]{32}", path)
    assert headers["content-type"] == "text/plain; charset=utf-8"
    assert headers["content-disposition"] == 'attachment; filename="notes_de.txt"'
    assert body.decode() == server.translate({"q": TEXT}).body["translatedText"]
    assert body.count(b"\n") == TEXT.count("\n") and b"\r\n" in body


def test_an_html_file_comes_back_as_translate_gives_it(server: Server) -> None:
    headers, body, _ = translated_file(server, "page.html", PAGE.encode())
    assert headers["content-type"] == "text/html; charset=utf-8"
    assert body.decode() == server.translate({"q": PAGE, "format": "html"}).body["translatedText"]


def test_an_html_document_is_the_same_bytes_through_the_cli(
    server: Server, ckpt: str, tmp_path: Path
) -> None:
    page = f"\ufeff<!DOCTYPE html>\r\n<html><body>{PAGE}</body></html>\r\n".encode()
    _, body, _ = translated_file(server, "page.html", page)
    source, out = tmp_path / "page.html", tmp_path / "page.de.html"
    source.write_bytes(page)
    cli = ["translate", "-m", ckpt, "--format", "html", *FAST, "-i", str(source), "-o", str(out)]
    result = CliRunner().invoke(main, cli)
    assert result.exit_code == 0, result.output
    assert out.read_bytes() == body and body.startswith("\ufeff<!DOCTYPE html>".encode())
    source.write_bytes(b"<p>caf\xe9</p>")  # refused by both, naming the byte
    result = CliRunner().invoke(main, cli)
    message = f"{source}: not UTF-8 text (byte 0xe9 at byte 6)"
    assert result.exit_code == 1 and result.output.strip().splitlines()[-1].endswith(message)
    assert upload(server, "page.html", source.read_bytes())[1]["error"].endswith(message[-35:])


def test_subtitles_keep_their_cues_and_timings(server: Server) -> None:
    headers, body, _ = translated_file(server, "film.srt", SRT.encode())
    assert headers["content-type"].startswith("application/x-subrip")
    cues, source = list(srt.parse(body.decode())), list(srt.parse(SRT))
    assert [(c.index, c.start, c.end, c.proprietary) for c in cues] == [
        (c.index, c.start, c.end, c.proprietary) for c in source
    ]
    timing = re.compile(r"^\d+\n\S+ --> .*$", re.M)
    assert timing.findall(body.decode()) == timing.findall(SRT)


def test_a_word_document_keeps_its_structure(server: Server) -> None:
    data = build_docx()
    headers, body, _ = translated_file(server, "Report 2024.DOCX", data)
    assert headers["content-type"].startswith("application/vnd.openxmlformats")
    assert headers["content-disposition"] == 'attachment; filename="Report 2024_de.docx"'
    source, result = docx.Document(io.BytesIO(data)), docx.Document(io.BytesIO(body))
    assert len(result.paragraphs) == len(source.paragraphs)
    assert [p.style.name for p in result.paragraphs] == [p.style.name for p in source.paragraphs]
    assert len(result.tables[0].rows) == 2 and len(result.tables[0].columns) == 2
    assert result.tables[0].cell(1, 1).tables  # the nested table
    for number in (1, 2):  # each paragraph is the /translate of its fragment, rebuilt
        paragraph = Paragraph.read(copy.deepcopy(source.paragraphs[number]._p))
        answer = server.translate({"q": paragraph.html, "format": "html"})
        paragraph.rebuild(answer.body["translatedText"])
        rebuilt = DocxParagraph(paragraph.element, None)
        assert runs(result.paragraphs[number]) == runs(rebuilt) and runs(rebuilt)
    assert result.sections[0].footer.paragraphs[0].text.strip()
    for tag in ("w:drawing", "w:hyperlink", "w:fldChar", "w:br", "w:tbl"):
        assert len(result.element.xpath(f"//{tag}")) == len(source.element.xpath(f"//{tag}"))


def test_a_file_over_the_limit_is_a_413(server: Server) -> None:
    status, answer = upload(server, "big.txt", b"a man runs\n" * (LIMIT // 11 + 1))
    assert (status, answer["field"]) == (413, "file")
    assert "--max-file-bytes" in answer["error"]


def test_the_size_is_refused_before_the_body_is_read(server: Server) -> None:
    body, headers = form("big.txt", b"a man runs\n")
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:  # a body said to be 1 GB, of which 1 KB is sent: the answer comes at once
        conn.putrequest("POST", "/translate_file")
        for key, value in {**headers, "Content-Length": str(10**9)}.items():
            conn.putheader(key, value)
        conn.endheaders(body[:1024])
        response = conn.getresponse()
        assert response.status == 413 and json.loads(response.read())["field"] == "file"
    finally:
        conn.close()


def test_a_body_without_a_length_is_counted_as_it_streams(server: Server) -> None:
    body, headers = form("big.txt", b"a man runs\n" * ((LIMIT + 2 * 2**16) // 11))
    head = "".join(f"{k}: {v}\r\n" for k, v in {**headers, "Transfer-Encoding": "chunked"}.items())
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(f"POST /translate_file HTTP/1.1\r\nHost: x\r\n{head}\r\n".encode())
        for at in range(0, len(body), 8192):  # chunked, and never ended: no length to refuse by
            chunk = body[at : at + 8192]
            sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        answer = ""
        while not answer.endswith("}") and (data := sock.recv(65536)):  # the body unfinished
            answer += data.decode("latin-1")
    assert answer.startswith("HTTP/1.1 413 ") and '"field":"file"' in answer


@pytest.mark.parametrize(
    ("name", "data", "why"),
    [
        ("letter.docx", b"Dear Sir,\nthis is no zip.\n", "not a zip"),
        ("film.srt", bytes(range(256)) * 4, "not UTF-8"),
        ("film.srt", b"1\n00:00:01,000 --> 00:00:02,000\nhi\x00\x01\n", "binary"),
        ("notes.txt", b"\x89PNG\r\n\x1a\n" + bytes(200), "not UTF-8"),
        ("tool.exe", b"MZ\x90\x00", "not translated"),
        ("bomb.docx", zip_bomb(build_docx(), 8), "times its size"),
        ("laughs.docx", with_doctype(build_docx(), BILLION_LAUGHS, "lol9"), "type declaration"),
        ("xxe.docx", with_doctype(build_docx(), EXTERNAL, "xxe"), "type declaration"),
    ],
)
def test_files_are_checked_by_content(server: Server, name: str, data: bytes, why: str) -> None:
    status, answer = upload(server, name, data)
    assert (status, answer["field"]) == (400, "file"), answer
    assert why in answer["error"] and answer["error"].startswith("file: ")


def test_forms_without_a_file_and_bad_fields(server: Server) -> None:
    body, headers = form("a.txt", b"a man")
    body = body.replace(b'name="file"', b'name="other"')
    status, _, answer = fetch(server, "POST", "/translate_file", body, headers)
    assert (status, json.loads(answer)["field"]) == (400, "file")
    status, _, answer = fetch(
        server, "POST", "/translate_file", b'{"q": "x"}', {"Content-Type": "application/json"}
    )
    assert (status, json.loads(answer)["field"]) == (400, "file")
    assert upload(server, "a.txt", b"a man", target="fr")[1]["field"] == "target"
    assert upload(server, "a.txt", b"a man", beam="99")[1]["field"] == "beam"


@pytest.mark.parametrize(
    "path",
    [
        "/download_file/..",
        "/download_file/../x",
        "/download_file/%2e%2e%2fetc%2fpasswd",
        "/download_file/" + "A" * 32,
        "/download_file/notes_de.txt",
        "/download_file/",
    ],
)
def test_names_never_issued_are_404(server: Server, path: str) -> None:
    status, _, _ = fetch(server, "GET", path)
    assert status == 404


def test_a_file_is_not_served_to_another_address(server: Server) -> None:
    _, body, path = translated_file(server, "notes.txt", TEXT.encode())
    status, _, answer = fetch(server, "GET", path, source="127.0.0.2")
    assert (status, json.loads(answer)["field"]) == (404, "file")
    assert fetch(server, "GET", path)[2] == body  # still there for its owner


@pytest.fixture(scope="module")
def keyed(ckpt: str, tmp_path_factory: pytest.TempPathFactory):
    """A server with an API key whose files live 2 s; its folder is gone once it stops."""
    log = tmp_path_factory.mktemp("keyed") / "server.log"
    started = Server(ckpt, log, "--file-ttl", "2", env={"MTKIT_API_KEY": KEY})
    found = re.search(r"translated files: kept 2 s in (\S+)", started.stderr())
    assert found, started.stderr()
    yield started, Path(found.group(1))
    assert started.stop() == 0, started.stderr()
    assert not Path(found.group(1)).exists()


def test_a_file_is_served_only_with_the_key_it_was_asked_with(keyed: tuple) -> None:
    server, _ = keyed
    assert upload(server, "a.txt", b"a man")[0] == 401
    assert upload(server, "a.txt", b"a man", {"X-API-Key": "nope"})[0] == 403
    status, answer = upload(server, "a.txt", b"a man", api_key=KEY)
    assert status == 200, answer
    path = urllib.parse.urlsplit(answer["translatedFileUrl"]).path
    assert fetch(server, "GET", path, headers={"Authorization": f"Bearer {KEY}"})[0] == 200
    assert fetch(server, "GET", path + f"?api_key={KEY}")[0] == 200
    assert fetch(server, "GET", path)[0] == 404
    assert fetch(server, "GET", path, headers={"X-API-Key": "other"})[0] == 404


def test_files_live_in_a_private_directory_until_their_time_is_up(keyed: tuple) -> None:
    server, folder = keyed
    before = set(folder.iterdir())
    status, answer = upload(server, "notes.txt", b"a man runs", {"X-API-Key": KEY})
    assert status == 200, answer
    name = answer["translatedFileUrl"].rsplit("/", 1)[1]
    assert {p.name for p in set(folder.iterdir()) - before} == {name}
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600
    deadline = time.monotonic() + 10
    while list(folder.iterdir()) and time.monotonic() < deadline:  # the sweeper, no request
        time.sleep(0.1)
    assert not list(folder.iterdir())
    assert fetch(server, "GET", f"/download_file/{name}", headers={"X-API-Key": KEY})[0] == 404
