"""``pensive mcp``: a store served to MCP hosts (Claude Desktop, IDEs, agents) as tools.

Two transports (needs ``pip install "pensive[mcp]"``):

- **stdio** (the default): the host starts ``pensive mcp --store DIR`` and speaks MCP over its
  stdin and stdout. One store, the ``default`` namespace, as ``pensive serve`` without keys.
- **streamable HTTP** (``--http``): API keys are required, taken as ``pensive serve`` takes
  them (``--keys FILE`` or ``PENSIVE_API_KEYS``; ``Authorization: Bearer KEY`` or
  ``X-API-Key: KEY``), each key reading and writing its own namespace's store only. A request
  without a known key is refused with 401 before the MCP layer sees it.

The tools are ``search``, ``get_document``, ``ingest``, ``delete``, ``remember``, ``recall``,
``context``, ``forget`` and ``stats``. Their arguments are checked by the same strict models as
the HTTP API's bodies (nothing coerced, unknown fields refused) and then by the core's
validators, so bad input gets the messages the HTTP API gives. A refused call comes back as a
tool error (``isError``) whose text starts with the HTTP API's error code (``invalid_input:``,
``not_found:``...); nothing is stored, and the server goes on serving.

The process holds each store it serves open for writing, so it cannot share a store with a
running ``pensive serve`` or ``pensive ingest``: stop those first (or point them elsewhere).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)

from .errors import (
    BackendError,
    ConfigError,
    InputError,
    MissingDependencyError,
    NotFoundError,
    PensiveError,
)
from .memory.templates import served_choice
from .namespaces import DEFAULT_NAMESPACE, hide_root, namespace_path
from .server.keys import KeyRing, load_keys, presented_key
from .server.schemas import ContextIn, DocumentIn, IsoTime, MinScore, PinIds, RecallIn, TurnIn
from .types import Document
from .wire import document_json, hit_json, result_json, turn_json

if TYPE_CHECKING:
    from .engine import Pensive

__all__ = ["TOOLS", "KeyGate", "Stores", "build_server", "call_tool", "run_stdio", "run_http"]

log = logging.getLogger(__name__)

_HINT = "the MCP server"


def _require_mcp() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError("mcp", "mcp", _HINT) from exc


# -- arguments: the HTTP API's bodies, plus what names the session or document --------------------
class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SearchArgs(_Args):
    """``search``: the HTTP API's query body, with the question called ``query``."""

    query: StrictStr = Field(min_length=1, description="The question or keywords to search for.")
    k: StrictInt = Field(5, ge=1, le=1000, description="How many passages to return.")
    as_of: IsoTime | None = Field(
        None,
        description="ISO-8601 time: only documents timestamped at or before it "
        "(documents without a timestamp always count).",
    )
    filters: dict[StrictStr, Any] | None = Field(
        None,
        description='Mongo-style metadata filter, e.g. {"source": "q3.pdf"} or '
        '{"year": {"$gte": 2020}}; "doc_id" is a field too.',
    )
    min_score: MinScore | None = Field(
        None, description="Drop hits whose match (how likely each answers, 0 to 1) is below this."
    )
    pins: PinIds | None = Field(
        None,
        description="Document ids to include whatever the search finds (marked pinned, "
        "ahead of the k hits).",
    )


class DocumentArgs(_Args):
    id: StrictStr = Field(min_length=1, max_length=1024, description="The document's id.")


class IngestArgs(_Args):
    documents: list[DocumentIn] | None = Field(
        None,
        min_length=1,
        description="Documents to store: {id, text, metadata?, timestamp?}. "
        "An id already stored is replaced.",
    )
    paths: list[StrictStr] | None = Field(
        None,
        min_length=1,
        description="Absolute paths of files or folders on the server's machine (.txt .md "
        ".jsonl .html, .pdf where installed), folders walked recursively; a document's id is "
        "its path relative to the folder given. Only over stdio.",
    )
    archive_only: StrictBool = Field(
        False, description="Keep in the archive only (found by exact terms, not embedded)."
    )

    @model_validator(mode="after")
    def _one_source(self) -> IngestArgs:
        if (self.documents is None) == (self.paths is None):
            raise ValueError("give either documents or paths (one of them, not both)")
        return self


_SESSION = Field(
    min_length=1, max_length=256, description="The conversation session's id (any string)."
)


class RememberArgs(TurnIn):
    session_id: StrictStr = _SESSION
    kind: Literal["turn", "fact"] = Field(
        "turn",
        description='"turn": one message of the conversation (role + text). "fact": a note '
        "pinned to the session (an instruction, a fact about the user) that every context "
        "carries.",
    )
    role: StrictStr = Field(
        "user",
        min_length=1,
        max_length=64,
        description="Who spoke: user, assistant, system, or a name (turns only).",
    )


class RecallArgs(RecallIn):
    session_id: StrictStr = _SESSION


class ContextArgs(ContextIn):
    session_id: StrictStr = _SESSION


class ForgetArgs(_Args):
    session_id: StrictStr = _SESSION


class StatsArgs(_Args):
    pass


# -- the stores a server holds ---------------------------------------------------------------------
class Stores:
    """The stores of one root, opened for writing on first use and kept open.

    Args:
        root: The root folder (the ``default`` namespace; others under ``namespaces/``).
        config: A ``pensive.toml`` path or dict, applied to every store.
        remote: Serving remote clients (HTTP): paths are cut out of messages and stats, the
            ``[server]`` limits apply, and files on this machine cannot be ingested by path.
    """

    def __init__(self, root: Path, config: Any = None, *, remote: bool = False) -> None:
        from .config import load_config, read_config_source

        self.root = Path(root).expanduser()
        self.raw_config = read_config_source(config)
        self.settings = load_config(self.raw_config).server
        self.remote = remote
        self._open: dict[str, Pensive] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._embedder: Any = None

    def open(self, ns: str) -> Pensive:
        """The namespace's store (created if new)."""
        from .engine import Pensive

        with self._guard:
            got = self._open.get(ns)
            if got is None:
                got = Pensive(
                    namespace_path(self.root, ns), self.raw_config, embedder=self._embedder
                )
                if self._embedder is None and got.stats(disk=False)["index"] is not None:
                    self._embedder = got.embedder  # one model for every namespace
                self._open[ns] = got
                self._locks[ns] = threading.Lock()
            return got

    def call(self, ns: str, fn: Callable[[Pensive], Any]) -> Any:
        """Run ``fn`` on the namespace's store, one call at a time per store."""
        p = self.open(ns)
        with self._locks[ns]:
            return fn(p)

    def close(self) -> None:
        """Close every store."""
        with self._guard:
            for p in self._open.values():
                p.close()
            self._open.clear()


# -- the tools ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Tool:
    name: str
    args: type[BaseModel]
    description: str
    run: Callable[[Stores, Pensive, Any], Any]
    read_only: bool = False
    destructive: bool = False


def _limit(stores: Stores, query: str, k: int = 1) -> None:
    """A remote client's query within the ``[server]`` limits, as the HTTP API checks it."""
    s = stores.settings
    if stores.remote:
        if len(query) > s.max_query_chars:
            raise InputError(
                f"the query is {len(query)} characters; the limit is {s.max_query_chars}"
            )
        if k > s.max_k:
            raise InputError(f"k is {k}; this server's limit is {s.max_k}")


def _search(stores: Stores, p: Pensive, a: SearchArgs) -> dict[str, Any]:
    _limit(stores, a.query, a.k)
    res = p.query(
        a.query, a.k, as_of=a.as_of, filters=a.filters, min_score=a.min_score, pins=a.pins
    )
    return result_json(res)


def _get(stores: Stores, p: Pensive, a: DocumentArgs) -> dict[str, Any]:
    return document_json(p.get(a.id))


def _ingest(stores: Stores, p: Pensive, a: IngestArgs) -> dict[str, Any]:
    if a.paths is not None:
        if stores.remote:
            raise InputError(
                "paths name files on the server's machine and are refused over HTTP; send the "
                "documents' text in documents instead"
            )
        report = p.ingest_path(*a.paths, archive_only=a.archive_only)
        out = dict(report.__dict__)
        out["errors"] = [{"source": src, "message": msg} for src, msg in report.errors]
        return out
    assert a.documents is not None
    # every document is checked (by the same constructor as the Python API's) before any is stored
    docs = [Document(d.id, d.text, d.metadata, d.timestamp) for d in a.documents]
    s = stores.settings
    if stores.remote:
        if len(docs) > s.max_documents:
            raise InputError(f"{len(docs)} documents; the limit per call is {s.max_documents}")
        for d in docs:
            if len(d.text) > s.max_document_chars:
                raise InputError(
                    f"document {d.id!r} has {len(d.text)} characters; the limit is "
                    f"{s.max_document_chars}"
                )
    report = p.ingest(docs, archive_only=a.archive_only)
    return {k: v for k, v in report.__dict__.items() if k != "errors"}


def _delete(stores: Stores, p: Pensive, a: DocumentArgs) -> dict[str, Any]:
    return {"id": a.id, "chunks": p.delete(a.id)}


def _remember(stores: Stores, p: Pensive, a: RememberArgs) -> dict[str, Any]:
    from .memory.turns import check_turn
    from .validate import check_text

    if a.kind == "fact":
        check_text(a.text, "a fact")
        if a.metadata or a.timestamp is not None:
            raise InputError("a fact takes text only (no metadata or timestamp)")
        conv = p.conversation(a.session_id, user=a.user)
        return {"session_id": a.session_id, "fact": conv.pin(a.text)}
    # checked before the session is opened: a refused turn creates no session either
    check_turn({"role": a.role, "text": a.text, "timestamp": a.timestamp, "metadata": a.metadata})
    conv = p.conversation(a.session_id, user=a.user)
    turn = conv.add(a.role, a.text, a.timestamp, a.metadata)
    return {"session_id": a.session_id, "turn": turn_json(turn)}


def _recall(stores: Stores, p: Pensive, a: RecallArgs) -> dict[str, Any]:
    _limit(stores, a.query, a.k)
    conv = p.conversation(a.session_id, user=a.user, create=False)
    hits = conv.recall(a.query, a.k, scope=a.scope, as_of=a.as_of)
    return {"session_id": a.session_id, "hits": [hit_json(h) for h in hits]}


def _context(stores: Stores, p: Pensive, a: ContextArgs) -> dict[str, Any]:
    _limit(stores, a.query)
    strategy, template = served_choice(a.strategy, a.template)  # names or text, never paths
    conv = p.conversation(a.session_id, user=a.user, create=False)
    built = conv.build(a.query, a.token_budget, strategy=strategy, template=template)
    return {"text": built.text, "tokens": built.tokens, "budget": built.budget}


def _forget(stores: Stores, p: Pensive, a: ForgetArgs) -> dict[str, Any]:
    n = p.conversation(a.session_id, create=False).clear()
    return {"session_id": a.session_id, "cleared": n}


def _stats(stores: Stores, p: Pensive, a: StatsArgs) -> dict[str, Any]:
    out = p.stats()
    if stores.remote:
        out.pop("path", None)
    return json.loads(json.dumps(out, default=str))


TOOLS: dict[str, _Tool] = {
    t.name: t
    for t in (
        _Tool(
            "search",
            SearchArgs,
            "Search the store's documents for passages relevant to a question. Returns "
            "{tier, confidence, match, weak, hits: [{doc_id, chunk_id (the passage id), text, "
            "score, match, pinned, metadata, timestamp, sources}]}, best first. weak=true "
            "means no hit is a likely answer: say you do not know rather than use them. Use "
            "get_document with a hit's doc_id to read the whole document.",
            _search,
            read_only=True,
        ),
        _Tool(
            "get_document",
            DocumentArgs,
            "Read one stored document whole: {id, text, metadata, timestamp}. An unknown id "
            "is a not_found error.",
            _get,
            read_only=True,
        ),
        _Tool(
            "ingest",
            IngestArgs,
            "Store documents so search can find them: either documents (each {id, text, "
            "metadata?, timestamp?}; the same id replaces the stored one) or paths of files "
            "and folders on the server's machine. Nothing is stored when any document is "
            "refused. Returns counts of added, updated and skipped documents.",
            _ingest,
        ),
        _Tool(
            "delete",
            DocumentArgs,
            "Delete a stored document and all its passages. Returns how many passages went.",
            _delete,
            destructive=True,
        ),
        _Tool(
            "remember",
            RememberArgs,
            "Add to a conversation session's long-term memory (the session is created on its "
            'first use): kind "turn" (default) stores one message with its role; kind "fact" '
            "pins a note that every context of the session carries.",
            _remember,
        ),
        _Tool(
            "recall",
            RecallArgs,
            'The turns of a session (or, with scope "user", of all its user\'s sessions) that '
            "bear on a query, best first: hits with text, score and metadata.role/seq.",
            _recall,
            read_only=True,
        ),
        _Tool(
            "context",
            ContextArgs,
            "A prompt-ready context for answering a query within a token budget: the "
            "session's pinned facts, summaries, recalled and recent turns, and passages from "
            "the store; strategy (concatenate, weighted, recency) and template (qa, research, "
            "conversational) shape how it reads. Returns {text, tokens, budget}.",
            _context,
            read_only=True,
        ),
        _Tool(
            "forget",
            ForgetArgs,
            "Forget a whole session: its turns, facts, index and summaries (the session stays, "
            "empty). Returns how many turns were forgotten.",
            _forget,
            destructive=True,
        ),
        _Tool(
            "stats",
            StatsArgs,
            "The store's counts (documents, passages, vectors), sizes, and query routing figures.",
            _stats,
            read_only=True,
        ),
    )
}

# what each refusal of the core becomes: the HTTP API's codes
_CODES: tuple[tuple[type[Exception], str], ...] = (
    (InputError, "invalid_input"),
    (NotFoundError, "not_found"),
    (ConfigError, "config_error"),
    (MissingDependencyError, "missing_dependency"),
    (BackendError, "backend_unavailable"),
    (PensiveError, "store_unavailable"),
)


def _invalid(exc: ValidationError) -> str:
    parts = []
    for e in exc.errors(include_url=False):
        where = ".".join(str(x) for x in e["loc"]) or "arguments"
        parts.append(f"{where}: {e['msg']}")
    return "; ".join(parts)


def call_tool(stores: Stores, ns: str, name: str, arguments: Any) -> tuple[dict[str, Any], bool]:
    """Run one tool call (blocking).

    Args:
        stores: The stores served.
        ns: The namespace the call is in.
        name: The tool.
        arguments: The call's arguments as sent.

    Returns:
        ``(result, is_error)``: the tool's JSON result, or ``{"error": {"code", "message"}}``.
    """
    tool = TOOLS.get(name)
    if tool is None:
        return _error("unknown_tool", f"no tool {name!r}; the tools are {', '.join(TOOLS)}")
    try:
        args = tool.args.model_validate(arguments or {})
    except ValidationError as exc:
        return _error("validation_error", f"{name}: {_invalid(exc)}")
    try:
        return stores.call(ns, lambda p: tool.run(stores, p, args)), False
    except Exception as exc:  # noqa: BLE001 - every failure is a tool error, never a crash
        for cls, code in _CODES:
            if isinstance(exc, cls):
                message = hide_root(str(exc), stores.root) if stores.remote else str(exc)
                return _error(code, message)
        log.error("tool %s failed: %s: %s", name, type(exc).__name__, exc, exc_info=exc)
        return _error("internal", "internal error; the server log has the details")


def _error(code: str, message: str) -> tuple[dict[str, Any], bool]:
    return {"error": {"code": code, "message": message}}, True


# -- the MCP server -------------------------------------------------------------------------------
def build_server(stores: Stores, ring: KeyRing | None = None) -> Any:
    """The MCP server (``mcp.server.lowlevel.Server``) of the tools over ``stores``.

    Args:
        stores: The stores to serve.
        ring: API keys -> namespaces (HTTP); None serves the ``default`` namespace.

    Raises:
        MissingDependencyError: If the ``mcp`` extra is not installed.
    """
    _require_mcp()
    import anyio
    import mcp.types as types
    from mcp.server import Server

    from . import __version__

    tools = [
        types.Tool(
            name=t.name,
            description=t.description,
            input_schema=t.args.model_json_schema(),
            annotations=types.ToolAnnotations(
                read_only_hint=t.read_only,
                destructive_hint=t.destructive,
                idempotent_hint=t.read_only,
                open_world_hint=False,
            ),
        )
        for t in TOOLS.values()
    ]

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=tools)

    async def on_call(ctx: Any, params: Any) -> Any:
        ns: str | None = DEFAULT_NAMESPACE
        if ring is not None:
            request = getattr(ctx, "request", None)
            key = None if request is None else presented_key(request.headers)
            ns = None if key is None else ring.namespace(key)
        if ns is None:  # the gate refuses these first: this is a second lock on the door
            out, failed = _error("unauthorized", "missing or unknown API key")
        else:
            out, failed = await anyio.to_thread.run_sync(
                call_tool, stores, ns, params.name, params.arguments
            )
        text = json.dumps(out, ensure_ascii=False, default=str)
        if failed:
            text = f"{out['error']['code']}: {out['error']['message']}"
        return types.CallToolResult(
            content=[types.TextContent(text=text)], structured_content=out, is_error=failed
        )

    return Server(
        "pensive",
        version=__version__,
        instructions="Pensive: hybrid search over stored documents and long-term memory of "
        "conversation sessions. search finds passages; remember/recall/context keep and use "
        "what was said in a session.",
        on_list_tools=list_tools,
        on_call_tool=on_call,
    )


_UNAUTHORIZED = -32001  # JSON-RPC's range for errors a server defines


class KeyGate:
    """ASGI middleware: every HTTP request must present a known API key, else 401 with a
    JSON-RPC error whose ``data.code`` is ``unauthorized``.

    Args:
        app: The MCP app.
        ring: The keys.
    """

    def __init__(self, app: Any, ring: KeyRing) -> None:
        self.app, self.ring = app, ring

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {
                k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]
            }
            key = presented_key(headers)
            message = None
            if not key:
                message = "missing API key: send Authorization: Bearer KEY or X-API-Key: KEY"
            elif self.ring.namespace(key) is None:
                message = "unknown API key"
            if message is not None:
                # a JSON-RPC error (id null: the request is not read), so an MCP client shows
                # the message rather than a bare status
                body = json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": None,
                        "error": {
                            "code": _UNAUTHORIZED,
                            "message": f"unauthorized: {message}",
                            "data": {"code": "unauthorized"},
                        },
                    }
                )
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b"Bearer"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body.encode()})
                return
        await self.app(scope, receive, send)


def run_stdio(root: Path, config: Any = None) -> None:
    """Serve the ``default`` namespace of ``root`` over stdin/stdout until the host hangs up.

    Raises:
        MissingDependencyError: If the ``mcp`` extra is not installed.
        PensiveError: If the store cannot be opened (another process writing it, a bad config).
    """
    _require_mcp()
    import anyio
    from mcp.server.stdio import stdio_server

    stores = Stores(root, config)
    try:
        stores.open(DEFAULT_NAMESPACE)  # a store that cannot open fails now, not at a call
        server = build_server(stores)

        async def serve() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(serve)
    finally:
        stores.close()


def run_http(
    root: Path,
    config: Any = None,
    *,
    host: str | None = None,
    port: int | None = None,
    keys_file: str | os.PathLike[str] | None = None,
    log_level: str = "info",
) -> None:
    """Serve the namespaces of ``root`` over streamable HTTP (at ``/mcp``) until interrupted.

    Raises:
        ConfigError: Without API keys.
        MissingDependencyError: If the ``mcp`` extra is not installed.
    """
    _require_mcp()
    import uvicorn

    keys = load_keys(keys_file)
    if not keys:
        raise ConfigError(
            "pensive mcp --http needs API keys: give --keys FILE or PENSIVE_API_KEYS=KEY=namespace "
            "(each key reads and writes its namespace only)"
        )
    ring = KeyRing(keys)
    stores = Stores(root, config, remote=True)
    s = stores.settings
    try:
        for ns in ring.namespaces:
            stores.open(ns)
        server = build_server(stores, ring)
        app = server.streamable_http_app(
            host=host or s.host, max_request_body_size=s.max_body_bytes
        )
        uvicorn.run(
            KeyGate(app, ring),
            host=host or s.host,
            port=s.port if port is None else port,
            log_level=log_level,
            server_header=False,
        )
    finally:
        stores.close()
