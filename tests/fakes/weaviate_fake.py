"""A small in-process Weaviate: the REST and gRPC surface the v4 Python client uses.

It speaks the real wire protocols (JSON over HTTP/1.1, and the gRPC service generated from the
protos bundled with ``weaviate-client``) on ``127.0.0.1`` ephemeral ports, so a real client
connects to it unchanged. Implemented:

* REST: ``/v1/meta``, ``/v1/.well-known/{ready,live,openid-configuration}``, ``/v1/schema``
  (list, create, get, delete a collection; add a property), ``/v1/schema/{C}/tenants`` (list,
  create, delete, and ``HEAD``/``GET`` of one tenant).
* gRPC ``weaviate.v1.Weaviate``: ``BatchObjects``, ``BatchDelete``, ``Search`` (filters,
  ``near_vector`` with cosine/dot/l2 distance, properties, ids, distances, vectors),
  ``Aggregate`` (object count), ``TenantsGet``; and ``grpc.health.v1.Health/Check``.

Behaviour follows the service where the client can tell: collection names get a capital first
letter and property names a lower-case one, property names are unique regardless of case,
text equality follows the property's tokenization, ``NotEqual``/``ContainsNone`` also match
records without the property, ``IsNull`` needs ``indexNullState``, a filter value must suit the
property's type, unknown properties and tenants are errors, multi-tenant collections demand a
tenant (and others refuse one), every vector of a named index has one length, a batch reports
errors per object, and an unset ``limit`` means 10. Storage is in memory and per tenant.

Failure injection: :meth:`FakeWeaviate.fail_grpc` makes the next gRPC calls fail with a status
code, :meth:`FakeWeaviate.fail_rest` makes the next REST calls answer with an HTTP status.
:attr:`FakeWeaviate.calls` records every call.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import re
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlparse

import grpc
import numpy as np
from google.protobuf.json_format import MessageToDict
from weaviate.proto.v1 import (
    aggregate_pb2,
    base_pb2,
    batch_delete_pb2,
    batch_pb2,
    health_weaviate_pb2,
    properties_pb2,
    search_get_pb2,
    tenants_pb2,
    weaviate_pb2_grpc,
)

__all__ = ["FakeWeaviate", "serve_weaviate_fake", "FAKE_VERSION"]

#: What ``/v1/meta`` reports: recent enough for the client's gRPC paths (aggregate needs 1.29).
FAKE_VERSION = "1.32.0"
_DEFAULT_LIMIT = 10  # QUERY_DEFAULTS_LIMIT
_MAX_RESULTS = 10_000  # QUERY_MAXIMUM_RESULTS
_CLASS_RE = re.compile(r"^[A-Z][_0-9A-Za-z]{0,254}$")
_PROP_RE = re.compile(r"^[_A-Za-z][_0-9A-Za-z]{0,230}$")
_TENANT_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_RESERVED_PROPS = {"id", "_id", "_additional", "vector"}
Op = base_pb2.Filters


class ServiceError(Exception):
    """An error the service reports: an HTTP status for REST, a gRPC code for gRPC."""

    def __init__(self, message: str, status: int = 422, code: Any = grpc.StatusCode.UNKNOWN):
        super().__init__(message)
        self.status = status
        self.code = code


def _hnsw_defaults() -> dict[str, Any]:
    return {
        "skip": False,
        "cleanupIntervalSeconds": 300,
        "maxConnections": 32,
        "efConstruction": 128,
        "ef": -1,
        "dynamicEfMin": 100,
        "dynamicEfMax": 500,
        "dynamicEfFactor": 8,
        "vectorCacheMaxObjects": 1_000_000_000_000,
        "flatSearchCutoff": 40000,
        "distance": "cosine",
        "filterStrategy": "sweeping",
        "pq": {"enabled": False},
        "bq": {"enabled": False},
        "sq": {"enabled": False},
    }


def _capitalize(name: str) -> str:
    return name[:1].upper() + name[1:]


def _lower_first(name: str) -> str:
    return name[:1].lower() + name[1:]


def _tokens(text: str, tokenization: str) -> list[str]:
    """Weaviate's tokenizers, for the ones a filter can meet here."""
    if tokenization == "field":
        return [text.strip()]
    if tokenization == "whitespace":
        return text.split()
    if tokenization == "lowercase":
        return text.lower().split()
    # "word" (the default): lower-cased runs of letters and digits
    return [t for t in re.split(r"[^0-9A-Za-z\u00C0-\uFFFF]+", text.lower()) if t]


@dataclass
class _Object:
    uuid: str
    properties: dict[str, Any]
    vectors: dict[str, np.ndarray]
    created: int = field(default_factory=lambda: int(time.time() * 1000))


@dataclass
class _Class:
    schema: dict[str, Any]
    # tenant name (or "" for a collection without multi-tenancy) -> uuid -> object
    shards: dict[str, dict[str, _Object]] = field(default_factory=dict)
    dims: dict[tuple[str, str], int] = field(default_factory=dict)  # (shard, vector) -> length

    @property
    def name(self) -> str:
        return str(self.schema["class"])

    @property
    def multi_tenant(self) -> bool:
        return bool(self.schema.get("multiTenancyConfig", {}).get("enabled"))

    def prop(self, name: str) -> dict[str, Any] | None:
        for p in self.schema.get("properties") or []:
            if p["name"] == name:
                return p  # type: ignore[no-any-return]
        return None

    def vector_names(self) -> list[str]:
        return list(self.schema.get("vectorConfig") or {})


class FakeWeaviate:
    """The fake's state and servers; use :func:`serve_weaviate_fake` to run one.

    Attributes:
        url: The REST base URL (``http://127.0.0.1:PORT``).
        grpc_port: The gRPC port on the same host.
        calls: ``(kind, name, detail)`` per call: kind ``"rest"`` (name ``"METHOD /path"``) or
            ``"grpc"`` (name the method; detail the number of objects for ``BatchObjects``).
        api_key: If set, every call but the health checks needs ``Bearer <api_key>``.
    """

    def __init__(self, api_key: str | None = None) -> None:
        self.api_key = api_key
        self.calls: list[tuple[str, str, Any]] = []
        self._lock = threading.RLock()
        self._classes: dict[str, _Class] = {}
        self._grpc_failures: list[tuple[Any, str, set[str] | None]] = []
        self._rest_failures: list[tuple[int, str]] = []
        self.url = ""
        self.grpc_port = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._grpc: grpc.Server | None = None

    # -- failure injection ----------------------------------------------------------------

    def fail_grpc(
        self,
        n: int,
        code: Any = grpc.StatusCode.UNAVAILABLE,
        *,
        methods: set[str] | None = None,
        message: str = "injected failure",
    ) -> None:
        """Make the next ``n`` gRPC calls (to ``methods``, or any) fail with ``code``."""
        with self._lock:
            self._grpc_failures.extend([(code, message, methods)] * n)

    def fail_rest(self, n: int, status: int = 503, *, path_prefix: str = "/v1/schema") -> None:
        """Make the next ``n`` REST calls under ``path_prefix`` answer ``status``."""
        with self._lock:
            self._rest_failures.extend([(status, path_prefix)] * n)

    def grpc_calls(self, name: str) -> list[Any]:
        """The details of the recorded gRPC calls to method ``name``."""
        return [d for kind, n, d in self.calls if kind == "grpc" and n == name]

    def _take_grpc_failure(self, method: str) -> tuple[Any, str] | None:
        with self._lock:
            for i, (code, message, methods) in enumerate(self._grpc_failures):
                if methods is None or method in methods:
                    del self._grpc_failures[i]
                    return code, message
        return None

    def _take_rest_failure(self, path: str) -> int | None:
        with self._lock:
            for i, (status, prefix) in enumerate(self._rest_failures):
                if path.startswith(prefix):
                    del self._rest_failures[i]
                    return status
        return None

    # -- schema ---------------------------------------------------------------------------

    def _class(self, name: str) -> _Class:
        cls = self._classes.get(_capitalize(name))
        if cls is None:
            raise ServiceError(
                f"could not find class {name} in schema", 404, grpc.StatusCode.NOT_FOUND
            )
        return cls

    def _normalize_property(self, raw: dict[str, Any], existing: list[dict[str, Any]]) -> dict:
        name = raw.get("name") or ""
        if not _PROP_RE.match(name) or name.lower() in _RESERVED_PROPS:
            raise ServiceError(f"'{name}' is not a valid property name")
        name = _lower_first(name)
        if any(p["name"].lower() == name.lower() for p in existing):
            raise ServiceError(f"property with name '{name}' already exists")
        dtype = raw.get("dataType")
        if not dtype or not isinstance(dtype, list):
            raise ServiceError("property must contain dataType")
        kind = dtype[0]
        prop: dict[str, Any] = {
            "name": name,
            "dataType": dtype,
            "description": raw.get("description", ""),
            "indexFilterable": raw.get("indexFilterable", True),
            "indexSearchable": raw.get("indexSearchable", kind in ("text", "text[]")),
            "indexRangeFilters": raw.get("indexRangeFilters", False),
        }
        if kind in ("text", "text[]"):
            tok = raw.get("tokenization") or "word"
            if tok not in ("word", "lowercase", "whitespace", "field", "trigram", "gse"):
                raise ServiceError(f"tokenization '{tok}' is not allowed for data type '{kind}'")
            prop["tokenization"] = tok
        elif raw.get("tokenization"):
            raise ServiceError(f"tokenization is not allowed for data type '{kind}'")
        return prop

    def create_class(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /v1/schema."""
        name = _capitalize(str(body.get("class") or ""))
        if not _CLASS_RE.match(name):
            raise ServiceError(f"'{body.get('class')}' is not a valid class name")
        with self._lock:
            if name.lower() in {c.lower() for c in self._classes}:
                raise ServiceError(f"class name {name} already exists")
            props: list[dict[str, Any]] = []
            for raw in body.get("properties") or []:
                props.append(self._normalize_property(raw, props))
            inverted = {
                "bm25": {"b": 0.75, "k1": 1.2},
                "cleanupIntervalSeconds": 60,
                "indexNullState": False,
                "indexPropertyLength": False,
                "indexTimestamps": False,
                "stopwords": {"preset": "en", "additions": None, "removals": None},
            }
            given = body.get("invertedIndexConfig") or {}
            inverted.update({k: v for k, v in given.items() if k not in ("stopwords", "bm25")})
            mt = body.get("multiTenancyConfig") or {}
            schema: dict[str, Any] = {
                "class": name,
                "description": body.get("description", ""),
                "properties": props,
                "invertedIndexConfig": inverted,
                "multiTenancyConfig": {
                    "enabled": bool(mt.get("enabled", False)),
                    "autoTenantCreation": bool(mt.get("autoTenantCreation", False)),
                    "autoTenantActivation": bool(mt.get("autoTenantActivation", False)),
                },
                "replicationConfig": {
                    "factor": 1,
                    "asyncEnabled": False,
                    "deletionStrategy": "NoAutomatedResolution",
                },
                "shardingConfig": {
                    "virtualPerPhysical": 128,
                    "desiredCount": 1,
                    "actualCount": 1,
                    "desiredVirtualCount": 128,
                    "actualVirtualCount": 128,
                    "key": "_id",
                    "strategy": "hash",
                    "function": "murmur3",
                },
            }
            if body.get("vectorConfig"):
                vc = {}
                for vname, conf in body["vectorConfig"].items():
                    vectorizer = conf.get("vectorizer") or {"none": {}}
                    if list(vectorizer) != ["none"]:
                        raise ServiceError(f"vectorizer {list(vectorizer)} is not available")
                    index = _hnsw_defaults()
                    index.update(conf.get("vectorIndexConfig") or {})
                    if conf.get("vectorIndexType", "hnsw") not in ("hnsw", "flat"):
                        raise ServiceError("unsupported vector index type")
                    vc[vname] = {
                        "vectorizer": vectorizer,
                        "vectorIndexType": conf.get("vectorIndexType", "hnsw"),
                        "vectorIndexConfig": index,
                    }
                schema["vectorConfig"] = vc
            else:  # the legacy single, unnamed vector
                if body.get("vectorizer", "none") != "none":
                    raise ServiceError(f"vectorizer {body.get('vectorizer')} is not available")
                index = _hnsw_defaults()
                index.update(body.get("vectorIndexConfig") or {})
                schema.update(vectorizer="none", vectorIndexType="hnsw", vectorIndexConfig=index)
            cls = self._classes[name] = _Class(schema)
            if not cls.multi_tenant:
                cls.shards[""] = {}
            return json.loads(json.dumps(schema))

    def add_property(self, class_name: str, raw: dict[str, Any]) -> dict[str, Any]:
        """POST /v1/schema/{C}/properties."""
        with self._lock:
            cls = self._class(class_name)
            prop = self._normalize_property(raw, cls.schema["properties"])
            cls.schema["properties"].append(prop)
            return dict(prop)

    def add_tenants(self, class_name: str, tenants: list[dict[str, Any]]) -> list[dict]:
        """POST /v1/schema/{C}/tenants; tenants that exist already are left as they are."""
        with self._lock:
            cls = self._class(class_name)
            if not cls.multi_tenant:
                raise ServiceError(f'multi-tenancy is not enabled for class "{cls.name}"')
            names = [str(t.get("name", "")) for t in tenants]
            for i, n in enumerate(names):
                if not _TENANT_RE.match(n):
                    raise ServiceError(
                        f"tenant name at index {i}: tenant name should only contain "
                        "alphanumeric characters (a-z, A-Z, 0-9), underscore (_), and hyphen "
                        "(-), with a length between 1 and 64 characters"
                    )
            if len(set(names)) != len(names):
                raise ServiceError("duplicate tenant name")
            for n in names:
                cls.shards.setdefault(n, {})
            return [{"name": n, "activityStatus": "ACTIVE"} for n in names]

    def _shard(self, cls: _Class, tenant: str) -> dict[str, _Object]:
        if cls.multi_tenant:
            if not tenant:
                raise ServiceError(
                    f"class {cls.name} has multi-tenancy enabled, but request was without tenant",
                    code=grpc.StatusCode.UNKNOWN,
                )
            shard = cls.shards.get(tenant)
            if shard is None:
                raise ServiceError(f'tenant not found: "{tenant}"', code=grpc.StatusCode.UNKNOWN)
            return shard
        if tenant:
            raise ServiceError(
                f"class {cls.name} has multi-tenancy disabled, but request was with tenant",
                code=grpc.StatusCode.UNKNOWN,
            )
        return cls.shards[""]

    # -- filters --------------------------------------------------------------------------

    def _matches(self, cls: _Class, f: base_pb2.Filters, obj: _Object) -> bool:
        op = f.operator
        if op == Op.OPERATOR_AND:
            return all(self._matches(cls, s, obj) for s in f.filters)
        if op == Op.OPERATOR_OR:
            return any(self._matches(cls, s, obj) for s in f.filters)
        if op == Op.OPERATOR_NOT:
            if len(f.filters) != 1:
                raise ServiceError("operator Not takes exactly one operand")
            return not self._matches(cls, f.filters[0], obj)
        if f.HasField("target"):
            if f.target.WhichOneof("target") != "property":
                raise ServiceError("reference filters are not supported here")
            path = f.target.property
        elif f.on:
            path = f.on[-1]
        else:
            raise ServiceError("filter has no property")
        kind_field = f.WhichOneof("test_value")
        if path in ("_id", "id"):
            return self._match_id(f, kind_field, obj)
        prop = cls.prop(path)
        if prop is None:
            raise ServiceError(
                f"no such prop with name '{path}' found in class '{cls.name}' in the schema. "
                "Check your schema files for which properties in this class are available"
            )
        stored = obj.properties.get(path)
        if op == Op.OPERATOR_IS_NULL:
            if not cls.schema["invertedIndexConfig"].get("indexNullState"):
                raise ServiceError(
                    "Nullstate must be indexed to be filterable! add `indexNullState: true` to "
                    "the invertedIndexConfig"
                )
            if kind_field != "value_boolean":
                raise ServiceError("operator IsNull requires a valueBoolean")
            return (stored is None) == f.value_boolean
        dtype = prop["dataType"][0].rstrip("[]")
        allowed = {
            "text": ("value_text", "value_text_array"),
            "number": ("value_number", "value_number_array"),
            "int": ("value_int", "value_int_array"),
            "boolean": ("value_boolean", "value_boolean_array"),
        }.get(dtype, ())
        if kind_field not in allowed:
            short = (kind_field or "none").replace("value_", "value ")
            raise ServiceError(
                f"data type filter cannot use {short!r} on type {dtype!r}, use "
                f"{' or '.join(a.replace('_', ' ') for a in allowed)} instead"
            )
        value = getattr(f, kind_field)
        values = list(value.values) if kind_field.endswith("_array") else [value]
        stored_list = [] if stored is None else stored if isinstance(stored, list) else [stored]
        tok = prop.get("tokenization", "word")

        def eq(a: Any, b: Any) -> bool:
            if dtype == "text":
                want = _tokens(str(b), tok)
                have = _tokens(str(a), tok)
                return bool(want) and all(t in have for t in want)
            return bool(a == b)

        if op in (Op.OPERATOR_EQUAL, Op.OPERATOR_NOT_EQUAL):
            if len(values) != 1:
                raise ServiceError("operator Equal takes a single value")
            hit = any(eq(s, values[0]) for s in stored_list)
            return hit if op == Op.OPERATOR_EQUAL else not hit
        if op in (
            Op.OPERATOR_GREATER_THAN,
            Op.OPERATOR_GREATER_THAN_EQUAL,
            Op.OPERATOR_LESS_THAN,
            Op.OPERATOR_LESS_THAN_EQUAL,
        ):
            if dtype not in ("number", "int", "date"):
                raise ServiceError(f"range operators are not supported on type {dtype!r}")
            x = values[0]
            cmp = {
                Op.OPERATOR_GREATER_THAN: lambda s: s > x,
                Op.OPERATOR_GREATER_THAN_EQUAL: lambda s: s >= x,
                Op.OPERATOR_LESS_THAN: lambda s: s < x,
                Op.OPERATOR_LESS_THAN_EQUAL: lambda s: s <= x,
            }[op]
            return any(cmp(s) for s in stored_list)
        if op == Op.OPERATOR_CONTAINS_ANY:
            return any(eq(s, v) for v in values for s in stored_list)
        if op == Op.OPERATOR_CONTAINS_ALL:
            return all(any(eq(s, v) for s in stored_list) for v in values)
        if op == Op.OPERATOR_CONTAINS_NONE:
            return not any(eq(s, v) for v in values for s in stored_list)
        if op == Op.OPERATOR_LIKE:
            return any(fnmatch.fnmatchcase(str(s), str(values[0])) for s in stored_list)
        raise ServiceError(f"operator {Op.Operator.Name(op)} is not supported")

    @staticmethod
    def _match_id(f: base_pb2.Filters, kind_field: str | None, obj: _Object) -> bool:
        if kind_field == "value_text":
            values = [f.value_text]
        elif kind_field == "value_text_array":
            values = list(f.value_text_array.values)
        else:
            raise ServiceError("filters on the id take text values")
        hit = obj.uuid in {v.lower() for v in values}
        if f.operator in (Op.OPERATOR_EQUAL, Op.OPERATOR_CONTAINS_ANY):
            return hit
        if f.operator in (Op.OPERATOR_NOT_EQUAL, Op.OPERATOR_CONTAINS_NONE):
            return not hit
        raise ServiceError("unsupported operator on the id")

    # -- data -----------------------------------------------------------------------------

    def _coerce(self, cls: _Class, name: str, value: Any) -> Any:
        prop = cls.prop(name)
        if prop is None:
            raise ServiceError(
                f"no such prop with name '{name}' found in class '{cls.name}' in the schema. "
                "Check your schema files for which properties in this class are available"
            )
        dtype = prop["dataType"][0]
        bad = ServiceError(
            f"invalid {dtype} property '{name}' on class '{cls.name}': "
            f"not a {dtype}, but {type(value).__name__}"
        )
        if value is None:
            return None
        if dtype == "text":
            if not isinstance(value, str):
                raise bad
            return value
        if dtype == "number":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise bad
            return float(value)
        if dtype == "int":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise bad
            if float(value) != int(value):
                raise bad
            return int(value)
        if dtype == "boolean":
            if not isinstance(value, bool):
                raise bad
            return value
        if dtype.endswith("[]"):
            if not isinstance(value, list):
                raise bad
            return [self._coerce_elem(dtype[:-2], v, bad) for v in value]
        raise bad

    @staticmethod
    def _coerce_elem(dtype: str, v: Any, bad: ServiceError) -> Any:
        ok = {
            "text": isinstance(v, str),
            "number": isinstance(v, (int, float)) and not isinstance(v, bool),
            "int": isinstance(v, int) and not isinstance(v, bool),
            "boolean": isinstance(v, bool),
        }.get(dtype, False)
        if not ok:
            raise bad
        return float(v) if dtype == "number" else v

    @staticmethod
    def _decode(raw: bytes) -> np.ndarray:
        return np.frombuffer(raw, dtype="<f4").astype(np.float32)

    def _object_vectors(self, cls: _Class, obj: batch_pb2.BatchObject) -> dict[str, np.ndarray]:
        named = cls.vector_names()
        out: dict[str, np.ndarray] = {}
        for v in obj.vectors:
            if v.type == base_pb2.Vectors.VECTOR_TYPE_MULTI_FP32:
                raise ServiceError("multi-vectors are not supported here")
            name = v.name or (named[0] if len(named) == 1 else "")
            if name not in named:
                raise ServiceError(
                    f"collection {cls.name} does not have configured vector {name!r}"
                )
            out[name] = self._decode(v.vector_bytes)
        legacy = None
        if obj.vector_bytes:
            legacy = self._decode(obj.vector_bytes)
        elif len(obj.vector):
            legacy = np.asarray(list(obj.vector), dtype=np.float32)
        if legacy is not None:
            if named:
                if len(named) != 1:
                    raise ServiceError(
                        f"collection {cls.name} has multiple vectors, but vector is not named"
                    )
                out[named[0]] = legacy
            else:
                out[""] = legacy
        return out

    def batch_objects(self, req: batch_pb2.BatchObjectsRequest) -> batch_pb2.BatchObjectsReply:
        """The gRPC BatchObjects method: per-object errors, objects replaced wholesale."""
        errors = []
        with self._lock:
            for i, obj in enumerate(req.objects):
                try:
                    cls = self._class(obj.collection)
                    shard_name = obj.tenant if cls.multi_tenant else ""
                    shard = self._shard(cls, obj.tenant)
                    raw = MessageToDict(obj.properties.non_ref_properties)
                    props: dict[str, Any] = {}
                    for k, v in raw.items():
                        props[k] = self._coerce(cls, k, v)
                    for group in (
                        obj.properties.text_array_properties,
                        obj.properties.int_array_properties,
                        obj.properties.boolean_array_properties,
                    ):
                        for arr in group:
                            props[arr.prop_name] = self._coerce(
                                cls, arr.prop_name, list(arr.values)
                            )
                    for arr in obj.properties.number_array_properties:
                        vals = np.frombuffer(arr.values_bytes, dtype="<f8").tolist()
                        props[arr.prop_name] = self._coerce(cls, arr.prop_name, vals)
                    if (
                        obj.properties.single_target_ref_props
                        or obj.properties.multi_target_ref_props
                        or obj.properties.object_properties
                        or obj.properties.object_array_properties
                    ):
                        raise ServiceError("references and nested objects are not supported here")
                    vectors = self._object_vectors(cls, obj)
                    for vname, vec in vectors.items():
                        have = cls.dims.get((shard_name, vname))
                        if have is not None and have != len(vec):
                            raise ServiceError(
                                f"new node has a vector with length {len(vec)}. Existing nodes "
                                f"have vectors with length {have}"
                            )
                    for vname, vec in vectors.items():
                        cls.dims.setdefault((shard_name, vname), len(vec))
                    uid = obj.uuid.lower() if obj.uuid else ""
                    if not re.match(r"^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$", uid):
                        raise ServiceError(f"invalid UUID {obj.uuid!r}")
                    shard[uid] = _Object(
                        uid, {k: v for k, v in props.items() if v is not None}, vectors
                    )
                except ServiceError as exc:
                    errors.append(batch_pb2.BatchObjectsReply.BatchError(index=i, error=str(exc)))
        return batch_pb2.BatchObjectsReply(took=0.001, errors=errors)

    def batch_delete(self, req: batch_delete_pb2.BatchDeleteRequest) -> Any:
        """The gRPC BatchDelete method."""
        with self._lock:
            cls = self._class(req.collection)
            shard = self._shard(cls, req.tenant if req.HasField("tenant") else "")
            if not req.HasField("filters"):
                raise ServiceError(
                    "batch delete needs a filter", code=grpc.StatusCode.INVALID_ARGUMENT
                )
            hits = [o for o in shard.values() if self._matches(cls, req.filters, o)]
            if len(hits) > _MAX_RESULTS:
                hits = hits[:_MAX_RESULTS]
            if not req.dry_run:
                for o in hits:
                    del shard[o.uuid]
            objects = (
                [
                    batch_delete_pb2.BatchDeleteObject(
                        uuid=bytes.fromhex(o.uuid.replace("-", "")), successful=not req.dry_run
                    )
                    for o in hits
                ]
                if req.verbose
                else []
            )
            return batch_delete_pb2.BatchDeleteReply(
                took=0.001,
                matches=len(hits),
                successful=0 if req.dry_run else len(hits),
                failed=0,
                objects=objects,
            )

    def search(self, req: search_get_pb2.SearchRequest) -> search_get_pb2.SearchReply:
        """The gRPC Search method: filters, then near_vector ranking or id order."""
        for unsupported in ("hybrid_search", "bm25_search", "near_object", "near_text", "group_by"):
            if req.HasField(unsupported):
                raise ServiceError(
                    f"{unsupported} is not supported by this fake",
                    code=grpc.StatusCode.UNIMPLEMENTED,
                )
        with self._lock:
            cls = self._class(req.collection)
            shard = self._shard(cls, req.tenant)
            objs = list(shard.values())
            if req.HasField("filters"):
                objs = [o for o in objs if self._matches(cls, req.filters, o)]
            limit = req.limit or _DEFAULT_LIMIT
            if limit > _MAX_RESULTS:
                raise ServiceError(
                    f"query maximum results exceeded: limit {limit} > {_MAX_RESULTS}",
                    code=grpc.StatusCode.INVALID_ARGUMENT,
                )
            dists: dict[str, float] = {}
            if req.HasField("near_vector"):
                vname, q = self._query_vector(cls, req.near_vector)
                metric = self._metric(cls, vname)
                want = cls.dims.get((req.tenant if cls.multi_tenant else "", vname))
                if want is not None and want != len(q):
                    raise ServiceError(
                        f"vector search: knn search: vector lengths don't match: {len(q)} vs {want}"
                    )
                scored = []
                for o in objs:
                    vec = o.vectors.get(vname)
                    if vec is None:
                        continue
                    dists[o.uuid] = self._distance(metric, q, vec)
                    scored.append(o)
                nv = req.near_vector
                if nv.HasField("distance"):
                    scored = [o for o in scored if dists[o.uuid] <= nv.distance]
                objs = sorted(scored, key=lambda o: (dists[o.uuid], o.uuid))
            else:
                objs.sort(key=lambda o: o.uuid)
            objs = objs[req.offset : req.offset + limit]
            results = [self._result(cls, req, o, dists.get(o.uuid)) for o in objs]
        return search_get_pb2.SearchReply(took=0.001, results=results)

    def _query_vector(self, cls: _Class, nv: Any) -> tuple[str, np.ndarray]:
        named = cls.vector_names()
        targets = list(nv.targets.target_vectors) if nv.HasField("targets") else []
        targets = targets or list(nv.target_vectors)
        if len(targets) > 1:
            raise ServiceError("multi-target search is not supported by this fake")
        if named:
            if targets:
                vname = targets[0]
                if vname not in named:
                    raise ServiceError(f"target vector {vname!r} not found")
            elif len(named) == 1:
                vname = named[0]
            else:
                raise ServiceError("multiple vectors configured, but no target vector was given")
        else:
            if targets:
                raise ServiceError("target vectors given for a collection without named vectors")
            vname = ""
        if len(nv.vectors):
            if nv.vectors[0].type == base_pb2.Vectors.VECTOR_TYPE_MULTI_FP32:
                raise ServiceError("multi-vector queries are not supported by this fake")
            q = self._decode(nv.vectors[0].vector_bytes)
        elif nv.vector_bytes:
            q = self._decode(nv.vector_bytes)
        elif len(nv.vector):
            q = np.asarray(list(nv.vector), dtype=np.float32)
        else:
            raise ServiceError("near_vector without a vector")
        return vname, q

    @staticmethod
    def _metric(cls: _Class, vname: str) -> str:
        if vname:
            conf = cls.schema["vectorConfig"][vname]["vectorIndexConfig"]
        else:
            conf = cls.schema["vectorIndexConfig"]
        return str(conf.get("distance", "cosine"))

    @staticmethod
    def _distance(metric: str, q: np.ndarray, v: np.ndarray) -> float:
        if metric == "dot":
            return float(-(q @ v))
        if metric == "l2-squared":
            d = q - v
            return float(d @ d)
        nq, nv = float(np.linalg.norm(q)), float(np.linalg.norm(v))
        if nq == 0 or nv == 0:
            return 1.0
        return float(1.0 - (q @ v) / (nq * nv))

    def _result(
        self, cls: _Class, req: search_get_pb2.SearchRequest, o: _Object, dist: float | None
    ) -> search_get_pb2.SearchResult:
        md = req.metadata
        meta = search_get_pb2.MetadataResult(
            id=o.uuid, id_as_bytes=bytes.fromhex(o.uuid.replace("-", ""))
        )
        if md.distance and dist is not None:
            meta.distance = dist
            meta.distance_present = True
        if md.certainty and dist is not None and self._metric_is_cosine(cls, req):
            meta.certainty = 1.0 - dist / 2.0
            meta.certainty_present = True
        if md.creation_time_unix:
            meta.creation_time_unix = o.created
            meta.creation_time_unix_present = True
        names = list(md.vectors)
        if md.vector and "" in o.vectors:
            meta.vector_bytes = o.vectors[""].astype("<f4").tobytes()
        for name in names:
            if name not in o.vectors:
                raise ServiceError(f"vector {name!r} not found")
            meta.vectors.append(
                base_pb2.Vectors(
                    name=name,
                    vector_bytes=o.vectors[name].astype("<f4").tobytes(),
                    type=base_pb2.Vectors.VECTOR_TYPE_SINGLE_FP32,
                )
            )
        wanted = (
            [p["name"] for p in cls.schema["properties"]]
            # no properties request at all also means every non-reference property
            if not req.HasField("properties") or req.properties.return_all_nonref_properties
            else list(req.properties.non_ref_properties)
        )
        fields = {}
        for name in wanted:
            if cls.prop(name) is None:
                raise ServiceError(f"no such prop with name '{name}' found in class '{cls.name}'")
            if name in o.properties:
                fields[name] = self._value(o.properties[name])
        props = search_get_pb2.PropertiesResult(
            target_collection=cls.name,
            non_ref_props=properties_pb2.Properties(fields=fields),
        )
        return search_get_pb2.SearchResult(properties=props, metadata=meta)

    def _metric_is_cosine(self, cls: _Class, req: search_get_pb2.SearchRequest) -> bool:
        vname, _ = self._query_vector(cls, req.near_vector)
        return self._metric(cls, vname) == "cosine"

    def _value(self, v: Any) -> properties_pb2.Value:
        if isinstance(v, bool):
            return properties_pb2.Value(bool_value=v)
        if isinstance(v, int):
            return properties_pb2.Value(int_value=v)
        if isinstance(v, float):
            return properties_pb2.Value(number_value=v)
        if isinstance(v, str):
            return properties_pb2.Value(text_value=v)
        if isinstance(v, list):
            return properties_pb2.Value(
                list_value=properties_pb2.ListValue(values=[self._value(x) for x in v])
            )
        return properties_pb2.Value(text_value=str(v))

    def aggregate(self, req: aggregate_pb2.AggregateRequest) -> aggregate_pb2.AggregateReply:
        """The gRPC Aggregate method: the object count (with an optional filter)."""
        if len(req.aggregations) or req.HasField("group_by") or req.WhichOneof("search"):
            raise ServiceError(
                "only objects_count is supported by this fake", code=grpc.StatusCode.UNIMPLEMENTED
            )
        with self._lock:
            cls = self._class(req.collection)
            objs = list(self._shard(cls, req.tenant).values())
            if req.HasField("filters"):
                objs = [o for o in objs if self._matches(cls, req.filters, o)]
            single = aggregate_pb2.AggregateReply.Single()
            if req.objects_count:
                single.objects_count = len(objs)
            return aggregate_pb2.AggregateReply(took=0.001, single_result=single)

    def tenants_get(self, req: tenants_pb2.TenantsGetRequest) -> tenants_pb2.TenantsGetReply:
        """The gRPC TenantsGet method."""
        with self._lock:
            cls = self._class(req.collection)
            if not cls.multi_tenant:
                raise ServiceError(f'multi-tenancy is not enabled for class "{cls.name}"')
            names = sorted(cls.shards)
            if req.HasField("names"):
                names = [n for n in req.names.values if n in cls.shards]
            return tenants_pb2.TenantsGetReply(
                took=0.001,
                tenants=[
                    tenants_pb2.Tenant(
                        name=n, activity_status=tenants_pb2.TENANT_ACTIVITY_STATUS_HOT
                    )
                    for n in names
                ],
            )

    # -- REST -----------------------------------------------------------------------------

    def rest(self, method: str, path: str, body: Any, auth: str | None) -> tuple[int, Any]:
        """Answer one REST request: ``(status, json body or None)``."""
        self.calls.append(("rest", f"{method} {path}", None))
        parts = [unquote(p) for p in path.strip("/").split("/")]
        if parts[:1] != ["v1"]:
            return 404, None
        rest = parts[1:]
        if rest in (
            [".well-known", "ready"],
            [".well-known", "live"],
        ):
            return 200, None
        if rest == [".well-known", "openid-configuration"]:
            return 404, None
        if self.api_key is not None and auth != f"Bearer {self.api_key}":
            return 401, {"code": 401, "message": "anonymous access not enabled"}
        failure = self._take_rest_failure(path)
        if failure is not None:
            return failure, {"error": [{"message": "injected failure"}]}
        try:
            return self._route(method, rest, body)
        except ServiceError as exc:
            return exc.status, {"error": [{"message": str(exc)}]}

    def _route(self, method: str, rest: list[str], body: Any) -> tuple[int, Any]:
        if rest == ["meta"] and method == "GET":
            return 200, {
                "hostname": "http://[::]:8080",
                "version": FAKE_VERSION,
                "modules": {},
                "grpcMaxMessageSize": 104858000,
            }
        if rest[:1] != ["schema"]:
            return 404, None
        with self._lock:
            if len(rest) == 1:
                if method == "GET":
                    return 200, {"classes": [c.schema for c in self._classes.values()]}
                if method == "POST":
                    return 200, self.create_class(body or {})
            elif len(rest) == 2:
                name = _capitalize(rest[1])
                if method in ("GET", "HEAD"):
                    cls = self._classes.get(name)
                    return (200, cls.schema) if cls else (404, None)
                if method == "DELETE":
                    self._classes.pop(name, None)
                    return 200, None
                if method == "PUT":
                    raise ServiceError("updating a class is not supported by this fake", 501)
            elif len(rest) == 3 and rest[2] == "properties" and method == "POST":
                return 200, self.add_property(rest[1], body or {})
            elif len(rest) == 3 and rest[2] == "tenants":
                if method == "POST":
                    return 200, self.add_tenants(rest[1], body or [])
                cls = self._class(rest[1])
                if not cls.multi_tenant:
                    raise ServiceError(f'multi-tenancy is not enabled for class "{cls.name}"')
                if method == "GET":
                    return 200, [
                        {"name": n, "activityStatus": "ACTIVE"} for n in sorted(cls.shards)
                    ]
                if method == "DELETE":
                    for n in body or []:
                        cls.shards.pop(n, None)
                    return 200, None
            elif len(rest) == 4 and rest[2] == "tenants" and method in ("GET", "HEAD"):
                cls = self._class(rest[1])
                if not cls.multi_tenant:
                    raise ServiceError(f'multi-tenancy is not enabled for class "{cls.name}"')
                if rest[3] in cls.shards:
                    return 200, {"name": rest[3], "activityStatus": "ACTIVE"}
                return 404, None
        return 405 if rest[:1] == ["schema"] else 404, None


class _Servicer(weaviate_pb2_grpc.WeaviateServicer):
    """Maps gRPC calls onto the fake, with auth, failure injection and call recording."""

    def __init__(self, fake: FakeWeaviate) -> None:
        self.fake = fake

    def _run(self, name: str, detail: Any, context: grpc.ServicerContext, fn: Any) -> Any:
        self.fake.calls.append(("grpc", name, detail))
        if self.fake.api_key is not None:
            md = dict(context.invocation_metadata())
            if md.get("authorization") != f"Bearer {self.fake.api_key}":
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "anonymous access not enabled")
        failure = self.fake._take_grpc_failure(name)
        if failure is not None:
            context.abort(failure[0], failure[1])
        try:
            return fn()
        except ServiceError as exc:
            context.abort(exc.code, str(exc))

    def Search(self, request: Any, context: Any) -> Any:  # noqa: N802 (gRPC's names)
        return self._run("Search", None, context, lambda: self.fake.search(request))

    def BatchObjects(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self._run(
            "BatchObjects",
            len(request.objects),
            context,
            lambda: self.fake.batch_objects(request),
        )

    def BatchDelete(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self._run("BatchDelete", None, context, lambda: self.fake.batch_delete(request))

    def TenantsGet(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self._run("TenantsGet", None, context, lambda: self.fake.tenants_get(request))

    def Aggregate(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self._run("Aggregate", None, context, lambda: self.fake.aggregate(request))


def _health_handler() -> grpc.GenericRpcHandler:
    """``grpc.health.v1.Health/Check``, which the client pings with Weaviate's own messages."""

    def check(request: Any, context: Any) -> Any:
        return health_weaviate_pb2.WeaviateHealthCheckResponse(
            status=health_weaviate_pb2.WeaviateHealthCheckResponse.SERVING
        )

    return grpc.method_handlers_generic_handler(
        "grpc.health.v1.Health",
        {
            "Check": grpc.unary_unary_rpc_method_handler(
                check,
                request_deserializer=health_weaviate_pb2.WeaviateHealthCheckRequest.FromString,
                response_serializer=health_weaviate_pb2.WeaviateHealthCheckResponse.SerializeToString,
            )
        },
    )


def _http_handler(fake: FakeWeaviate) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as httpx expects
        # headers and body go out in separate writes: without this, Nagle's algorithm and
        # delayed ACKs add ~40 ms to every response
        disable_nagle_algorithm = True

        def _handle(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                self._send(400, {"error": [{"message": "invalid JSON body"}]}, method)
                return
            status, payload = fake.rest(
                method, urlparse(self.path).path, body, self.headers.get("Authorization")
            )
            self._send(status, payload, method)

        def _send(self, status: int, payload: Any, method: str) -> None:
            data = b"" if payload is None else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if method != "HEAD" and data:
                self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (http.server's names)
            self._handle("GET")

        def do_HEAD(self) -> None:  # noqa: N802
            self._handle("HEAD")

        def do_POST(self) -> None:  # noqa: N802
            self._handle("POST")

        def do_PUT(self) -> None:  # noqa: N802
            self._handle("PUT")

        def do_DELETE(self) -> None:  # noqa: N802
            self._handle("DELETE")

        def do_PATCH(self) -> None:  # noqa: N802
            self._handle("PATCH")

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

    return Handler


@contextlib.contextmanager
def serve_weaviate_fake(api_key: str | None = None) -> Iterator[FakeWeaviate]:
    """Run a fake Weaviate (REST and gRPC on ephemeral 127.0.0.1 ports) for the block.

    Args:
        api_key: If given, calls must carry ``Authorization: Bearer <api_key>``.

    Yields:
        The running :class:`FakeWeaviate` (``.url``, ``.grpc_port``, failure injection).
    """
    fake = FakeWeaviate(api_key=api_key)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _http_handler(fake))
    httpd.daemon_threads = True
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    weaviate_pb2_grpc.add_WeaviateServicer_to_server(_Servicer(fake), server)
    server.add_generic_rpc_handlers((_health_handler(),))
    fake.grpc_port = server.add_insecure_port("127.0.0.1:0")
    fake.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    server.start()
    thread = threading.Thread(
        target=httpd.serve_forever, args=(0.05,), name="weaviate-fake-rest", daemon=True
    )
    thread.start()
    fake._httpd, fake._grpc = httpd, server
    try:
        yield fake
    finally:
        httpd.shutdown()
        httpd.server_close()
        server.stop(grace=None)
        thread.join(timeout=5)
