"""Pinecone vector backend: a serverless index through the official SDK's REST data plane.

Pensive embeds; the index uses the cosine metric, whose scores already are higher-is-better
similarities. Store namespaces are Pinecone namespaces (``""`` is the index's default one).

* **Host.** ``[backend.pinecone] host`` names the index's data-plane URL directly; when it is
  empty the host is looked up on the control plane by index name (``PINECONE_CONTROLLER_HOST``
  points the SDK at another control plane), and a missing index is created (serverless, in
  ``cloud``/``region``) when ``create`` is true.
* **Retries.** 429, 5xx, 408 and connection failures or timeouts are retried ``retries`` times
  with exponential backoff from ``backoff_s`` (honouring ``Retry-After``); other errors are not.
  The SDK's own retrying is switched off so the total number of attempts stays bounded.
* **Batches.** Upserts, deletes and fetches are split into ``batch_size`` records, and further
  so that an upsert stays under Pinecone's 2 MB request limit and a fetch's query string stays
  short.
* **Filters.** The filter tree becomes Pinecone's Mongo-style filter. ``$ne``/``$nin`` also
  require the field to exist, because Pinecone lets a record without the field pass them while
  Pensive's rule is that a missing field matches no comparison.
* **Ids.** Pinecone takes ASCII ids of at most 512 characters; other ids are stored
  base64-encoded under a prefix and decoded on the way back.
* **Consistency.** Pinecone is eventually consistent: a write is durable when acknowledged but
  may take a moment to show in queries and counts.
"""

from __future__ import annotations

import base64
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np

from ..config import PineconeConfig
from ..errors import BackendError, ConfigError, InputError, MissingDependencyError
from ..filters import And, Cmp, Filter, Or, to_mongo
from .base import check_namespace, check_upsert
from .retry import with_backoff

__all__ = ["PineconeBackend", "pinecone_filter"]

_MAX_TOP_K = 10_000  # Pinecone's ceiling on one query's top_k
_MAX_REQUEST_BYTES = 1_800_000  # under the 2 MB upsert limit, leaving room for JSON overhead
_MAX_FETCH_QUERY = 6_000  # ids' share of a fetch URL: well under common 8 KB URL limits
_MAX_ID_LENGTH = 512
_ID_PREFIX = "~b64:"  # marks an id stored encoded; ids starting with it are encoded too
_DEFAULT_NAMESPACE_LABELS = ("", "__default__")  # how stats may list the default namespace
_CONTROL_PLANE = "https://api.pinecone.io"
_READY_WAIT_S = 300.0  # how long to wait for a newly created index to become ready


def _pinecone():  # type: ignore[no-untyped-def]
    try:
        import pinecone
    except ImportError as exc:
        raise MissingDependencyError("pinecone", "pinecone", "The Pinecone vector backend") from exc
    return pinecone


def _encode_id(cid: str) -> str:
    """The Pinecone id for a Pensive id (reversible; see :func:`_decode_id`)."""
    if (
        cid
        and len(cid) <= _MAX_ID_LENGTH
        and cid.isascii()
        and "\x00" not in cid
        and not cid.startswith(_ID_PREFIX)
    ):
        return cid
    enc = _ID_PREFIX + base64.urlsafe_b64encode(cid.encode("utf-8")).decode("ascii").rstrip("=")
    if len(enc) > _MAX_ID_LENGTH:
        raise InputError(
            f"id {cid[:40]!r}... is too long for Pinecone (ids are at most {_MAX_ID_LENGTH} "
            "ASCII characters; non-ASCII ids take about 4/3 of their UTF-8 size)"
        )
    return enc


def _decode_id(pid: str) -> str:
    if not pid.startswith(_ID_PREFIX):
        return pid
    raw = pid[len(_ID_PREFIX) :]
    return base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode("utf-8")


def _exists(fieldname: str) -> dict[str, Any]:
    return {fieldname: {"$exists": True}}


def pinecone_filter(node: Filter) -> dict[str, Any]:
    """Translate a filter tree into Pinecone's filter, keeping Pensive's semantics.

    A record lacking a field must fail every comparison on it, so ``$ne``/``$nin`` are
    conjoined with ``$exists``. Pinecone's ``$in``/``$nin`` take strings and numbers only, so
    boolean members become ``$eq``/``$ne`` terms.
    """
    if isinstance(node, (And, Or)):
        op = "$and" if isinstance(node, And) else "$or"
        return {op: [pinecone_filter(p) for p in node.parts]}
    assert isinstance(node, Cmp)
    f = node.field
    if node.op == "$ne":
        return {"$and": [_exists(f), to_mongo(node)]}
    if node.op in ("$in", "$nin"):
        flags = [v for v in node.value if isinstance(v, bool)]
        rest = [v for v in node.value if not isinstance(v, bool)]
        if node.op == "$in":
            parts = ([{f: {"$in": rest}}] if rest else []) + [{f: {"$eq": b}} for b in flags]
            return parts[0] if len(parts) == 1 else {"$or": parts}
        parts = [_exists(f)] + ([{f: {"$nin": rest}}] if rest else [])
        return {"$and": parts + [{f: {"$ne": b}} for b in flags]}
    return to_mongo(node)


def _check_meta_values(meta: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in meta.items():
        ok = (
            isinstance(value, (str, bool, int))
            or (isinstance(value, float) and math.isfinite(value))
            or (isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value))
        )
        if not isinstance(key, str) or not ok:
            raise InputError(
                f"metadata field {key!r}: Pinecone stores strings, numbers, booleans and lists "
                f"of strings, got {type(value).__name__}"
            )
    return {k: list(v) if isinstance(v, tuple) else v for k, v in meta.items()}


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(exc, "status", None)  # older SDKs' PineconeApiException
    return status if isinstance(status, int) else None


class PineconeBackend:
    """Vectors in a Pinecone serverless index, one Pinecone namespace per store namespace.

    Args:
        folder: Unused (the vectors live in the service).
        dim: Vector dimension; the index must have it.
        options: The ``[backend.pinecone]`` section.

    Raises:
        MissingDependencyError: If the ``pinecone`` SDK is not installed (extra ``pinecone``).
        ConfigError: If the API key variable is unset, the index is missing (and ``create`` is
            false) or the index holds vectors of another dimension.
        BackendError: If the service cannot be reached after the retries, or refuses a
            request (the message names the address).
    """

    name = "pinecone"
    kind = "ann"  # Pinecone's serverless search is approximate

    def __init__(
        self, folder: Path | None, dim: int, options: PineconeConfig | None = None
    ) -> None:
        sdk = _pinecone()
        self.cfg = options or PineconeConfig()
        self.dim = dim
        api_key = os.environ.get(self.cfg.api_key_env, "").strip()
        if not api_key:
            raise ConfigError(
                f"the Pinecone backend reads its API key from the environment variable "
                f"{self.cfg.api_key_env}, which is not set (or empty); set it, or name another "
                "variable in [backend.pinecone] api_key_env"
            )
        self._transient_types: tuple[type[BaseException], ...] = tuple(
            t
            for t in (
                getattr(sdk, "PineconeConnectionError", None),
                getattr(sdk, "PineconeTimeoutError", None),
                ConnectionError,
                TimeoutError,
            )
            if isinstance(t, type)
        )
        self._input_types: tuple[type[BaseException], ...] = tuple(
            t
            for t in (
                getattr(sdk, "PineconeValueError", None),
                getattr(sdk, "PineconeTypeError", None),
            )
            if isinstance(t, type)
        )
        self.address = os.environ.get("PINECONE_CONTROLLER_HOST") or _CONTROL_PLANE
        self.index: Any = None
        try:
            self.pc: Any = sdk.Pinecone(
                api_key=api_key,
                timeout=self.cfg.timeout_s,
                # This backend retries on its own, with the configured bounds.
                retry_config=sdk.RetryConfig(max_retries=0),
                source_tag="pensive",
            )
        except self._input_types as exc:
            raise ConfigError(
                f"the Pinecone API key in {self.cfg.api_key_env} is not usable: {exc}"
            ) from None
        try:
            self._connect()
        except BaseException:
            self.close()  # do not leak the SDK's connection pools
            raise

    def _connect(self) -> None:
        """Open the index's data plane and check its dimension."""
        host = self.cfg.host.strip().rstrip("/") or self._resolve_host()
        self.address = host
        try:
            self.index = self.pc.index(host=host)
        except self._input_types as exc:
            raise ConfigError(f"[backend.pinecone] host {host!r} is not usable: {exc}") from None
        _disable_sdk_retries(self.index)
        stats = self._call("describe_index_stats", self.index.describe_index_stats)
        if stats.dimension is not None and int(stats.dimension) != self.dim:
            raise ConfigError(
                f"the Pinecone index at {self.address} holds {stats.dimension}-d vectors, not "
                f"{self.dim}-d: use another [backend.pinecone] index or host, or an embedder "
                f"that makes {stats.dimension}-d vectors"
            )

    # -- plumbing ---------------------------------------------------------------------------
    def _resolve_host(self) -> str:
        """Find the index's data-plane host by name, creating the index if allowed."""
        name = self.cfg.index
        model = self._call(
            f"describe index {name!r}", self.pc.indexes.describe, name, missing_ok=True
        )
        if model is None:
            if not self.cfg.create:
                raise ConfigError(
                    f"there is no Pinecone index {name!r} in the project at {self.address}; "
                    "create it, or set [backend.pinecone] create = true"
                )
            self._call(
                f"create index {name!r}",
                self._create_index,
                name,
                conflict_ok=True,  # another process created it first: use that one
            )
            model = self._wait_ready(name)
        if not model.host:
            model = self._wait_ready(name)
        return str(model.host).rstrip("/")

    def _create_index(self, name: str) -> Any:
        return self.pc.indexes.create(
            name=name,
            dimension=self.dim,
            metric="cosine",
            deployment={
                "deployment_type": "managed",
                "cloud": self.cfg.cloud,
                "region": self.cfg.region,
            },
            timeout=-1,  # poll here, with a short interval
        )

    def _wait_ready(self, name: str) -> Any:
        deadline = time.monotonic() + _READY_WAIT_S
        while True:
            model = self._call(f"describe index {name!r}", self.pc.indexes.describe, name)
            if model.status.ready and model.host:
                return model
            if time.monotonic() > deadline:
                raise BackendError(
                    f"the Pinecone index {name!r} at {self.address} is not ready after "
                    f"{_READY_WAIT_S:.0f}s (state {model.status.state!r})"
                )
            time.sleep(1.0)

    def _call(
        self,
        what: str,
        fn: Callable[..., Any],
        *args: Any,
        missing_ok: bool = False,
        conflict_ok: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Run one SDK request, retrying transient failures with exponential backoff.

        Returns None for a 404 when ``missing_ok`` and for a 409 when ``conflict_ok``.
        """
        ok = {404} if missing_ok else set()
        if conflict_ok:
            ok.add(409)

        def transient(exc: Exception) -> bool:
            status = _status(exc)
            if status is None:
                return isinstance(exc, self._transient_types)
            return status in (408, 429) or 500 <= status <= 599

        def fail(exc: Exception, attempts: int) -> Exception:
            return self._error(what, exc, _status(exc), transient(exc), attempts)

        def wait_hint(exc: Exception) -> float | None:
            hint = getattr(exc, "retry_after", None)
            return float(hint) if isinstance(hint, (int, float)) else None

        def once() -> Any:
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                if _status(exc) in ok:  # "not there" / "already there": an answer, not a failure
                    return None
                raise

        return with_backoff(
            once,
            retries=self.cfg.retries,
            backoff_s=self.cfg.backoff_s,
            transient=transient,
            fail=fail,
            wait_hint=wait_hint,
        )

    def _error(
        self, what: str, exc: Exception, status: int | None, transient: bool, attempts: int
    ) -> Exception:
        detail = f"{type(exc).__name__}: {exc}"
        if status is None and transient:
            return BackendError(
                f"cannot reach Pinecone at {self.address}: {what} failed {attempts} time(s) "
                f"({detail}); check [backend.pinecone] host/index and the network"
            )
        if status is None and isinstance(exc, self._input_types):
            return InputError(f"the Pinecone SDK refused the {what} request: {exc}")
        if status in (401, 403):
            return BackendError(
                f"Pinecone at {self.address} refused the API key from "
                f"${self.cfg.api_key_env} ({status}) during {what}: {detail}"
            )
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        return BackendError(f"Pinecone at {self.address}: {what} failed{tries} ({detail})")

    def _open(self) -> Any:
        if self.index is None:
            raise BackendError(f"this Pinecone backend ({self.address}) is closed")
        return self.index

    def _batches(
        self, items: Sequence[Any], cost: Callable[[Any], int], budget: int
    ) -> Iterator[list[Any]]:
        """Split ``items`` into runs of at most ``batch_size`` whose ``cost`` sums to ``budget``."""
        batch: list[Any] = []
        used = 0
        for item in items:
            c = cost(item)
            if batch and (len(batch) >= self.cfg.batch_size or used + c > budget):
                yield batch
                batch, used = [], 0
            batch.append(item)
            used += c
        if batch:
            yield batch

    # -- the protocol -----------------------------------------------------------------------
    def upsert(
        self,
        ids: Sequence[str],
        vectors: np.ndarray,
        metadata: Sequence[Mapping[str, Any]] | None = None,
        *,
        namespace: str = "",
    ) -> None:
        """Add vectors (and their metadata), replacing any stored under the same ids.

        A replaced record's metadata is replaced wholesale, as Pinecone does.
        """
        ids, vecs, metas = check_upsert(ids, vectors, metadata, self.dim, namespace)
        ns = namespace
        if not np.isfinite(vecs).all():
            raise InputError("vectors must be finite (no NaN or infinity)")
        index = self._open()
        records = []
        for cid, vec, meta in zip(ids, vecs, metas):
            rec: dict[str, Any] = {"id": _encode_id(cid), "values": vec.tolist()}
            if meta:
                rec["metadata"] = _check_meta_values(meta)
            records.append(rec)
        per_vector = 24 * self.dim + 64  # the longest JSON a float takes, plus the framing

        def size(rec: dict[str, Any]) -> int:
            meta_size = len(repr(rec.get("metadata", ""))) * 2  # repr ~ JSON; doubled for escapes
            return per_vector + len(rec["id"]) + meta_size

        for batch in self._batches(records, size, _MAX_REQUEST_BYTES):
            self._call("upsert", index.upsert, vectors=batch, namespace=ns, show_progress=False)

    def delete(self, ids: Sequence[str], *, namespace: str = "") -> None:
        """Remove vectors by id; ids that are not stored are ignored."""
        ns = check_namespace(namespace)
        index = self._open()
        pids = list(dict.fromkeys(_encode_id(i) for i in ids))
        for batch in self._batches(pids, lambda _: 0, 1):
            # Pinecone answers 404 when the namespace holds nothing: nothing to delete.
            self._call("delete", index.delete, ids=batch, namespace=ns, missing_ok=True)

    def search(
        self, vector: np.ndarray, k: int, *, where: Filter | None = None, namespace: str = ""
    ) -> list[tuple[str, float]]:
        """Up to ``k`` ``(id, cosine similarity)`` pairs passing ``where``, best first.

        ``k`` is capped at Pinecone's limit of 10000 results per query.
        """
        ns = check_namespace(namespace)
        index = self._open()
        if k <= 0:
            return []
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if query.shape != (self.dim,):
            raise InputError(f"expected a query vector of {self.dim} values, got {query.shape}")
        kwargs: dict[str, Any] = {
            "vector": query.tolist(),
            "top_k": min(int(k), _MAX_TOP_K),
            "namespace": ns,
            "include_values": False,
            "include_metadata": False,
        }
        if where is not None:
            kwargs["filter"] = pinecone_filter(where)
        res = self._call("query", index.query, missing_ok=True, **kwargs)
        if res is None:  # 404: the namespace does not exist
            return []
        hits = [(_decode_id(m.id), float(m.score)) for m in res.matches]
        hits.sort(key=lambda h: -h[1])  # the service sorts already; keep the contract explicit
        return hits

    def fetch(self, ids: Sequence[str], *, namespace: str = "") -> dict[str, np.ndarray]:
        """The stored vectors of ``ids`` (ids not stored are left out)."""
        ns = check_namespace(namespace)
        index = self._open()
        pids = list(dict.fromkeys(_encode_id(i) for i in ids))
        out: dict[str, np.ndarray] = {}
        # Fetch sends the ids in the URL, so batches are bounded by their encoded length too.
        for batch in self._batches(pids, lambda p: len(quote(p, safe="")) + 5, _MAX_FETCH_QUERY):
            res = self._call("fetch", index.fetch, ids=batch, namespace=ns, missing_ok=True)
            if res is None:
                continue
            for pid, vec in res.vectors.items():
                out[_decode_id(pid)] = np.asarray(vec.values, dtype=np.float32)
        return out

    def ids(self, *, namespace: str = "") -> set[str] | None:
        """None: listing every id of a managed service is not cheap (see
        :meth:`~pensive_core.backends.VectorBackend.ids`)."""
        return None

    def count(self, *, namespace: str = "") -> int:
        """Number of vectors in the namespace (as Pinecone's index stats report it)."""
        ns = check_namespace(namespace)
        stats = self._call("describe_index_stats", self._open().describe_index_stats)
        spaces = stats.namespaces or {}
        for label in (ns,) if ns else _DEFAULT_NAMESPACE_LABELS:
            if label in spaces:
                return int(spaces[label].vector_count)
        return 0

    def persist(self) -> None:
        """Pinecone writes through: an acknowledged write is durable. Nothing to do."""

    def close(self) -> None:
        """Release the SDK's connections (the data stays in the index)."""
        index, self.index = self.index, None
        if index is not None:
            index.close()
        pc, self.pc = self.pc, None
        if pc is not None:
            pc.close()


def _disable_sdk_retries(index: Any) -> None:
    """Turn off the SDK's own retrying of data-plane requests.

    The SDK (10.x) retries data-plane REST requests itself (3 times, jittered backoff from
    0.25 s, plus a process-wide retry budget) and offers no public switch for it: only the
    control plane takes ``retry_config``. Stacked under this backend's retries that would
    multiply the attempts and the waiting, so the index's HTTP client is rebuilt with retries
    off. If the SDK's internals differ, its retries stay on and the attempts are bounded by
    ``(retries + 1) * 4``.
    """
    try:
        from dataclasses import replace

        from pinecone._internal.config import RetryConfig
        from pinecone._internal.constants import DATA_PLANE_API_VERSION
        from pinecone._internal.http_client import HTTPClient

        config = replace(index._config, retry_config=RetryConfig(max_retries=0))
        old = index._http
        index._http = HTTPClient(config, DATA_PLANE_API_VERSION)
        index._config = config
        old.close()
    except Exception:  # another SDK layout: keep its (bounded) retries
        return
