"""Files over HTTP: ``POST /translate_file`` and ``GET /download_file/<name>``, as
LibreTranslate has them, for uploads that are untrusted.

``POST /translate_file`` takes a multipart form (``file``, ``source``, ``target``, ``api_key``;
mtkit adds ``beam``), translates the file through the text layer
(:func:`mtkit.text.files.translate_file_bytes`, in a text thread, its units through the
cross-request batcher as :mod:`mtkit.serve.texts` does) and answers
``{"translatedFileUrl": "<base>/download_file/<name>"}``; ``GET`` on that URL gives the
translated file until it expires, as an attachment named ``<name>_<target>.<suffix>`` after
the upload (LibreTranslate's naming).

What an upload may not do:

- be larger than ``--max-file-bytes``: the ``Content-Length`` is checked before the body is
  read, and the body is counted as it streams in (413, ``file``); a form holds one file and a
  few short fields (starlette's multipart parser, with its limits);
- be something else than its name says, or more than it looks: the content is checked by
  :mod:`mtkit.text.files` (UTF-8 text, SubRip, a zip package of bounded size with no XML DTD for
  a ``.docx``) before any library reads it further (400, ``file``);
- choose where anything is stored: the upload is read in memory, the result is written under a
  random name (``secrets.token_urlsafe``) in a private temporary directory (mode 0700, files
  0600) made at start and removed at exit; the client's file name is only ever used, cleaned,
  in ``Content-Disposition``. A name that was not issued (``..``, a path, a guess) is a 404;
- outlive ``--file-ttl`` seconds: results are removed by a sweeper thread and on each request;
- be downloaded by someone else: each result keeps who asked for it, the SHA-256 of the API key
  (with ``--api-key``) or else the client's address, and anyone else gets the same 404 as for a
  name never issued.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import re
import secrets
import shutil
import tempfile
import threading
import time
import unicodedata
import urllib.parse
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from mtkit.config import ServeConfig
from mtkit.errors import MtkitError
from mtkit.serve.api import parse_request, request_glossary
from mtkit.serve.errors import ApiError
from mtkit.serve.service import Model, Service, check_key, error_response, key_in_headers
from mtkit.serve.texts import TEXT_THREADS, Deadline, batched, batcher_units
from mtkit.text.files import FORMATS, FileError, file_format, translate_file_bytes
from mtkit.text.glossary import constraining
from mtkit.text.translate import Counted, TextOptions, as_trained, source_limit

log = logging.getLogger("mtkit.serve")

FORM_FIELDS = 16  # form fields besides the file
FIELD_BYTES = 4096  # bytes a form field may hold
FORM_SLACK = FORM_FIELDS * FIELD_BYTES  # what a form may add to the file's bytes
NAME = re.compile(r"[A-Za-z0-9_-]{32}")  # what secrets.token_urlsafe(24) gives

UPLOAD_BODY = {
    "required": True,
    "content": {
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "required": ["file", "source", "target"],
                "properties": {
                    "file": {
                        "type": "string",
                        "format": "binary",
                        "description": f"The file ({', '.join(FORMATS)})",
                    },
                    "source": {"type": "string", "description": "Source code, or 'auto'"},
                    "target": {"type": "string"},
                    "beam": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "Beam width (mtkit; default: the server's)",
                    },
                    "api_key": {"type": "string"},
                },
            }
        }
    },
}


@dataclass
class Stored:
    """A translated file: where it is, what it is served as, whose it is, until when."""

    path: Path
    filename: str
    media_type: str
    owner: str
    expires: float


class FileStore:
    """Translated files under random names in a private directory, each for ``ttl`` seconds."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self.root = Path(tempfile.mkdtemp(prefix="mtkit-files-"))  # mode 0700
        self.files: dict[str, Stored] = {}
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        weakref.finalize(self, _remove, self.root, self.stopped)  # at exit, too
        every = min(max(ttl / 4, 0.25), 30.0)
        threading.Thread(
            target=_sweeping,
            args=(weakref.ref(self), self.stopped, every),
            name="mtkit-files",
            daemon=True,
        ).start()

    def put(self, data: bytes, filename: str, media_type: str, owner: str) -> str:
        """Store ``data``; the name it is known by."""
        name = secrets.token_urlsafe(24)
        path = self.root / name
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        with self.lock:
            self.files[name] = Stored(
                path, filename, media_type, owner, time.monotonic() + self.ttl
            )
        return name

    def get(self, name: str, owner: str) -> tuple[Stored, bytes] | None:
        """The file stored as ``name`` for ``owner`` and its bytes; None if it is not (never
        issued, expired, someone else's)."""
        self.sweep()
        if not NAME.fullmatch(name):
            return None
        with self.lock:
            found = self.files.get(name)
            if found is None or not secrets.compare_digest(found.owner, owner):
                return None
            return found, found.path.read_bytes()

    def sweep(self) -> None:
        """Remove the files whose time is up."""
        now = time.monotonic()
        with self.lock:
            for name in [name for name, s in self.files.items() if s.expires <= now]:
                self.files.pop(name).path.unlink(missing_ok=True)


def _sweeping(ref: weakref.ref, stopped: threading.Event, every: float) -> None:
    """Sweep the store every ``every`` seconds while it exists (a weak reference: the thread
    does not keep it alive)."""
    while not stopped.wait(every):
        store = ref()
        if store is None:
            return
        store.sweep()
        del store


def _remove(root: Path, stopped: threading.Event) -> None:
    stopped.set()
    shutil.rmtree(root, ignore_errors=True)


@dataclass
class Upload:
    """A form's file (its name and bytes) and its text fields."""

    filename: str
    data: bytes
    fields: dict[str, Any]


async def read_upload(request: Request, limit: int) -> Upload:
    """The multipart form of ``request``: 413 as soon as it is larger than a ``limit``-byte file
    and a few fields can be, or its file larger than ``limit``; 400 when it is no such form."""
    if not request.headers.get("content-type", "").lower().startswith("multipart/form-data"):
        raise ApiError(400, "file", "expected a multipart/form-data upload with a 'file' field")
    too_big = ApiError(413, "file", f"larger than the limit of {limit} bytes (--max-file-bytes)")
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit + FORM_SLACK:
        raise too_big

    async def counted() -> AsyncIterator[bytes]:
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit + FORM_SLACK:
                raise too_big
            yield chunk

    parser = MultiPartParser(
        request.headers, counted(), max_files=1, max_fields=FORM_FIELDS, max_part_size=FIELD_BYTES
    )
    try:
        form = await parser.parse()
    except MultiPartException as err:
        raise ApiError(400, "body", f"malformed multipart form: {err.message}") from None
    try:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise ApiError(400, "file", "missing (the file to translate, as a form file field)")
        data = await upload.read(limit + 1)
        if len(data) > limit:
            raise too_big
        fields = {key: value for key, value in form.multi_items() if isinstance(value, str)}
        return Upload(upload.filename or "", data, fields)
    finally:
        await form.close()


def given_key(request: Request, fields: dict[str, Any] | None) -> str:
    """The API key a request gives: a header, a form field, or ``?api_key=``."""
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    key = request.headers.get("x-api-key") or (fields or {}).get("api_key")
    return key if isinstance(key, str) and key else request.query_params.get("api_key", "")


def owner(service: Service, request: Request, fields: dict[str, Any] | None) -> str:
    """Who a stored file is for: the key's SHA-256 with --api-key, else the client's address."""
    if service.config.api_key:
        key = given_key(request, fields).encode("utf-8", "replace")
        return "key:" + hashlib.sha256(key).hexdigest()
    return "address:" + (request.client.host if request.client else "")


def download_name(filename: str, target: str) -> str:
    """``<name>_<target><suffix>`` from the client's file name: its last path component, with
    no control characters, quotes or separators, at most 100 characters."""
    base = PurePosixPath(filename.replace("\\", "/")).name
    clean = "".join(c for c in base if unicodedata.category(c)[0] != "C" and c not in '"/\\;')
    path = PurePosixPath(clean.strip(" .") or "file")
    stem = path.stem[:80] or "file"
    return f"{stem}_{target.split(',')[0]}{path.suffix.lower()[:10]}"


def disposition(filename: str) -> str:
    """``Content-Disposition: attachment`` naming ``filename`` (RFC 6266, RFC 5987 if needed)."""
    if filename.isascii():
        return f'attachment; filename="{filename}"'
    quoted = urllib.parse.quote(filename, safe="")
    return f"attachment; filename*=utf-8''{quoted}"


def router(service: Service) -> APIRouter:
    """The two routes, over one :class:`FileStore` (``--file-ttl``)."""
    config = service.config
    store = FileStore(config.file_ttl)
    log.info("translated files: kept %g s in %s", config.file_ttl, store.root)
    routes = APIRouter()

    @routes.post("/translate_file", openapi_extra={"requestBody": UPLOAD_BODY})
    async def translate_file(request: Request) -> JSONResponse:
        """Translate a file (.txt, .html, .srt, .docx); answers where to download it."""
        start = time.monotonic()
        store.sweep()
        try:
            if key_in_headers(request):  # refuse a wrong key before reading the body
                check_key(config, request, None)
            model = service.ready()
            upload = await read_upload(request, config.max_file_bytes)
            check_key(config, request, upload.fields)
            data, media_type, counted = await _translate_upload(
                model, config, upload, start + config.timeout
            )
        except ApiError as err:
            return error_response(err)
        filename = download_name(upload.filename, upload.fields.get("target", ""))
        name = store.put(data, filename, media_type, owner(service, request, upload.fields))
        state = request.scope.setdefault("state", {})
        state["lines"], state["tokens"] = counted.lines, counted.tokens
        return JSONResponse({"translatedFileUrl": str(request.url_for("download_file", name=name))})

    @routes.get("/download_file/{name}")
    async def download_file(name: str, request: Request) -> Response:
        """A translated file, as an attachment (404 once expired, or for anyone else)."""
        found = store.get(name, owner(service, request, None))
        if found is None:
            return error_response(
                ApiError(404, "file", "no such file (never issued, expired or not yours)")
            )
        stored, data = found
        return Response(
            data,
            media_type=stored.media_type,
            headers={"Content-Disposition": disposition(stored.filename)},
        )

    return routes


async def _translate_upload(
    model: Model, config: ServeConfig, upload: Upload, deadline: float
) -> tuple[bytes, str, Counted]:
    """The uploaded file translated (in a text thread, its units through the batcher, within
    the ``deadline``), its media type, and the units and tokens it took."""
    fields = {
        key: upload.fields[key]
        for key in ("source", "target", "beam", "glossary")
        if key in upload.fields
    }
    checked = parse_request({"q": "", **fields}, model.pair, model.search, config)
    try:
        kind = file_format(upload.filename)
    except FileError as err:
        raise ApiError(400, "file", str(err)) from None
    search = checked.search.replace(alignment=True) if kind.markup else checked.search
    for field, wanted in (("beam", checked.search), ("file", search)):
        try:  # markup rides on word alignments: the engine must give them
            model.engine.check(wanted)
        except MtkitError as err:
            raise ApiError(400, field, str(err)) from None
    loop = asyncio.get_running_loop()

    async def submit(lines: list[str], phrases: list[list[str]] | None) -> list:
        return await batched(
            model.batcher,
            checked.tagged(lines),
            search,
            Deadline(deadline, config.timeout),
            phrases,
        )

    terms = request_glossary(model.glossary, checked.glossary)
    counted = Counted(batcher_units(submit, loop, constraining(terms)))
    engine = model.engine
    try:
        data = await loop.run_in_executor(
            TEXT_THREADS,
            translate_file_bytes,
            upload.data,
            upload.filename,
            as_trained(engine, TextOptions(checked.source), terms.source_words if terms else ()),
            engine.src_tokenizer,
            source_limit(engine),
            counted,
        )
    except MtkitError as err:  # the file is not what its name says, or breaks a limit
        raise ApiError(400, "file", str(err)) from None
    except ApiError:
        raise
    except Exception as err:  # a file that a library failed on: this request fails alone
        log.exception("file translation failed")
        raise ApiError(500, "file", f"translation failed ({type(err).__name__})") from None
    return data, kind.media_type, counted
