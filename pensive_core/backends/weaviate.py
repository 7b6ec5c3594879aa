"""Weaviate vector backend (official v4 client: REST for schema and tenants, gRPC for data).

Layout on the server:

* One collection (``[backend.weaviate] collection``) with multi-tenancy enabled, one named
  vector ``"default"`` that Pensive provides itself (no vectorizer), an HNSW index with cosine
  distance, and null-state indexing (so "the record has this field" can be filtered on). The
  collection's description records the vector dimension; opening it with another is an error.
* One tenant per namespace, created on the first write into it. The default namespace ``""``
  is the tenant ``_default``, a name no valid namespace can take (those start with a letter or
  digit). Reading a namespace that has no tenant yet gives nothing, not an error.
* One object per id: its UUID is ``uuid5`` of the caller's id (so writing the same id again
  replaces the object), and the id itself is kept in the text property ``pensive_id``.
* Each metadata key and value kind is a property of its own, added to the schema when first
  seen (auto-schema may be off, and would guess word tokenization and int types). Strings are
  TEXT with ``field`` tokenization (equality is on the whole value, not on words), all numbers
  are NUMBER (ints and floats of one key compare as numbers), booleans are BOOL. Names are
  lower-case only, because Weaviate lower-cases a property's first letter and refuses two
  names that differ only in case; see :func:`_prop_name`.

Scores are cosine similarities (``1 - distance``), best first.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

import numpy as np

from ..config import WeaviateConfig
from ..errors import BackendError, ConfigError, InputError, MissingDependencyError
from ..filters import FIELD_RE, And, Cmp, Filter, Or
from .base import check_namespace, check_upsert
from .retry import with_backoff

__all__ = ["WeaviateBackend", "DEFAULT_TENANT", "VECTOR_NAME"]

T = TypeVar("T")

#: The tenant that holds namespace ``""``: valid namespaces cannot start with ``_``.
DEFAULT_TENANT = "_default"
#: The one named vector of the collection.
VECTOR_NAME = "default"
#: The text property holding the caller's id.
ID_PROP = "pensive_id"
#: uuid5 namespace for object ids (fixed: ids must map to the same UUID forever).
_UUID_NS = uuid.UUID("6f1c2b1e-6a0e-5d0c-9d3e-70656e736976")
_DIM_RE = re.compile(r"\bdim=(\d+)\b")
#: Weaviate's default QUERY_MAXIMUM_RESULTS; asking for more is an error on the server.
_MAX_LIMIT = 10_000
_KINDS = ("s", "n", "b")  # text, number, boolean
_DATA_TYPES = {"s": "text", "n": "number", "b": "boolean"}


def _weaviate() -> Any:
    try:
        import weaviate
    except ImportError as exc:
        raise MissingDependencyError("weaviate", "weaviate", "The Weaviate vector backend") from exc
    return weaviate


def _kind(value: Any) -> str | None:
    """The property kind of a metadata value; None for values that cannot be stored."""
    if isinstance(value, bool):
        return "b"
    if isinstance(value, (int, float)):
        return "n" if math.isfinite(value) else None
    if isinstance(value, str):
        return "s"
    return None


def _prop_name(key: str, kind: str) -> str:
    """The property that holds metadata ``key`` when its value is of ``kind``.

    Every name is lower case and starts with a lower-case letter, so Weaviate's first-letter
    lower-casing changes nothing and its case-insensitive uniqueness check cannot see two keys
    as one. The mapping is injective: lower-case keys become ``m_<key>_<kind>``; keys with
    capitals become ``u_<key lower-cased>_<hex mask of the capital positions>_<kind>``. Neither
    form can equal the internal ``pensive_id``.
    """
    if key == key.lower():
        return f"m_{key}_{kind}"
    mask = sum(1 << i for i, ch in enumerate(key) if ch.isupper())
    return f"u_{key.lower()}_{mask:x}_{kind}"


def _object_uuid(cid: str) -> str:
    return str(uuid.uuid5(_UUID_NS, cid))


def _tenant(namespace: str) -> str:
    return namespace or DEFAULT_TENANT


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and everything it was raised from or during (the client wraps errors)."""
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and all(cur is not s for s in seen) and len(seen) < 16:
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return seen


def _is_transient(exc: BaseException, *, connecting: bool = False) -> bool:
    """Whether retrying may help: overload, timeouts, dropped connections; not client errors.

    While connecting, only an answer from a busy server counts (429/5xx): nothing listening at
    the address is a configuration problem and should be reported at once.
    """
    import grpc
    import httpx
    from weaviate.exceptions import (
        UnexpectedStatusCodeError,
        WeaviateConnectionError,
        WeaviateRetryError,
        WeaviateTimeoutError,
    )

    chain = _chain(exc)
    # the client already retried UNAVAILABLE with its own (long) backoff: do not multiply it
    if any(isinstance(e, WeaviateRetryError) for e in chain):
        return False
    for e in chain:
        if isinstance(e, UnexpectedStatusCodeError):
            return e.status_code == 429 or e.status_code >= 500
        if connecting:
            continue
        if isinstance(e, grpc.RpcError) and hasattr(e, "code"):
            return e.code() in (
                grpc.StatusCode.UNAVAILABLE,
                grpc.StatusCode.DEADLINE_EXCEEDED,
                grpc.StatusCode.RESOURCE_EXHAUSTED,
            )
        if isinstance(
            e, (WeaviateConnectionError, WeaviateTimeoutError, httpx.TransportError, TimeoutError)
        ):
            return True
    return False


class WeaviateBackend:
    """Vectors in a multi-tenant Weaviate collection; namespaces are tenants.

    Args:
        folder: Unused (the data lives on the server).
        dim: Vector dimension.
        options: The ``[backend.weaviate]`` section.

    Raises:
        MissingDependencyError: If ``weaviate-client`` is not installed (extra ``weaviate``).
        BackendError: If the server cannot be reached (the message names the addresses) or
            refuses the collection.
        ConfigError: If the collection holds vectors of another dimension, or was not made by
            Pensive (no multi-tenancy, no null-state index, no recorded dimension).
    """

    name = "weaviate"
    kind = "hnsw"  # Weaviate searches an HNSW graph: approximate

    def __init__(
        self, folder: Path | None, dim: int, options: WeaviateConfig | None = None
    ) -> None:
        weaviate = _weaviate()
        self.cfg = options or WeaviateConfig()
        self.dim = int(dim)
        self.client: Any = None
        url = urlparse(self.cfg.url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ConfigError(
                f"[backend.weaviate] url {self.cfg.url!r} is not an http(s)://host[:port] URL"
            )
        secure = url.scheme == "https"
        host = url.hostname
        http_port = url.port or (443 if secure else 80)
        self.address = f"{url.scheme}://{host}:{http_port}"
        self.grpc_address = f"{host}:{self.cfg.grpc_port}"
        self._where = f"Weaviate at {self.address} (gRPC {self.grpc_address})"
        self._tenants: set[str] = set()
        self._props: dict[str, str] = {}  # property name -> data type, as the server has it

        from weaviate.classes.init import AdditionalConfig, Auth, Timeout

        key = os.environ.get(self.cfg.api_key_env, "") if self.cfg.api_key_env else ""
        t = self.cfg.timeout_s

        def connect() -> Any:
            return weaviate.connect_to_custom(
                http_host=host,
                http_port=http_port,
                http_secure=secure,
                grpc_host=host,
                grpc_port=self.cfg.grpc_port,
                grpc_secure=secure,
                auth_credentials=Auth.api_key(key) if key else None,
                additional_config=AdditionalConfig(timeout=Timeout(init=t, query=t, insert=t)),
                # the full checks also ask pypi.org for the newest client on every open; the
                # gRPC health check they include is done below instead
                skip_init_checks=True,
            )

        try:
            self.client = self._retry("connect", connect, connecting=True)
            self._ping_grpc(host, secure)
            self.coll = self._open_collection()
        except BaseException:
            self.close()
            raise

    # -- plumbing -------------------------------------------------------------------------

    def _retry(self, what: str, fn: Callable[[], T], *, connecting: bool = False) -> T:
        """Run ``fn``, retrying transient failures with exponential backoff.

        Raises:
            BackendError: When it fails for good; the message names the server and ``what``.
        """

        def fail(exc: Exception, attempts: int) -> Exception:
            if isinstance(exc, (InputError, ConfigError, BackendError)):
                return exc  # already says what is wrong
            tried = f" after {attempts} attempts" if attempts > 1 else ""
            hint = (
                "; is Weaviate running there? Check [backend.weaviate] url and grpc_port"
                if connecting
                else ""
            )
            return BackendError(
                f"{self._where}: {what} failed{tried} ({type(exc).__name__}: {exc}){hint}"
            )

        return with_backoff(
            fn,
            retries=self.cfg.retries,
            backoff_s=self.cfg.backoff_s,
            transient=lambda exc: (
                not isinstance(exc, (InputError, ConfigError, BackendError))
                and _is_transient(exc, connecting=connecting)
            ),
            fail=fail,
        )

    def _ping_grpc(self, host: str, secure: bool) -> None:
        """Check the gRPC port answers Weaviate's health check (REST alone proves little)."""
        import grpc
        from weaviate.proto.v1 import health_weaviate_pb2 as hpb

        target = f"{host}:{self.cfg.grpc_port}"
        channel = (
            grpc.secure_channel(target, grpc.ssl_channel_credentials())
            if secure
            else grpc.insecure_channel(target)
        )
        try:
            check = channel.unary_unary(
                "/grpc.health.v1.Health/Check",
                request_serializer=hpb.WeaviateHealthCheckRequest.SerializeToString,
                response_deserializer=hpb.WeaviateHealthCheckResponse.FromString,
            )
            res = check(hpb.WeaviateHealthCheckRequest(), timeout=min(self.cfg.timeout_s, 10.0))
            if res.status != hpb.WeaviateHealthCheckResponse.SERVING:
                raise BackendError(f"{self._where}: the gRPC service is not serving")
        except grpc.RpcError as exc:
            detail = exc.details() if hasattr(exc, "details") else exc
            raise BackendError(
                f"cannot reach Weaviate's gRPC port at {target} (REST at {self.address} "
                f"answered): {detail}; fix [backend.weaviate] grpc_port"
            ) from None
        finally:
            channel.close()

    def _open_collection(self) -> Any:
        from weaviate.classes.config import (
            Configure,
            DataType,
            Property,
            Tokenization,
            VectorDistances,
        )

        name = self.cfg.collection
        if not self._retry("check the collection", lambda: self.client.collections.exists(name)):
            hnsw = Configure.VectorIndex.hnsw(distance_metric=VectorDistances.COSINE)
            if hasattr(Configure, "Vectors"):  # weaviate-client >= 4.16
                vectors: dict[str, Any] = {
                    "vector_config": Configure.Vectors.self_provided(
                        name=VECTOR_NAME, vector_index_config=hnsw
                    )
                }
            else:
                vectors = {
                    "vectorizer_config": [
                        Configure.NamedVectors.none(name=VECTOR_NAME, vector_index_config=hnsw)
                    ]
                }

            def create() -> None:
                try:
                    self.client.collections.create(
                        name,
                        description=f"Pensive vector store; dim={self.dim}",
                        multi_tenancy_config=Configure.multi_tenancy(
                            enabled=True, auto_tenant_creation=False
                        ),
                        inverted_index_config=Configure.inverted_index(index_null_state=True),
                        properties=[
                            Property(
                                name=ID_PROP,
                                data_type=DataType.TEXT,
                                tokenization=Tokenization.FIELD,
                                index_searchable=False,
                            )
                        ],
                        **vectors,
                    )
                except Exception:
                    # another process may have created it between our check and now
                    if not self.client.collections.exists(name):
                        raise

            self._retry(f"create collection {name!r}", create)
        coll = self.client.collections.use(name)
        conf = self._retry(f"read collection {name!r}", coll.config.get)
        stored = _DIM_RE.search(conf.description or "")
        if stored is None:
            raise ConfigError(
                f"Weaviate collection {name!r} at {self.address} was not made by Pensive (no "
                "dimension in its description): use another [backend.weaviate] collection"
            )
        if int(stored.group(1)) != self.dim:
            raise ConfigError(
                f"Weaviate collection {name!r} at {self.address} holds {stored.group(1)}-d "
                f"vectors, not {self.dim}-d: use another [backend.weaviate] collection"
            )
        if not conf.multi_tenancy_config.enabled:
            raise ConfigError(
                f"Weaviate collection {name!r} at {self.address} has multi-tenancy disabled: "
                "use another [backend.weaviate] collection"
            )
        if not conf.inverted_index_config.index_null_state:
            raise ConfigError(
                f"Weaviate collection {name!r} at {self.address} does not index null state, "
                "which metadata filters need: use another [backend.weaviate] collection"
            )
        self._set_props(conf)
        return coll

    def _set_props(self, conf: Any) -> None:
        self._props = {
            p.name: str(getattr(p.data_type, "value", p.data_type)) for p in conf.properties
        }

    def _reload_props(self) -> None:
        self._set_props(self._retry("read the schema", self.coll.config.get))

    def _ensure_props(self, wanted: Mapping[str, str]) -> None:
        """Add the properties (name -> kind) the server does not have yet."""
        from weaviate.classes.config import DataType, Property, Tokenization

        missing = {n: k for n, k in wanted.items() if n not in self._props}
        if not missing:
            return
        self._reload_props()  # another writer may have added them
        for pname, kind in missing.items():
            if pname in self._props:
                continue
            if kind == "s":
                prop = Property(
                    name=pname,
                    data_type=DataType.TEXT,
                    tokenization=Tokenization.FIELD,
                    index_searchable=False,
                )
            else:
                prop = Property(
                    name=pname, data_type=DataType.NUMBER if kind == "n" else DataType.BOOL
                )

            def add(prop: Any = prop, pname: str = pname) -> None:
                try:
                    self.coll.config.add_property(prop)
                except Exception:
                    self._reload_props()  # a concurrent writer may have won the race
                    if pname not in self._props:
                        raise

            self._retry(f"add property {pname!r}", add)
            self._props[pname] = _DATA_TYPES[kind]

    def _has_tenant(self, tenant: str) -> bool:
        """Whether the tenant exists (cached once seen; absence is never cached)."""
        if tenant in self._tenants:
            return True
        if self._retry(f"look up tenant {tenant!r}", lambda: self.coll.tenants.exists(tenant)):
            self._tenants.add(tenant)
            return True
        return False

    def _ensure_tenant(self, tenant: str) -> None:
        if self._has_tenant(tenant):
            return
        from weaviate.classes.tenants import Tenant

        def create() -> None:
            try:
                self.coll.tenants.create(Tenant(name=tenant))
            except Exception:
                if not self.coll.tenants.exists(tenant):  # created concurrently is fine
                    raise

        self._retry(f"create tenant {tenant!r}", create)
        self._tenants.add(tenant)

    def _chunks(self, items: Sequence[T]) -> list[Sequence[T]]:
        n = max(1, int(self.cfg.batch_size))
        return [items[i : i + n] for i in range(0, len(items), n)]

    # -- filters --------------------------------------------------------------------------

    def _translate(self, node: Filter) -> Any | None:
        """The Weaviate filter for ``node``; None when it can match nothing.

        Comparisons on fields (or value kinds) never stored match nothing, instead of being
        sent (the server refuses filters on unknown properties). A record lacking the field
        matches no comparison, ``$ne``/``$nin`` included, hence the explicit presence tests.
        """
        from weaviate.classes.query import Filter as WF

        if isinstance(node, (And, Or)):
            parts = [self._translate(p) for p in node.parts]
            if isinstance(node, And):
                every = [p for p in parts if p is not None]
                if len(every) < len(parts):
                    return None
                return every[0] if len(every) == 1 else WF.all_of(every)
            kept = [p for p in parts if p is not None]
            if not kept:
                return None
            return kept[0] if len(kept) == 1 else WF.any_of(kept)

        assert isinstance(node, Cmp)

        def prop(kind: str) -> str | None:
            name = _prop_name(node.field, kind)
            return name if name in self._props else None

        def val(v: Any) -> Any:
            return float(v) if _kind(v) == "n" else v

        def present(p: str) -> Any:
            return WF.by_property(p).is_none(False)

        def any_of(parts: list[Any]) -> Any | None:
            if not parts:
                return None
            return parts[0] if len(parts) == 1 else WF.any_of(parts)

        op, x = node.op, node.value
        if op == "$eq":
            kind = _kind(x)
            p = prop(kind) if kind else None
            return WF.by_property(p).equal(val(x)) if p else None
        if op in ("$gt", "$gte", "$lt", "$lte"):
            p = prop("n")
            if p is None:
                return None
            f = WF.by_property(p)
            v = float(x)
            return {
                "$gt": f.greater_than,
                "$gte": f.greater_or_equal,
                "$lt": f.less_than,
                "$lte": f.less_or_equal,
            }[op](v)
        values = list(x) if op in ("$in", "$nin") else [x]
        by_kind: dict[str, list[Any]] = {}
        for v in values:
            k = _kind(v)
            if k is not None:
                by_kind.setdefault(k, []).append(val(v))
        if op == "$in":
            parts = []
            for kind, vs in by_kind.items():
                p = prop(kind)
                if p is not None:
                    parts.append(WF.by_property(p).contains_any(vs))
            return any_of(parts)
        # $ne / $nin: the record has the field (in whatever kind) and equals none of the values
        parts = []
        for kind in _KINDS:
            p = prop(kind)
            if p is None:
                continue
            vs = by_kind.get(kind, [])
            parts.append(
                WF.all_of([present(p), *(WF.by_property(p).not_equal(v) for v in vs)])
                if vs
                else present(p)
            )
        return any_of(parts)

    def _where_filter(self, where: Filter) -> Any | None:
        fields: set[str] = set()

        def walk(n: Filter) -> None:
            if isinstance(n, Cmp):
                fields.add(n.field)
            else:
                for p in n.parts:
                    walk(p)

        walk(where)
        if any(all(_prop_name(f, k) not in self._props for k in _KINDS) for f in fields):
            self._reload_props()  # perhaps another writer stored these fields since we looked
        return self._translate(where)

    # -- the protocol ---------------------------------------------------------------------

    def upsert(
        self,
        ids: Sequence[str],
        vectors: np.ndarray,
        metadata: Sequence[Mapping[str, Any]] | None = None,
        *,
        namespace: str = "",
    ) -> None:
        """Add or replace vectors with their metadata (an object's properties are replaced
        wholesale). Metadata keys that are not identifiers and values that are not strings,
        finite numbers or booleans are not stored (they could not be filtered on).

        Raises:
            InputError: If the namespace, shapes or metadata are malformed.
            BackendError: If the server refuses or some objects fail.
        """
        ids, vecs, metas = check_upsert(ids, vectors, metadata, self.dim, namespace)
        if not ids:
            return
        rows = range(len(ids))  # check_upsert kept the last of repeated ids
        props_of: list[dict[str, Any]] = []
        wanted: dict[str, str] = {}
        for i in rows:
            props: dict[str, Any] = {ID_PROP: ids[i]}
            for key, value in metas[i].items():
                kind = _kind(value)
                if kind is None or not isinstance(key, str) or not FIELD_RE.match(key):
                    continue
                pname = _prop_name(key, kind)
                props[pname] = float(value) if kind == "n" else value
                wanted[pname] = kind
            props_of.append(props)
        self._ensure_props(wanted)
        tenant = _tenant(namespace)
        self._ensure_tenant(tenant)

        from weaviate.classes.data import DataObject

        data = self.coll.with_tenant(tenant).data
        objects = [
            DataObject(
                properties=props,
                uuid=_object_uuid(ids[i]),
                vector={VECTOR_NAME: vecs[i].tolist()},
            )
            for i, props in zip(rows, props_of)
        ]
        # re-sending a chunk after a timeout is safe: same UUIDs, whole objects replaced
        for chunk in self._chunks(objects):
            res = self._retry(
                f"write {len(chunk)} objects to tenant {tenant!r}",
                functools.partial(data.insert_many, list(chunk)),
            )
            if res.errors:
                msgs = sorted({e.message for e in res.errors.values()})
                raise BackendError(
                    f"{self._where}: {len(res.errors)} of {len(chunk)} objects were not written "
                    f"to tenant {tenant!r}: {'; '.join(msgs[:3])}"
                )

    def delete(self, ids: Sequence[str], *, namespace: str = "") -> None:
        """Remove vectors by id; ids that are not stored are ignored."""
        check_namespace(namespace)
        uuids = sorted({_object_uuid(cid) for cid in ids})
        tenant = _tenant(namespace)
        if not uuids or not self._has_tenant(tenant):
            return
        from weaviate.classes.query import Filter as WF

        data = self.coll.with_tenant(tenant).data
        for chunk in self._chunks(uuids):
            res = self._retry(
                f"delete {len(chunk)} objects from tenant {tenant!r}",
                functools.partial(data.delete_many, where=WF.by_id().contains_any(list(chunk))),
            )
            if res.failed:
                raise BackendError(
                    f"{self._where}: {res.failed} objects could not be deleted from tenant "
                    f"{tenant!r}"
                )

    def search(
        self, vector: np.ndarray, k: int, *, where: Filter | None = None, namespace: str = ""
    ) -> list[tuple[str, float]]:
        """Up to ``k`` ``(id, cosine similarity)`` pairs passing ``where``, best first."""
        check_namespace(namespace)
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise InputError(f"expected a query vector of {self.dim} values, got {q.shape[0]}")
        tenant = _tenant(namespace)
        if k <= 0 or not self._has_tenant(tenant):
            return []
        flt = None
        if where is not None:
            flt = self._where_filter(where)
            if flt is None:
                return []
        from weaviate.classes.query import MetadataQuery

        query = self.coll.with_tenant(tenant).query
        res = self._retry(
            f"search tenant {tenant!r}",
            lambda: query.near_vector(
                near_vector=q.tolist(),
                target_vector=VECTOR_NAME,
                limit=min(int(k), _MAX_LIMIT),
                filters=flt,
                return_metadata=MetadataQuery(distance=True),
                return_properties=[ID_PROP],
            ),
        )
        hits = [(str(o.properties[ID_PROP]), 1.0 - float(o.metadata.distance)) for o in res.objects]
        hits.sort(key=lambda h: -h[1])  # the server sorts already; ties stay in its order
        return hits

    def fetch(self, ids: Sequence[str], *, namespace: str = "") -> dict[str, np.ndarray]:
        """The stored vectors of ``ids`` (ids not stored are left out)."""
        check_namespace(namespace)
        wanted = {_object_uuid(cid): cid for cid in ids}
        tenant = _tenant(namespace)
        out: dict[str, np.ndarray] = {}
        if not wanted or not self._has_tenant(tenant):
            return out
        from weaviate.classes.query import Filter as WF

        query = self.coll.with_tenant(tenant).query
        for chunk in self._chunks(sorted(wanted)):
            res = self._retry(
                f"fetch {len(chunk)} objects from tenant {tenant!r}",
                functools.partial(
                    query.fetch_objects,
                    filters=WF.by_id().contains_any(list(chunk)),
                    limit=len(chunk),
                    include_vector=[VECTOR_NAME],
                    return_properties=[ID_PROP],
                ),
            )
            for o in res.objects:
                vec = o.vector.get(VECTOR_NAME)
                if vec is not None:
                    out[str(o.properties[ID_PROP])] = np.asarray(vec, dtype=np.float32)
        return out

    def ids(self, *, namespace: str = "") -> set[str] | None:
        """None: listing every id of a managed service is not cheap (see
        :meth:`~pensive_core.backends.VectorBackend.ids`)."""
        return None

    def count(self, *, namespace: str = "") -> int:
        """Number of vectors stored in the namespace."""
        check_namespace(namespace)
        tenant = _tenant(namespace)
        if not self._has_tenant(tenant):
            return 0
        agg = self.coll.with_tenant(tenant).aggregate
        res = self._retry(f"count tenant {tenant!r}", lambda: agg.over_all(total_count=True))
        return int(res.total_count or 0)

    def persist(self) -> None:
        """Weaviate writes through: nothing to do."""

    def close(self) -> None:
        """Close the client (the data stays on the server). Safe to call twice."""
        client, self.client = self.client, None
        if client is not None:
            # closing a half-open client must not mask the error that left it so
            with contextlib.suppress(Exception):
                client.close()
