"""``pensive serve``: the HTTP service (FastAPI).

One writer process changes the stores (ingest, delete, conversation turns; see
:mod:`pensive_core.server.worker`); the server answers queries from read-only handles that see
each of its commits at their next query, so queries run while an ingest is in flight. Each API
key maps to one namespace, a store of its own: a key can never read or write another namespace.
Every error is ``{"error": {"code", "message", "request_id", "details"}}`` with a stable code.
"""

from __future__ import annotations

import asyncio
import email.message
import json
import logging
import queue
import re
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any
from urllib.parse import unquote_to_bytes

from .. import deadline
from ..config import PensiveConfig, load_config, read_config_source, redacted
from ..errors import (
    BackendError,
    ConfigError,
    InputError,
    MissingDependencyError,
    NotFoundError,
    PensiveError,
)
from ..loaders import SUFFIXES, load_file
from ..namespaces import DEFAULT_NAMESPACE, hide_root, namespace_path
from ..plugins import is_class_path
from ..timeutil import to_iso
from ..types import Document
from ..wire import document_json, result_json
from .keys import KeyRing
from .monitor import Job, Monitor
from .paths import ANY_ID
from .schemas import (
    ContextIn,
    ErrorBody,
    ExplainIn,
    IngestIn,
    QueryIn,
    QueryOut,
    RecallIn,
    ReembedIn,
    TurnIn,
)
from .worker import WorkerError, Writer

try:
    from fastapi import Depends, FastAPI, File, Form, Request, Response, UploadFile
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import HTMLResponse, JSONResponse
    from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
    from starlette.exceptions import HTTPException as StarletteHTTPException
except ImportError as exc:  # pragma: no cover - exercised by the install-hint test
    raise MissingDependencyError("fastapi", "server", "the HTTP service") from exc

__all__ = ["create_app", "ApiError"]

log = logging.getLogger(__name__)

_DASHBOARD = Path(__file__).with_name("dashboard.html")
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._ -]")
_JSON_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')

# what each failure of the engine or the writer becomes
_STATUS: dict[str, tuple[int, str]] = {
    "InputError": (400, "invalid_input"),
    "NotFoundError": (404, "not_found"),
    "ConfigError": (409, "config_error"),
    "SchemaVersionError": (409, "config_error"),
    "MissingDependencyError": (501, "missing_dependency"),
    "BackendError": (503, "backend_unavailable"),
    "WorkerCrashed": (503, "writer_crashed"),
    "NotReady": (503, "not_ready"),
}
_ERRORS: dict[int | str, dict[str, Any]] = {
    s: {"model": ErrorBody, "description": d}
    for s, d in {
        400: "Bad input (invalid_input, invalid_json, invalid_utf8, json_too_deep, "
        "query_too_long, invalid_body)",
        401: "Missing or unknown API key (unauthorized)",
        404: "No such document, job, session or route, or no expected id of an explain "
        "in the store (not_found)",
        405: "The route does not take this method (method_not_allowed)",
        409: "The store contradicts the server's config (config_error)",
        413: "Too large (payload_too_large, document_too_large, too_many_documents)",
        415: "A file type, or a body that is not JSON sent to a JSON route "
        "(unsupported_media_type)",
        422: "The body does not match the schema: unknown fields, wrong types; nothing is "
        "coerced (validation_error)",
        500: "A fault of the server (internal)",
        501: "A feature whose extra is not installed (missing_dependency)",
        503: "The writer or a backend is unavailable (not_ready, writer_crashed, "
        "backend_unavailable, store_unavailable)",
        504: "Took longer than the server's timeout (timeout)",
    }.items()
}


class ApiError(Exception):
    """An error with an HTTP status and a stable code.

    Args:
        status: The HTTP status.
        code: The stable code clients switch on.
        message: What was wrong and what to do.
        details: Per-item problems (files, fields).
    """

    def __init__(
        self, status: int, code: str, message: str, details: list[dict[str, Any]] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details or []


def _error_response(
    status: int,
    code: str,
    message: str,
    request_id: str,
    details: list[dict[str, Any]] | None = None,
) -> Response:
    body = {
        "error": {
            "code": code,
            "message": message,
            "request_id": request_id,
            "details": details or [],
        }
    }
    # ASCII with escapes: a field name or message quoting what the client sent (a lone
    # surrogate, say) can never make the error itself fail to render
    return Response(
        json.dumps(body, ensure_ascii=True, default=str),
        status_code=status,
        media_type="application/json",
        headers={"x-request-id": request_id},
    )


def _is_json(content_type: str) -> bool:
    """Whether FastAPI reads a body with this ``Content-Type`` as JSON: ``application/json``
    or ``application/*+json``, in any case, with any parameters (the same test FastAPI makes,
    so the guard checks exactly the bodies that get parsed)."""
    message = email.message.Message()
    message["content-type"] = content_type
    if message.get_content_maintype() != "application":
        return False
    subtype = message.get_content_subtype()
    return subtype == "json" or subtype.endswith("+json")


def _engine_error(exc: Exception, root: Path | None = None) -> ApiError:
    """The API error for an exception of the engine or the writer. Where the server keeps
    its files is no client's business: the store root is cut out of messages."""
    kind = exc.kind if isinstance(exc, WorkerError) else type(exc).__name__
    message = str(exc) if root is None else hide_root(str(exc), root)
    if kind in _STATUS:
        status, code = _STATUS[kind]
        return ApiError(status, code, message)
    for cls, name in (
        (InputError, "InputError"),
        (NotFoundError, "NotFoundError"),
        (ConfigError, "ConfigError"),
        (BackendError, "BackendError"),
    ):
        if isinstance(exc, cls):
            status, code = _STATUS[name]
            return ApiError(status, code, message)
    if isinstance(exc, PensiveError):
        return ApiError(503, "store_unavailable", message)
    return ApiError(500, "internal", "internal error; the server log has the details")


@dataclass
class _Namespace:
    name: str
    readers: queue.Queue[Any]
    handles: list[Any]
    monitor: Monitor
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Service:
    """The state behind the routes: the writer, read-only handles per namespace, monitors."""

    def __init__(self, root: Path, config: Any, keys: KeyRing | None) -> None:
        self.root = root
        self.raw_config = read_config_source(config)
        self.config: PensiveConfig = load_config(self.raw_config)
        self.settings = self.config.server
        self.keys = keys
        self.writer = Writer(root, self.raw_config)
        self.pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="pensive-serve")
        self._spaces: dict[str, _Namespace] = {}
        self._spaces_lock = threading.Lock()
        self._embedder: Any = None
        self.started = datetime.now(timezone.utc)

    # -- namespaces ---------------------------------------------------------------------------
    def space(self, ns: str) -> _Namespace:
        """The namespace's handles, opening them (and creating its store) on first use."""
        got = self._spaces.get(ns)  # open already: no lock, never behind another's opening
        if got is not None:
            return got
        with self._spaces_lock:
            got = self._spaces.get(ns)
            if got is not None:
                return got
            self.writer.call("open", ns=ns).result(timeout=300)  # creates the store if new
            from ..engine import Pensive

            handles = []
            try:
                for _ in range(self.settings.readers):
                    r = Pensive(
                        namespace_path(self.root, ns),
                        self.raw_config,
                        read_only=True,
                        embedder=self._embedder,
                    )
                    handles.append(r)
                    if (
                        self._embedder is None
                        and r.stats(disk=False)["index"] is not None
                        # a re-embedded namespace's model is not the other namespaces' model
                        and not r.components.archive.get_meta("reembedded")
                    ):
                        self._embedder = r.embedder
            except BaseException:
                for r in handles:
                    r.close()
                raise
            readers: queue.Queue[Any] = queue.Queue()
            for r in handles:
                readers.put(r)
            got = _Namespace(ns, readers, handles, Monitor(self.settings.recent_queries))
            self._spaces[ns] = got
            return got

    @contextmanager
    def reader(self, ns: str) -> Iterator[Any]:
        """A read-only handle of the namespace, for one request."""
        space = self.space(ns)
        try:
            r = space.readers.get(timeout=self.settings.query_timeout_s)
        except queue.Empty:
            raise ApiError(504, "timeout", "every reader stayed busy past the timeout") from None
        try:
            yield r
        finally:
            space.readers.put(r)

    def monitor(self, ns: str) -> Monitor:
        return self.space(ns).monitor

    async def blocking(self, fn: Callable[[], Any], timeout: float | None = None) -> Any:
        """Run ``fn`` on the service's threads; past the timeout the caller gets 504."""
        loop = asyncio.get_running_loop()
        limit = self.settings.query_timeout_s if timeout is None else timeout

        def limited() -> Any:
            # past the limit the query stops at its next stage (a thread cannot be killed):
            # its reader and this worker thread are free again soon after the 504
            with deadline.within(limit):
                return fn()

        fut = loop.run_in_executor(self.pool, limited)
        try:
            return await asyncio.wait_for(fut, limit)
        except asyncio.TimeoutError:
            raise ApiError(504, "timeout", f"the request took longer than {limit:g} s") from None

    # -- writes ---------------------------------------------------------------------------------
    def submit(
        self, ns: str, kind: str, op: str, total: int, **args: Any
    ) -> tuple[Job, Future[Any]]:
        """Send a change to the writer, tracked as a job of the namespace."""
        mon = self.monitor(ns)
        job = mon.new_job(ns, kind, total)

        def progress(done: int) -> None:
            started = job.started or datetime.now(timezone.utc).isoformat()
            mon.update(job, state="running", done=min(done, total), started=started)

        fut = self.writer.call(op, progress=progress, ns=ns, **args)

        def finished(f: Future[Any]) -> None:
            now = datetime.now(timezone.utc).isoformat()
            exc = f.exception()
            if exc is not None and not isinstance(exc, Exception):
                exc = WorkerError("Error", str(exc))
            if exc is None:
                result = f.result()
                report = result if isinstance(result, dict) else {"result": result}
                mon.update(job, state="done", done=total, report=report, finished=now)
            else:
                err = _engine_error(exc, self.root)
                mon.update(
                    job,
                    state="failed",
                    error={"code": err.code, "message": err.message},
                    finished=now,
                )

        fut.add_done_callback(finished)
        return job, fut

    async def settle(
        self, job: Job, fut: Future[Any], wait: bool, response: Response
    ) -> dict[str, Any]:
        """The job's answer: 200 with its result when it finished in time, else 202."""
        if wait:
            try:
                result = await asyncio.wait_for(
                    asyncio.shield(asyncio.wrap_future(fut)), self.settings.ingest_wait_s
                )
            except asyncio.TimeoutError:
                pass
            except Exception as exc:  # noqa: BLE001 - mapped to its status and code
                raise _engine_error(exc, self.root) from None
            else:
                return {"job": job.view(), "result": result}
        response.status_code = 202
        return {"job": job.view(), "result": None}

    async def chat(self, op: str, ns: str, **args: Any) -> Any:
        """A conversation operation, run by the writer's conversation thread."""
        self.space(ns)
        fut = self.writer.call(op, ns=ns, **args)
        try:
            return await asyncio.wait_for(
                asyncio.shield(asyncio.wrap_future(fut)), self.settings.query_timeout_s
            )
        except asyncio.TimeoutError:
            raise ApiError(504, "timeout", "the conversation operation took too long") from None
        except ApiError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise _engine_error(exc, self.root) from None

    def close(self) -> None:
        with self._spaces_lock:
            for space in self._spaces.values():
                for r in space.handles:
                    r.close()
            self._spaces.clear()
        self.writer.close()
        self.pool.shutdown(wait=False, cancel_futures=True)


class _Guard:
    """ASGI middleware: a request id, the body size limit, strict UTF-8 and JSON depth.

    The body is read (up to the limit) before any route sees it, so an oversized request is
    refused whole and nothing of it is stored. Every body FastAPI would parse as JSON (by any
    of its ``Content-Type`` headers: ``Application/JSON``, ``application/json;
    charset=utf-8``, ``application/x+json``) must be UTF-8 and nest at most ``max_depth``
    deep; a JSON route sent any other body answers 415 (see ``create_app``).
    """

    def __init__(self, app: Any, max_body: int, max_depth: int) -> None:
        self.app, self.max_body, self.max_depth = app, max_body, max_depth

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = uuid.uuid4().hex[:16]
        scope.setdefault("state", {})["request_id"] = rid
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        # every Content-Type given, not the last: the framework reads the first one. A body
        # without one is checked too: some FastAPI versions read an untyped body as JSON
        types = [v.decode("latin-1") for k, v in scope["headers"] if k.lower() == b"content-type"]
        as_json = not types or any(_is_json(t) for t in types)

        async def reply(status: int, code: str, message: str) -> None:
            await _error_response(status, code, message, rid)(scope, receive, send)

        # the path and query are percent-decoded by the framework with bad bytes replaced:
        # two different non-UTF-8 session ids would both become "\ufffd\ufffd" and share a
        # session, so they are refused here, before any route decodes them
        for part, raw in (("path", scope.get("raw_path")), ("query", scope.get("query_string"))):
            try:
                unquote_to_bytes(bytes(raw or b"")).decode("utf-8")
            except UnicodeDecodeError as exc:
                await reply(
                    400,
                    "invalid_utf8",
                    f"the URL's {part} is not UTF-8 once percent-decoded (byte {exc.start}); "
                    "percent-encode UTF-8",
                )
                return

        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body:
            await reply(
                413,
                "payload_too_large",
                f"the body is {declared} bytes; the limit is {self.max_body}",
            )
            return
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_body:
                await reply(
                    413, "payload_too_large", f"the body is over the limit of {self.max_body} bytes"
                )
                return
        if body and as_json:
            try:
                bytes(body).decode("utf-8")
            except UnicodeDecodeError as exc:
                await reply(
                    400,
                    "invalid_utf8",
                    f"the body is not UTF-8 (byte {exc.start}); send UTF-8 JSON",
                )
                return
            nul = body.find(b"\x00")
            if nul >= 0:  # never in UTF-8 JSON; the JSON parser would read it as UTF-16 or -32
                await reply(
                    400,
                    "invalid_utf8",
                    f"the body holds a NUL byte (byte {nul}): it is not UTF-8 JSON "
                    "(UTF-16 or UTF-32?); send UTF-8 JSON",
                )
                return
            depth = _json_depth(bytes(body))
            if depth > self.max_depth:
                await reply(
                    400,
                    "json_too_deep",
                    f"the JSON nests {depth} deep; the limit is {self.max_depth}",
                )
                return
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        async def send_with_id(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(k.lower() == b"x-request-id" for k, _ in headers):
                    headers.append((b"x-request-id", rid.encode()))
                headers.append((b"x-content-type-options", b"nosniff"))
                message["headers"] = headers
            await send(message)

        await self.app(scope, replay, send_with_id)


def _json_depth(data: bytes) -> int:
    """The deepest nesting of brackets outside strings (linear, no recursion)."""
    depth = deepest = 0
    for m in _JSON_TOKEN.finditer(data):
        tok = m.group()
        if tok in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        elif tok in (b"]", b"}"):
            depth -= 1
    return deepest


def create_app(
    store: str | Path,
    config: Any = None,
    *,
    keys: Mapping[str, str] | None = None,
    no_auth: bool = False,
) -> FastAPI:
    """The HTTP service over the stores under ``store``.

    Args:
        store: The root folder: the ``default`` namespace's store, with other namespaces under
            ``namespaces/``.
        config: A dict shaped like ``pensive.toml`` or a path to one; its ``[server]`` section
            sets limits and timeouts, the rest is how every namespace's store is opened.
        keys: ``{api_key: namespace}``. Each key reads and writes its namespace only.
        no_auth: Serve without keys: every request is in the ``default`` namespace.

    Returns:
        The FastAPI app. Its lifespan starts the writer process and stops it.

    Raises:
        ConfigError: Without keys unless ``no_auth``; on a short key or a bad namespace.
    """
    if not keys and not no_auth:
        raise ConfigError(
            "no API keys: give --keys FILE or PENSIVE_API_KEYS=KEY=namespace, or --no-auth to "
            "serve the default namespace to anyone who can reach the port"
        )
    ring = KeyRing(keys) if keys else None
    svc = _Service(Path(store).expanduser(), config, ring)
    s = svc.settings

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> Any:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(svc.pool, svc.writer.start)
        # every known namespace opened (and the model loaded) before the server says ready
        for ns in ring.namespaces if ring else [DEFAULT_NAMESPACE]:
            await loop.run_in_executor(svc.pool, svc.space, ns)
        try:
            yield
        finally:
            await asyncio.get_running_loop().run_in_executor(None, svc.close)

    app = FastAPI(
        title="Pensive",
        version="1",
        summary="Hybrid retrieval and conversation memory for LLM applications.",
        docs_url=None,  # Swagger UI loads scripts from a CDN; /openapi.json is the schema
        redoc_url=None,
        lifespan=lifespan,
        responses=_ERRORS,
    )
    app.state.service = svc
    app.add_middleware(_Guard, max_body=s.max_body_bytes, max_depth=s.max_json_depth)
    if s.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(s.cors_origins),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "X-API-Key", "Content-Type"],
        )

    def rid(request: Request) -> str:
        return request.scope.get("state", {}).get("request_id", "")

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> Response:
        return _error_response(exc.status, exc.code, exc.message, rid(request), exc.details)

    @app.exception_handler(PensiveError)
    async def _pensive_error(request: Request, exc: PensiveError) -> Response:
        err = _engine_error(exc, svc.root)
        return _error_response(err.status, err.code, err.message, rid(request))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        if isinstance(exc.body, (bytes, bytearray)):
            # a JSON route given a body it did not parse: sent as text, a form, or untyped
            return _error_response(
                415,
                "unsupported_media_type",
                f"this route takes a JSON body; got Content-Type "
                f"{request.headers.get('content-type', '(none)')!r}: send application/json",
                rid(request),
            )
        details = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in exc.errors()
        ]
        if any(d["type"] == "json_invalid" for d in details):
            return _error_response(
                400, "invalid_json", "the body is not valid JSON", rid(request), details
            )
        if details and all(d["type"] == "string_unicode" for d in details):
            # a lone surrogate (a JSON escape like "\udc80") in a typed field: the same
            # code as one in metadata, which the engine's checks refuse
            where = ", ".join(".".join(str(x) for x in d["loc"][1:]) for d in details)
            return _error_response(
                400,
                "invalid_input",
                f"{where}: holds a lone surrogate, which is not Unicode text (it cannot be "
                "encoded as UTF-8); send text that is",
                rid(request),
                details,
            )
        return _error_response(
            422,
            "validation_error",
            "the request does not match the API schema",
            rid(request),
            details,
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 400:
            # the framework could not read the body: JSON the parser refused past the guard
            # (an integer over 4300 digits) or a malformed multipart form
            as_json = _is_json(request.headers.get("content-type", ""))
            code = "invalid_json" if as_json else "invalid_body"
            what = "JSON" if as_json else "form"
            return _error_response(
                400, code, f"the body could not be read as {what}: {exc.detail}", rid(request)
            )
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return _error_response(exc.status_code, code, str(exc.detail), rid(request))

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> Response:
        log.error("request %s failed: %s: %s", rid(request), type(exc).__name__, exc, exc_info=exc)
        return _error_response(
            500, "internal", "internal error; the server log has the details", rid(request)
        )

    bearer = HTTPBearer(auto_error=False, description="Authorization: Bearer API_KEY")
    header_key = APIKeyHeader(name="X-API-Key", auto_error=False)

    def namespace(
        creds: HTTPAuthorizationCredentials | None = Depends(bearer),
        api_key: str | None = Depends(header_key),
    ) -> str:
        if ring is None:
            return DEFAULT_NAMESPACE
        key = api_key or (creds.credentials if creds else None)
        if not key:
            raise ApiError(
                401,
                "unauthorized",
                "missing API key: send Authorization: Bearer KEY or X-API-Key: KEY",
            )
        ns = ring.namespace(key)
        if ns is None:
            raise ApiError(401, "unauthorized", "unknown API key")
        return ns

    Ns = Depends(namespace)

    def check_query(text: str, k: int) -> None:
        if len(text) > s.max_query_chars:
            raise ApiError(
                400,
                "query_too_long",
                f"the query is {len(text)} characters; the limit is {s.max_query_chars}",
            )
        if k > s.max_k:
            raise ApiError(400, "invalid_input", f"k is {k}; this server's limit is {s.max_k}")

    def documents_json(docs: list[Document]) -> list[dict[str, Any]]:
        if len(docs) > s.max_documents:
            raise ApiError(
                413,
                "too_many_documents",
                f"{len(docs)} documents; the limit per request is {s.max_documents}",
            )
        for d in docs:
            if len(d.text) > s.max_document_chars:
                raise ApiError(
                    413,
                    "document_too_large",
                    f"document {d.id!r} has {len(d.text)} characters; the limit is {s.max_document_chars}",
                )
        return [document_json(d) for d in docs]

    # -- health -----------------------------------------------------------------------------------
    @app.get("/health/live", tags=["health"])
    async def live() -> dict[str, str]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    @app.get("/health/ready", tags=["health"])
    async def ready() -> Response:
        """Readiness: the writer process is up (queries and writes can be served)."""
        if not svc.writer.alive:
            return _error_response(
                503, "not_ready", "the writer process is starting or restarting", ""
            )
        return JSONResponse({"status": "ready", "writer_restarts": svc.writer.restarts})

    # -- query ------------------------------------------------------------------------------------
    @app.post("/v1/query", response_model=QueryOut, tags=["query"])
    async def query(body: QueryIn, ns: str = Ns) -> dict[str, Any]:
        """Answer a question through the tiers (L1 cache, L2 hybrid, L3 archive)."""
        check_query(body.text, body.k)

        def work() -> Any:
            with svc.reader(ns) as r:
                res = r.query(
                    body.text,
                    body.k,
                    as_of=body.as_of,
                    filters=body.filters,
                    min_score=body.min_score,
                    pins=body.pins,
                )
            svc.monitor(ns).record_query(body.text, res)
            return res

        res = await svc.blocking(work)
        return result_json(res)

    @app.post("/v1/explain", tags=["query"])
    async def explain(body: ExplainIn, ns: str = Ns) -> dict[str, Any]:
        """Where each expected document or passage ranked in every stage of the question, and
        where it was lost (nothing is cached, learned or counted; see ``pensive explain``)."""
        check_query(body.text, body.k)

        def work() -> dict[str, Any]:
            with svc.reader(ns) as r:
                ex = r.explain(
                    body.text,
                    body.expect,
                    body.k,
                    token_budget=body.token_budget,
                    as_of=body.as_of,
                    filters=body.filters,
                )
            return ex.to_dict()

        return await svc.blocking(work)

    # -- documents --------------------------------------------------------------------------------
    @app.post(
        "/v1/documents",
        tags=["documents"],
        responses={202: {"description": "Accepted; poll the job"}},
    )
    async def ingest(body: IngestIn, response: Response, ns: str = Ns) -> dict[str, Any]:
        """Ingest documents (the same id replaces); 200 when committed, 202 with a job if slower."""
        try:
            docs = [Document(d.id, d.text, d.metadata, d.timestamp) for d in body.documents]
        except InputError as exc:
            raise ApiError(400, "invalid_input", str(exc)) from None
        payload = documents_json(docs)
        job, fut = await svc.blocking(
            lambda: svc.submit(
                ns,
                "ingest",
                "ingest",
                len(payload),
                documents=payload,
                archive_only=body.archive_only,
            )
        )
        return await svc.settle(job, fut, body.wait, response)

    @app.post(
        "/v1/documents/upload",
        tags=["documents"],
        responses={202: {"description": "Accepted; poll the job"}},
    )
    async def upload(
        response: Response,
        files: list[UploadFile] = File(..., description=".txt .md .jsonl .html files"),
        archive_only: bool = Form(False),
        wait: bool = Form(True),
        ns: str = Ns,
    ) -> dict[str, Any]:
        """Ingest uploaded files; a document's id is its file name (JSONL lines carry their own)."""
        docs: list[Document] = []
        problems: list[dict[str, Any]] = []
        with tempfile.TemporaryDirectory(prefix="pensive-upload-") as tmp:
            for f in files:
                raw = f.filename or ""
                name = _SAFE_NAME.sub("_", PureWindowsPath(PurePosixPath(raw).name).name).strip(
                    " ."
                )
                if not name:
                    raise ApiError(
                        400, "invalid_input", f"file name {raw!r} is empty once made safe"
                    )
                if Path(name).suffix.lower() not in SUFFIXES:
                    raise ApiError(
                        415, "unsupported_media_type", f"{raw!r}: use one of {', '.join(SUFFIXES)}"
                    )
                path = Path(tmp) / name
                path.write_bytes(await f.read())
                try:
                    # named as uploaded, in messages and metadata["source"] alike: never the
                    # folder the server kept the file in meanwhile
                    for item in load_file(path, Path(tmp), source=name):
                        if isinstance(item, InputError):
                            problems.append({"file": name, "message": str(item)})
                        else:
                            docs.append(item)
                except InputError as exc:
                    problems.append({"file": name, "message": str(exc)})
                except OSError as exc:
                    problems.append({"file": name, "message": f"{name}: {exc.strerror}"})
        if problems:
            raise ApiError(
                400, "invalid_input", "some files could not be read; nothing was stored", problems
            )
        if not docs:
            raise ApiError(400, "invalid_input", "the files hold no documents")
        payload = documents_json(docs)
        job, fut = await svc.blocking(
            lambda: svc.submit(
                ns, "upload", "ingest", len(payload), documents=payload, archive_only=archive_only
            )
        )
        return await svc.settle(job, fut, wait, response)

    @app.get("/v1/documents/{doc_id:" + ANY_ID + "}", tags=["documents"])
    async def get_document(doc_id: str, ns: str = Ns) -> dict[str, Any]:
        """A stored document, whole."""

        def work() -> Document:
            with svc.reader(ns) as r:
                return r.get(doc_id)

        return document_json(await svc.blocking(work))

    @app.delete("/v1/documents/{doc_id:" + ANY_ID + "}", tags=["documents"])
    async def delete_document(doc_id: str, response: Response, ns: str = Ns) -> dict[str, Any]:
        """Delete a document and all its passages."""
        job, fut = await svc.blocking(lambda: svc.submit(ns, "delete", "delete", 1, doc_id=doc_id))
        return await svc.settle(job, fut, True, response)

    @app.post("/v1/reembed", tags=["documents"], responses={202: {"description": "Poll the job"}})
    async def reembed(body: ReembedIn, response: Response, ns: str = Ns) -> dict[str, Any]:
        """Re-embed the namespace with another model, blue/green (docs/reembed.md), as a job:
        queries keep the old index until the switch; ``report.failed`` names refused documents."""
        if body.embedder is not None and is_class_path(body.embedder):
            raise ApiError(400, "invalid_input", "the server takes model names and folders only")

        def start() -> tuple[Any, Any]:
            with svc.reader(ns) as r:
                total = r.components.archive.counts()[0]
            options = body.model_dump(exclude={"wait"})
            return svc.submit(ns, "reembed", "reembed", total, **options)

        job, fut = await svc.blocking(start)
        return await svc.settle(job, fut, body.wait, response)

    @app.get("/v1/jobs", tags=["documents"])
    async def jobs(ns: str = Ns) -> dict[str, Any]:
        """The namespace's recent ingest and delete jobs, newest first."""
        mon = await svc.blocking(lambda: svc.monitor(ns))
        return {"jobs": [j.view() for j in mon.jobs()]}

    @app.get("/v1/jobs/{job_id}", tags=["documents"])
    async def job(job_id: str, ns: str = Ns) -> dict[str, Any]:
        """One job: state, progress, report or error."""
        mon = await svc.blocking(lambda: svc.monitor(ns))
        found = mon.job(job_id)
        if found is None or found.namespace != ns:
            raise ApiError(404, "not_found", f"no job {job_id!r}")
        return found.view()

    # -- conversations ----------------------------------------------------------------------------
    @app.get("/v1/conversations", tags=["conversations"])
    async def sessions(user: str | None = None, ns: str = Ns) -> dict[str, Any]:
        """The namespace's conversation sessions (of one user, if given)."""
        return {"sessions": await svc.chat("chat.list", ns, user=user)}

    @app.post("/v1/conversations/{session_id}/turns", tags=["conversations"])
    async def add_turn(session_id: str, body: TurnIn, ns: str = Ns) -> dict[str, Any]:
        """Add a turn to a session (created on first use)."""
        turn = await svc.chat(
            "chat.add",
            ns,
            session=session_id,
            user=body.user,
            role=body.role,
            text=body.text,
            timestamp=to_iso(body.timestamp),
            metadata=body.metadata,
        )
        return {"turn": turn}

    @app.get("/v1/conversations/{session_id}/turns", tags=["conversations"])
    async def list_turns(session_id: str, limit: int | None = None, ns: str = Ns) -> dict[str, Any]:
        """The session's turns in order (the last ``limit``)."""
        if limit is not None and not 0 <= limit <= 100_000:
            raise ApiError(400, "invalid_input", "limit must be between 0 and 100000")
        return {"turns": await svc.chat("chat.turns", ns, session=session_id, limit=limit)}

    @app.post("/v1/conversations/{session_id}/recall", tags=["conversations"])
    async def recall(session_id: str, body: RecallIn, ns: str = Ns) -> dict[str, Any]:
        """Recall the session's turns (or its user's sessions') for a query."""
        check_query(body.query, body.k)
        hits = await svc.chat(
            "chat.recall",
            ns,
            session=session_id,
            user=body.user,
            query=body.query,
            k=body.k,
            scope=body.scope,
            as_of=to_iso(body.as_of),
        )
        return {"hits": hits}

    @app.post("/v1/conversations/{session_id}/context", tags=["conversations"])
    async def context(session_id: str, body: ContextIn, ns: str = Ns) -> dict[str, Any]:
        """A prompt-ready context for a query, within a token budget."""
        check_query(body.query, 1)
        return await svc.chat(
            "chat.context",
            ns,
            session=session_id,
            user=body.user,
            query=body.query,
            token_budget=body.token_budget,
            strategy=body.strategy,
            template=body.template,
        )

    @app.delete("/v1/conversations/{session_id}", tags=["conversations"])
    async def clear(session_id: str, ns: str = Ns) -> dict[str, Any]:
        """Forget a session."""
        return await svc.chat("chat.clear", ns, session=session_id)

    # -- stats, config, dashboard ------------------------------------------------------------------
    @app.get("/v1/stats", tags=["stats"])
    async def stats(ns: str = Ns) -> dict[str, Any]:
        """The namespace's store: counts, sizes, routing figures."""

        def work() -> dict[str, Any]:
            with svc.reader(ns) as r:
                out = r.stats()
            out.pop("path", None)  # where the server keeps files is not the client's business
            return {**out, "server": {"namespace": ns, "writer_restarts": svc.writer.restarts}}

        return json.loads(json.dumps(await svc.blocking(work), default=str))

    @app.get("/v1/config", tags=["stats"])
    async def config_view(ns: str = Ns) -> dict[str, Any]:
        """The namespace's effective config, secrets redacted."""

        def work() -> dict[str, Any]:
            with svc.reader(ns) as r:
                return {
                    "namespace": ns,
                    "auth": "keys" if ring else "none",
                    "config": redacted(r.config),
                }

        return await svc.blocking(work)

    @app.get("/v1/dashboard", tags=["stats"])
    async def dashboard_data(ns: str = Ns) -> dict[str, Any]:
        """What the dashboard shows: per-tier counts and latency, last queries, ingest jobs."""

        def work() -> dict[str, Any]:
            mon = svc.monitor(ns)
            with svc.reader(ns) as r:
                counts = r.stats(disk=False)
                docs, chunks = counts["documents"], counts["chunks"]
            q = mon.queries()
            tiers = q.pop("tiers")
            jobs = [j.view() for j in mon.jobs()]
            active = next((j for j in reversed(jobs) if j["state"] in ("queued", "running")), None)
            return {
                "namespace": ns,
                "updated": datetime.now(timezone.utc).isoformat(),
                "queries": q,
                "tiers": tiers,
                "recent": mon.recent(),
                "ingest": {
                    "active": active,
                    "jobs": jobs[:10],
                    "documents": docs,
                    "chunks": chunks,
                },
            }

        return await svc.blocking(work)

    @app.get("/dashboard", response_class=HTMLResponse, include_in_schema=False)
    async def dashboard() -> HTMLResponse:
        if not _DASHBOARD.is_file():
            raise ApiError(404, "not_found", "the dashboard page is not installed")
        return HTMLResponse(
            _DASHBOARD.read_text(encoding="utf-8"),
            headers={
                "content-security-policy": "default-src 'self'; script-src 'self' 'unsafe-inline'; "
                "style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'",
                "referrer-policy": "no-referrer",
            },
        )

    return app
