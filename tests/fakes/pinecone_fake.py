"""A loopback fake of the Pinecone REST service, for tests that cannot reach Pinecone.

It speaks the wire protocol the official SDK uses, on ``127.0.0.1`` with an ephemeral port,
from a background thread:

* data plane: ``POST /vectors/upsert``, ``POST /query``, ``GET /vectors/fetch``,
  ``POST /vectors/delete``, ``POST /describe_index_stats``;
* control plane: ``GET /indexes``, ``GET /indexes/{name}``, ``POST /indexes``,
  ``DELETE /indexes/{name}``.

Every index keeps per-namespace records in memory and scores queries by cosine similarity.
Metadata filters follow Pinecone's language (``$eq $ne $gt $gte $lt $lte $in $nin $exists
$and $or`` and implicit equality), including its treatment of a missing field: ``$ne`` and
``$nin`` match records that lack the field, the other comparisons do not. Limits the service
enforces (1000 vectors or 2 MB per upsert, 1000 ids per fetch or delete, ``topK`` at most
10000, the index dimension) answer 400 or 413 with Pinecone's JSON error bodies, a delete in a
namespace that holds nothing answers 404, and a request without an ``Api-Key`` header 401.

The root URL serves the control plane and the data plane of the index named at start (the
"default index"); an index created through the control plane is served under
``/index/{name}``, which is the ``host`` its description reports.

Tests can make the next requests fail (:meth:`PineconeFake.fail_next`) and read every request
made (:attr:`PineconeFake.requests`).
"""

from __future__ import annotations

import json
import math
import re
import socket
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import numpy as np

__all__ = ["FakeIndex", "PineconeFake", "RecordedRequest", "serve_pinecone_fake"]

MAX_UPSERT_VECTORS = 1000
MAX_REQUEST_BYTES = 2 * 1024 * 1024
MAX_IDS = 1000
MAX_TOP_K = 10_000
MAX_METADATA_BYTES = 40 * 1024
MAX_ID_LENGTH = 512
DEFAULT_NAMESPACE_LABEL = "__default__"  # how the service lists the "" namespace in stats
_INDEX_NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,43}[a-z0-9])?$")
# API versions from here on (the 2026-01 alpha, 2026-07) describe indexes by schema/deployment;
# earlier ones by dimension/metric/spec.
_NEW_API = "2026-01"


class ApiFailure(Exception):
    """An error response: HTTP status and the JSON body the service would send."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(status, body)
        self.status = status
        self.body = body


def _data_error(status: int, message: str) -> ApiFailure:
    # The data plane answers in gRPC-gateway style: a numeric gRPC code and a message.
    grpc_code = {400: 3, 401: 16, 404: 5, 413: 3, 429: 8, 503: 14}.get(status, 2)
    return ApiFailure(status, {"code": grpc_code, "message": message, "details": []})


def _control_error(status: int, code: str, message: str) -> ApiFailure:
    return ApiFailure(status, {"error": {"code": code, "message": message}, "status": status})


@dataclass
class RecordedRequest:
    """One request the fake received (recorded before any injected failure)."""

    method: str
    path: str
    index: str | None
    body: Any
    query: dict[str, list[str]]
    api_version: str
    status: int = 0


@dataclass
class FakeIndex:
    """One serverless index: a dimension, a metric and namespaces of records."""

    name: str
    dimension: int
    host: str
    metric: str = "cosine"
    cloud: str = "aws"
    region: str = "us-east-1"
    # namespace -> id -> (float32 values, metadata)
    namespaces: dict[str, dict[str, tuple[np.ndarray, dict[str, Any]]]] = field(
        default_factory=dict
    )

    def count(self, namespace: str) -> int:
        """Records stored in ``namespace``."""
        return len(self.namespaces.get(namespace, {}))


# -- filters --------------------------------------------------------------------------------


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _same(a: Any, b: Any) -> bool:
    if _is_num(a) and _is_num(b):
        return bool(a == b)
    return type(a) is type(b) and a == b


def _check_filter(spec: Any) -> None:
    """Reject what the service rejects, with a 400."""
    if not isinstance(spec, Mapping):
        raise _data_error(400, "Invalid filter: a filter must be a JSON object")
    for key, value in spec.items():
        if key in ("$and", "$or"):
            if not isinstance(value, list) or not value:
                raise _data_error(400, f"Invalid filter: {key} takes a non-empty array")
            for sub in value:
                _check_filter(sub)
        elif key.startswith("$"):
            raise _data_error(400, f"Invalid filter: unknown top-level operator {key}")
        elif isinstance(value, Mapping):
            if not value:
                raise _data_error(400, f"Invalid filter: empty operator object on {key}")
            for op, arg in value.items():
                _check_operator(key, op, arg)
        else:
            _check_operator(key, "$eq", value)


def _check_operator(fieldname: str, op: str, arg: Any) -> None:
    where = f"Invalid filter on field {fieldname!r}"
    if op in ("$eq", "$ne"):
        if not isinstance(arg, (str, int, float, bool)):
            raise _data_error(400, f"{where}: {op} takes a string, number or boolean")
    elif op in ("$gt", "$gte", "$lt", "$lte"):
        if not _is_num(arg):
            raise _data_error(400, f"{where}: {op} takes a number")
    elif op in ("$in", "$nin"):
        if not isinstance(arg, list) or not arg:
            raise _data_error(400, f"{where}: {op} takes a non-empty array")
        if len(arg) > 10_000:
            raise _data_error(400, f"{where}: {op} takes at most 10000 values")
        if not all(isinstance(v, (str, int, float, bool)) for v in arg):
            raise _data_error(400, f"{where}: {op} takes an array of strings or numbers")
    elif op == "$exists":
        if not isinstance(arg, bool):
            raise _data_error(400, f"{where}: $exists takes a boolean")
    else:
        raise _data_error(400, f"{where}: unknown operator {op}")


def _op_matches(present: bool, value: Any, op: str, arg: Any) -> bool:
    if op == "$exists":
        return present is arg
    # A list-valued field (a list of strings) matches when any element does.
    values = value if isinstance(value, list) else [value]
    if op == "$eq":
        return present and any(_same(v, arg) for v in values)
    if op == "$ne":
        return not present or not any(_same(v, arg) for v in values)
    if op == "$in":
        return present and any(_same(v, a) for v in values for a in arg)
    if op == "$nin":
        return not present or not any(_same(v, a) for v in values for a in arg)
    if not present or not _is_num(value):
        return False
    return bool(
        (op == "$gt" and value > arg)
        or (op == "$gte" and value >= arg)
        or (op == "$lt" and value < arg)
        or (op == "$lte" and value <= arg)
    )


def filter_matches(spec: Mapping[str, Any] | None, metadata: Mapping[str, Any]) -> bool:
    """Whether a record with ``metadata`` passes a (checked) Pinecone filter."""
    if not spec:
        return True
    for key, value in spec.items():
        if key == "$and":
            if not all(filter_matches(s, metadata) for s in value):
                return False
        elif key == "$or":
            if not any(filter_matches(s, metadata) for s in value):
                return False
        else:
            ops = value if isinstance(value, Mapping) else {"$eq": value}
            present = key in metadata
            got = metadata.get(key)
            if not all(_op_matches(present, got, op, arg) for op, arg in ops.items()):
                return False
    return True


# -- the service ----------------------------------------------------------------------------


def _namespace(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _data_error(400, "namespace must be a string")
    return "" if value == DEFAULT_NAMESPACE_LABEL else value


def _check_id(vid: Any) -> str:
    if not isinstance(vid, str) or not vid:
        raise _data_error(400, "Vector ID must be a non-empty string")
    if len(vid) > MAX_ID_LENGTH or not vid.isascii() or "\x00" in vid:
        raise _data_error(
            400, f"Vector ID must be ASCII and at most {MAX_ID_LENGTH} characters: {vid[:40]!r}"
        )
    return vid


def _check_metadata(meta: Any) -> dict[str, Any]:
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise _data_error(400, "Metadata must be a JSON object")
    for key, value in meta.items():
        ok = isinstance(value, (str, bool, int, float)) or (
            isinstance(value, list) and all(isinstance(v, str) for v in value)
        )
        if not ok:
            raise _data_error(
                400,
                f"Metadata value for field {key!r} must be a string, number, boolean or list "
                "of strings",
            )
    if len(json.dumps(meta).encode()) > MAX_METADATA_BYTES:
        raise _data_error(400, f"Metadata size exceeds the limit of {MAX_METADATA_BYTES} bytes")
    return dict(meta)


def _values(index: FakeIndex, values: Any) -> np.ndarray:
    if not isinstance(values, list) or not all(_is_num(v) for v in values):
        raise _data_error(400, "Vector values must be an array of numbers")
    if len(values) != index.dimension:
        raise _data_error(
            400,
            f"Vector dimension {len(values)} does not match the dimension of the index "
            f"{index.dimension}",
        )
    return np.asarray(values, dtype=np.float32)


class PineconeFake:
    """The fake service's state; :func:`serve_pinecone_fake` runs it.

    Attributes:
        url: ``http://127.0.0.1:PORT``: the control plane and the default index's data plane.
        requests: Every request received, oldest first.
        indexes: The indexes by name.
    """

    def __init__(self, host: str, port: int) -> None:
        self.port = port
        self.url = f"http://{host}:{port}"
        self.requests: list[RecordedRequest] = []
        self.indexes: dict[str, FakeIndex] = {}
        self.default_index: str | None = None
        self._failures: list[tuple[int | None, str, float | None]] = []
        self.lock = threading.RLock()

    # -- test controls ----------------------------------------------------------------------
    def add_index(
        self, name: str, dimension: int, *, metric: str = "cosine", default: bool = False
    ) -> FakeIndex:
        """Create an index directly (as if made earlier); ``default`` serves it at the root."""
        with self.lock:
            index = FakeIndex(name, dimension, f"{self.url}/index/{name}", metric)
            self.indexes[name] = index
            if default:
                self.default_index = name
            return index

    def fail_next(
        self,
        n: int = 1,
        status: int | None = 503,
        message: str = "Service unavailable",
        retry_after: float | None = None,
    ) -> None:
        """Make the next ``n`` requests fail with ``status`` (None: drop the connection)."""
        with self.lock:
            self._failures.extend([(status, message, retry_after)] * n)

    def reset(self) -> None:
        """Forget every record, request and pending failure (indexes stay, empty)."""
        with self.lock:
            for index in self.indexes.values():
                index.namespaces.clear()
            self.requests.clear()
            self._failures.clear()

    def calls(self, path: str, method: str | None = None) -> list[RecordedRequest]:
        """The recorded requests to ``path`` (and ``method``), oldest first."""
        with self.lock:
            return [
                r
                for r in self.requests
                if r.path == path and (method is None or r.method == method)
            ]

    # -- dispatch ---------------------------------------------------------------------------
    def handle(
        self, method: str, raw_path: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, Any, dict[str, str]] | None:
        """Answer one request: ``(status, json body, extra headers)``, or None to drop it."""
        parts = urlsplit(raw_path)
        path, query = parts.path, parse_qs(parts.query)
        index_name: str | None = None
        if path.startswith("/index/"):
            index_name, _, rest = path[len("/index/") :].partition("/")
            index_name, path = unquote(index_name), "/" + rest
        parsed: Any = None
        bad_json = False
        if body:
            try:
                parsed = json.loads(body)
            except ValueError:
                bad_json = True
        api_version = headers.get("X-Pinecone-Api-Version", "")
        with self.lock:
            record = RecordedRequest(method, path, index_name, parsed, query, api_version)
            self.requests.append(record)
        try:
            if not headers.get("Api-Key"):
                raise _control_error(401, "UNAUTHENTICATED", "Invalid API Key")
            with self.lock:
                failure = self._failures.pop(0) if self._failures else None
            if failure is not None:
                status, message, retry_after = failure
                record.status = status or 0
                if status is None:
                    return None
                extra = {"Retry-After": str(retry_after)} if retry_after is not None else {}
                return status, _data_error(status, message).body, extra
            if bad_json:
                raise _data_error(400, "Request body is not valid JSON")
            if len(body) > MAX_REQUEST_BYTES:
                raise _data_error(
                    413, f"Request size {len(body)} bytes exceeds the limit of 2MB per request"
                )
            with self.lock:
                result = self._route(method, path, index_name, query, parsed, api_version)
            record.status = result[0]
            return result[0], result[1], {}
        except ApiFailure as exc:
            record.status = exc.status
            return exc.status, exc.body, {}
        except Exception as exc:  # a bug in the fake: answer like the service's internal error
            record.status = 500
            return 500, _data_error(500, f"fake error: {type(exc).__name__}: {exc}").body, {}

    def _route(
        self,
        method: str,
        path: str,
        index_name: str | None,
        query: dict[str, list[str]],
        body: Any,
        api_version: str,
    ) -> tuple[int, Any]:
        if index_name is None:
            if path == "/indexes" and method == "GET":
                return 200, {
                    "indexes": [self._describe(i, api_version) for i in self.indexes.values()]
                }
            if path == "/indexes" and method == "POST":
                return self._create_index(body, api_version)
            if path.startswith("/indexes/") and path.count("/") == 2:
                name = unquote(path[len("/indexes/") :])
                if name not in self.indexes:
                    raise _control_error(404, "NOT_FOUND", f"Resource {name} not found")
                if method == "GET":
                    return 200, self._describe(self.indexes[name], api_version)
                if method == "DELETE":
                    del self.indexes[name]
                    if self.default_index == name:
                        self.default_index = None
                    return 202, {}
            index_name = self.default_index
        routes = {
            ("POST", "/vectors/upsert"): self._upsert,
            ("POST", "/query"): self._query,
            ("GET", "/vectors/fetch"): self._fetch,
            ("POST", "/vectors/delete"): self._delete,
            ("POST", "/describe_index_stats"): self._stats,
        }
        handler = routes.get((method, path))
        if handler is None or index_name is None:
            raise _data_error(404, f"Not Found: {method} {path}")
        index = self.indexes.get(index_name)
        if index is None:
            raise _data_error(404, f"Index {index_name} not found")
        if method == "GET":
            return handler(index, query)
        if not isinstance(body, dict):
            raise _data_error(400, "Request body must be a JSON object")
        return handler(index, body)

    # -- control plane ----------------------------------------------------------------------
    def _describe(self, index: FakeIndex, api_version: str) -> dict[str, Any]:
        status = {"ready": True, "state": "Ready"}
        if api_version >= _NEW_API:
            return {
                "name": index.name,
                "host": index.host,
                "status": status,
                "schema": {
                    "fields": {
                        "_values": {
                            "type": "dense_vector",
                            "dimension": index.dimension,
                            "metric": index.metric,
                        }
                    }
                },
                "deployment": {
                    "deployment_type": "managed",
                    "cloud": index.cloud,
                    "region": index.region,
                },
                "deletion_protection": "disabled",
                "tags": None,
            }
        return {  # the shape of API versions before the schema/deployment redesign
            "name": index.name,
            "dimension": index.dimension,
            "metric": index.metric,
            "host": index.host,
            "spec": {"serverless": {"cloud": index.cloud, "region": index.region}},
            "status": status,
            "deletion_protection": "disabled",
            "vector_type": "dense",
        }

    def _create_index(self, body: Any, api_version: str) -> tuple[int, Any]:
        if not isinstance(body, dict):
            raise _control_error(400, "INVALID_ARGUMENT", "Request body must be a JSON object")
        name = body.get("name")
        if not isinstance(name, str) or not _INDEX_NAME_RE.match(name):
            raise _control_error(
                400,
                "INVALID_ARGUMENT",
                "Name must consist of lower case alphanumeric characters or '-', at most 45",
            )
        if name in self.indexes:
            raise _control_error(409, "ALREADY_EXISTS", f"Resource {name} already exists")
        schema = body.get("schema") or {}
        dense = (schema.get("fields") or {}).get("_values") if isinstance(schema, dict) else None
        if isinstance(dense, dict):
            dimension, metric = dense.get("dimension"), dense.get("metric", "cosine")
            deployment = body.get("deployment") or {}
            cloud, region = deployment.get("cloud", "aws"), deployment.get("region", "us-east-1")
        else:
            dimension, metric = body.get("dimension"), body.get("metric", "cosine")
            serverless = (body.get("spec") or {}).get("serverless") or {}
            cloud, region = serverless.get("cloud", "aws"), serverless.get("region", "us-east-1")
        if not isinstance(dimension, int) or not 1 <= dimension <= 20_000:
            raise _control_error(400, "INVALID_ARGUMENT", "Dimension must be in [1, 20000]")
        if metric not in ("cosine", "euclidean", "dotproduct"):
            raise _control_error(400, "INVALID_ARGUMENT", f"Unknown metric {metric!r}")
        index = self.add_index(name, dimension, metric=metric)
        index.cloud, index.region = cloud, region
        return 201, self._describe(index, api_version)

    # -- data plane -------------------------------------------------------------------------
    def _upsert(self, index: FakeIndex, body: dict[str, Any]) -> tuple[int, Any]:
        vectors = body.get("vectors")
        if not isinstance(vectors, list) or not vectors:
            raise _data_error(400, "vectors must be a non-empty array")
        if len(vectors) > MAX_UPSERT_VECTORS:
            raise _data_error(
                400, f"Upsert of {len(vectors)} vectors exceeds the limit of {MAX_UPSERT_VECTORS}"
            )
        rows = []
        for v in vectors:
            if not isinstance(v, dict):
                raise _data_error(400, "each vector must be a JSON object")
            rows.append(
                (
                    _check_id(v.get("id")),
                    _values(index, v.get("values")),
                    _check_metadata(v.get("metadata")),
                )
            )
        store = index.namespaces.setdefault(_namespace(body.get("namespace")), {})
        for vid, values, meta in rows:
            store[vid] = (values, meta)  # an upsert replaces the record, metadata included
        return 200, {"upsertedCount": len(rows)}

    def _query(self, index: FakeIndex, body: dict[str, Any]) -> tuple[int, Any]:
        top_k = body.get("topK")
        if not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= MAX_TOP_K:
            raise _data_error(400, f"topK must be an integer in [1, {MAX_TOP_K}]")
        namespace = _namespace(body.get("namespace"))
        store = index.namespaces.get(namespace, {})
        if "vector" in body:
            query = _values(index, body["vector"]).astype(np.float64)
        elif "id" in body:
            if body["id"] not in store:
                return 200, {"matches": [], "namespace": namespace, "usage": {"readUnits": 1}}
            query = store[body["id"]][0].astype(np.float64)
        else:
            raise _data_error(400, "a query needs a vector or an id")
        flt = body.get("filter")
        if flt is not None:
            _check_filter(flt)
        scored = []
        qnorm = float(np.linalg.norm(query))
        for vid, (values, meta) in store.items():
            if not filter_matches(flt, meta):
                continue
            vals = values.astype(np.float64)
            if index.metric == "cosine":
                denom = qnorm * float(np.linalg.norm(vals))
                score = float(vals @ query) / denom if denom else 0.0
            elif index.metric == "dotproduct":
                score = float(vals @ query)
            else:
                score = float(np.sum((vals - query) ** 2))
            scored.append((score, vid, values, meta))
        scored.sort(key=lambda t: t[0], reverse=index.metric != "euclidean")
        matches = []
        for score, vid, values, meta in scored[:top_k]:
            match: dict[str, Any] = {"id": vid, "score": score if math.isfinite(score) else 0.0}
            match["values"] = [float(x) for x in values] if body.get("includeValues") else []
            if body.get("includeMetadata") and meta:
                match["metadata"] = meta
            matches.append(match)
        return 200, {"matches": matches, "namespace": namespace, "usage": {"readUnits": 1}}

    def _fetch(self, index: FakeIndex, query: dict[str, list[str]]) -> tuple[int, Any]:
        ids = query.get("ids", [])
        if not ids:
            raise _data_error(400, "ids must be a non-empty list")
        if len(ids) > MAX_IDS:
            raise _data_error(400, f"Fetch of {len(ids)} ids exceeds the limit of {MAX_IDS}")
        namespace = _namespace((query.get("namespace") or [""])[0])
        store = index.namespaces.get(namespace, {})
        out: dict[str, Any] = {}
        for vid in ids:
            if vid in store:
                values, meta = store[vid]
                out[vid] = {"id": vid, "values": [float(x) for x in values]}
                if meta:
                    out[vid]["metadata"] = meta
        return 200, {"vectors": out, "namespace": namespace, "usage": {"readUnits": 1}}

    def _delete(self, index: FakeIndex, body: dict[str, Any]) -> tuple[int, Any]:
        ids, delete_all, flt = body.get("ids"), body.get("deleteAll", False), body.get("filter")
        if sum(x is not None and x is not False for x in (ids, flt)) + bool(delete_all) != 1:
            raise _data_error(400, "Exactly one of ids, deleteAll or filter must be given")
        namespace = _namespace(body.get("namespace"))
        if not index.namespaces.get(namespace):
            raise _data_error(404, "Namespace not found")
        store = index.namespaces[namespace]
        if ids is not None:
            if not isinstance(ids, list) or not ids:
                raise _data_error(400, "ids must be a non-empty array")
            if len(ids) > MAX_IDS:
                raise _data_error(400, f"Delete of {len(ids)} ids exceeds the limit of {MAX_IDS}")
            for vid in ids:
                store.pop(_check_id(vid), None)
        elif delete_all:
            store.clear()
        else:
            _check_filter(flt)
            for vid in [v for v, (_, meta) in store.items() if filter_matches(flt, meta)]:
                del store[vid]
        if not store:
            del index.namespaces[namespace]  # an emptied namespace disappears
        return 200, {}

    def _stats(self, index: FakeIndex, body: dict[str, Any]) -> tuple[int, Any]:
        flt = body.get("filter")
        if flt is not None:
            _check_filter(flt)
        namespaces = {}
        for name, store in index.namespaces.items():
            n = sum(filter_matches(flt, meta) for _, meta in store.values())
            if store:
                namespaces[name or DEFAULT_NAMESPACE_LABEL] = {"vectorCount": n}
        return 200, {
            "namespaces": namespaces,
            "dimension": index.dimension,
            "indexFullness": 0.0,
            "totalVectorCount": sum(v["vectorCount"] for v in namespaces.values()),
            "metric": index.metric,
            "vectorType": "dense",
        }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the SDK's connection pool expects
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without NODELAY, Nagle's algorithm and
        # the client's delayed ACK would add ~40 ms to every answer.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        # Header names are case-insensitive; look them up the way the service would.
        lowered = {k.lower(): v for k, v in self.headers.items()}
        canonical = {
            "Api-Key": lowered.get("api-key", ""),
            "X-Pinecone-Api-Version": lowered.get("x-pinecone-api-version", ""),
        }
        answer = self.server.fake.handle(self.command, self.path, canonical, body)
        if answer is None:  # an injected dropped connection
            self.close_connection = True
            return
        status, payload, extra = answer
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = do_PATCH = _serve

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: the request log is on the fake."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    fake: PineconeFake


@contextmanager
def serve_pinecone_fake(
    dimension: int | None = 16, index: str = "pensive"
) -> Iterator[PineconeFake]:
    """Run a fake Pinecone on ``127.0.0.1`` (ephemeral port) in a background thread.

    Args:
        dimension: The dimension of the default index, served at the root URL; None starts
            the fake with no index at all (for tests of index creation).
        index: The default index's name.

    Yields:
        The running :class:`PineconeFake`; ``.url`` is its address.
    """
    server = _Server(("127.0.0.1", 0), _Handler)
    fake = PineconeFake("127.0.0.1", server.server_address[1])
    server.fake = fake
    if dimension is not None:
        fake.add_index(index, dimension, default=True)
    thread = threading.Thread(
        target=server.serve_forever, args=(0.05,), name="pinecone-fake", daemon=True
    )
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
