"""Metadata filters: one small language, checked once, evaluated here or translated per backend.

The language is the Mongo-style dictionary that Chroma, Pinecone and LangChain users already
write::

    {"source": "q3.pdf"}                                   # equality
    {"year": {"$gte": 2020}, "lang": {"$in": ["en", "pt"]}}  # several fields: all must hold
    {"$or": [{"team": "red"}, {"priority": {"$gt": 2}}]}

Operators: ``$eq $ne $gt $gte $lt $lte $in $nin`` on a field, ``$and $or`` over filters.
Values are strings, finite numbers and booleans (NaN, infinities and strings that do not
encode as UTF-8 are refused); the range operators take numbers only. A field a
record does not have matches no comparison (``$ne`` and ``$nin`` included), the same on every
backend. Field names are identifiers (letters, digits, underscore; not starting with a digit),
because that is what every backend can store and filter on.

:func:`parse_filter` turns the dictionary into a tree of :class:`Cmp`, :class:`And` and
:class:`Or` nodes (raising :class:`~pensive_core.errors.InputError` on anything malformed);
backends translate the tree, and :func:`matches` evaluates it in Python.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import InputError
from .validate import check_finite, check_text

__all__ = [
    "And",
    "Cmp",
    "Filter",
    "MetadataIndex",
    "Or",
    "backend_metadata",
    "canonical",
    "matches",
    "parse_filter",
    "to_mongo",
]

Scalar = str | int | float | bool
FIELD_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_CMP = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin")
_RANGE = ("$gt", "$gte", "$lt", "$lte")
_MAX_IN = 1000


@dataclass(frozen=True)
class Cmp:
    """``field op value``; ``value`` is a tuple for ``$in``/``$nin``."""

    field: str
    op: str
    value: Any


@dataclass(frozen=True)
class And:
    """All parts hold."""

    parts: tuple[Filter, ...]


@dataclass(frozen=True)
class Or:
    """At least one part holds."""

    parts: tuple[Filter, ...]


Filter = Cmp | And | Or


def _scalar(value: Any, where: str) -> Scalar:
    if isinstance(value, str):
        return check_text(value, f"filter {where}: the value")
    if isinstance(value, (bool, int, float)):
        check_finite(value, f"filter {where}: the value")
        return value
    raise InputError(
        f"filter {where}: values must be strings, numbers or booleans, got {type(value).__name__}"
    )


def _cmp(field: str, op: str, value: Any) -> Cmp:
    where = f"on {field!r}"
    if op not in _CMP:
        raise InputError(f"filter {where}: unknown operator {op!r}; use one of {', '.join(_CMP)}")
    if op in ("$in", "$nin"):
        if not isinstance(value, (list, tuple)) or not value:
            raise InputError(f"filter {where}: {op} takes a non-empty list")
        if len(value) > _MAX_IN:
            raise InputError(f"filter {where}: {op} takes at most {_MAX_IN} values")
        return Cmp(field, op, tuple(_scalar(v, where) for v in value))
    value = _scalar(value, where)
    if op in _RANGE and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise InputError(f"filter {where}: {op} compares numbers, got {value!r}")
    return Cmp(field, op, value)


def _parse(spec: Any, depth: int) -> Filter:
    if depth > 16:
        raise InputError("filter nests deeper than 16 levels")
    if not isinstance(spec, Mapping) or not spec:
        raise InputError(f"a filter is a non-empty dict, got {spec!r}")
    parts: list[Filter] = []
    for key, value in spec.items():
        if not isinstance(key, str):
            raise InputError(f"filter keys are strings, got {key!r}")
        if key in ("$and", "$or"):
            if not isinstance(value, (list, tuple)) or not value:
                raise InputError(f"filter {key} takes a non-empty list of filters")
            subs = tuple(_parse(v, depth + 1) for v in value)
            parts.append(subs[0] if len(subs) == 1 else (And if key == "$and" else Or)(subs))
        elif key.startswith("$"):
            raise InputError(f"unknown filter operator {key!r} at the top level; use $and or $or")
        elif not FIELD_RE.match(key):
            raise InputError(
                f"filter field {key!r} is not an identifier (letters, digits, underscore)"
            )
        elif isinstance(value, Mapping):
            if not value:
                raise InputError(f"filter on {key!r}: empty operator dict")
            parts.extend(_cmp(key, op, v) for op, v in value.items())
        else:
            parts.append(_cmp(key, "$eq", value))
    return parts[0] if len(parts) == 1 else And(tuple(parts))


def parse_filter(spec: Mapping[str, Any] | Filter | None) -> Filter | None:
    """Check a filter dictionary and turn it into a tree (None and ``{}`` mean no filter).

    Raises:
        InputError: If the filter is malformed; the message names the field or operator.
    """
    if spec is None or isinstance(spec, (Cmp, And, Or)):
        return spec
    if isinstance(spec, Mapping) and not spec:
        return None
    return _parse(spec, 0)


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _same_kind(a: Any, b: Any) -> bool:
    return (_num(a) and _num(b)) or (type(a) is type(b))


def _eq(a: Any, b: Any) -> bool:
    return _same_kind(a, b) and a == b


def matches(node: Filter | None, metadata: Mapping[str, Any]) -> bool:
    """Whether a record with ``metadata`` passes the filter (None passes everything)."""
    if node is None:
        return True
    if isinstance(node, And):
        return all(matches(p, metadata) for p in node.parts)
    if isinstance(node, Or):
        return any(matches(p, metadata) for p in node.parts)
    if node.field not in metadata:
        return False
    v = metadata[node.field]
    op, x = node.op, node.value
    if op == "$eq":
        return _eq(v, x)
    if op == "$ne":
        return not _eq(v, x)
    if op == "$in":
        return any(_eq(v, y) for y in x)
    if op == "$nin":
        return not any(_eq(v, y) for y in x)
    if not _num(v):
        return False
    return bool(
        (op == "$gt" and v > x)
        or (op == "$gte" and v >= x)
        or (op == "$lt" and v < x)
        or (op == "$lte" and v <= x)
    )


def to_mongo(node: Filter) -> dict[str, Any]:
    """The explicit Mongo-style form (every comparison spelled with its operator)."""
    if isinstance(node, (And, Or)):
        return {"$and" if isinstance(node, And) else "$or": [to_mongo(p) for p in node.parts]}
    value = list(node.value) if isinstance(node.value, tuple) else node.value
    return {node.field: {node.op: value}}


def canonical(node: Filter | None) -> str:
    """A stable string for a filter tree (cache keys): equal filters give equal strings."""
    return "" if node is None else json.dumps(to_mongo(node), sort_keys=True)


def backend_metadata(metadata: Mapping[str, Any], doc_id: str) -> dict[str, Scalar]:
    """What a backend stores next to a vector: scalar fields with identifier names, and
    ``doc_id``. Other fields stay in the archive (and on hits) but cannot be filtered on."""
    out: dict[str, Scalar] = {
        k: v
        for k, v in metadata.items()
        if isinstance(k, str)
        and FIELD_RE.match(k)
        and isinstance(v, (str, bool, int, float))
        and not (isinstance(v, float) and v != v)
    }
    out["doc_id"] = doc_id
    return out


def _key(v: Any) -> tuple[str, Any]:
    """A hashable key under which equal values (in :func:`matches`' sense) meet: numbers of
    any type together, booleans and strings apart."""
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, (int, float)):
        return ("n", v)  # 1 and 1.0 hash alike
    return ("s", v) if isinstance(v, str) else ("?", repr(v))


class _Column:
    """One field over every record: rows by value, presence, and numbers as floats."""

    def __init__(self, records: Sequence[Mapping[str, Any]], field: str) -> None:
        n = len(records)
        self.present = np.zeros(n, dtype=bool)
        self.num = np.full(n, np.nan)
        rows: dict[tuple[str, Any], list[int]] = {}
        for i, m in enumerate(records):
            if field not in m:
                continue
            v = m[field]
            self.present[i] = True
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                self.num[i] = v
            rows.setdefault(_key(v), []).append(i)  # lists, dicts: a key no filter value has
        self.rows = {k: np.asarray(r, dtype=np.int64) for k, r in rows.items()}

    def equal(self, values: Sequence[Any], n: int) -> np.ndarray:
        out = np.zeros(n, dtype=bool)
        for v in values:
            hit = self.rows.get(_key(v))
            if hit is not None:
                out[hit] = True
        return out


class MetadataIndex:
    """Evaluates filters over many records at once, column by column.

    Gives exactly :func:`matches`' answers (a test checks), as a boolean mask over the
    records, at numpy speed: equality and ``$in`` look rows up by value, ranges compare a float
    column. A field's column is built the first time a filter names it.

    Args:
        records: One metadata mapping per record; row ``i`` of every mask is ``records[i]``.
    """

    def __init__(self, records: Sequence[Mapping[str, Any]]) -> None:
        self.records = records
        self.n = len(records)
        self._columns: dict[str, _Column] = {}

    def _column(self, field: str) -> _Column:
        col = self._columns.get(field)
        if col is None:
            col = self._columns[field] = _Column(self.records, field)
        return col

    def mask(self, node: Filter | None) -> np.ndarray:
        """Which records pass ``node`` (all of them for None)."""
        if node is None:
            return np.ones(self.n, dtype=bool)
        if isinstance(node, (And, Or)):
            parts = [self.mask(p) for p in node.parts]
            return (
                np.logical_and.reduce(parts)
                if isinstance(node, And)
                else np.logical_or.reduce(parts)
            )
        col = self._column(node.field)
        op, x = node.op, node.value
        if op in ("$eq", "$ne"):
            eq = col.equal([x], self.n)
            return eq if op == "$eq" else col.present & ~eq
        if op in ("$in", "$nin"):
            eq = col.equal(x, self.n)
            return eq if op == "$in" else col.present & ~eq
        with np.errstate(invalid="ignore"):  # NaN (missing or not a number) compares False
            if op == "$gt":
                return col.num > x
            if op == "$gte":
                return col.num >= x
            if op == "$lt":
                return col.num < x
            return col.num <= x
