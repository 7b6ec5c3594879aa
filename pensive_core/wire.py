"""The JSON shapes of hits, documents, turns and query results: one definition, shared by the
HTTP service and the command line's ``--json``, so both answer alike."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from .timeutil import to_iso

__all__ = ["hit_json", "document_json", "turn_json", "result_json"]


def _plain(value: Any) -> Any:
    """Datetimes as ISO-8601, recursively (for dataclasses turned into dicts)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tzinfo") and hasattr(value, "isoformat"):
        return to_iso(value)
    return value


def hit_json(h: Any) -> dict[str, Any]:
    """A :class:`~pensive_core.types.Hit`."""
    return {
        "doc_id": h.doc_id,
        "chunk_id": h.chunk_id,
        "text": h.text,
        "score": float(h.score),
        "metadata": dict(h.metadata),
        "timestamp": to_iso(h.timestamp),
        "sources": dict(h.sources),
        "valid_from": to_iso(h.valid_from),
        "valid_to": to_iso(h.valid_to),
        "superseded_by": h.superseded_by,
        "match": None if h.match is None else float(h.match),
        "pinned": bool(h.pinned),
    }


def document_json(d: Any) -> dict[str, Any]:
    """A :class:`~pensive_core.types.Document`."""
    return {
        "id": d.id,
        "text": d.text,
        "metadata": dict(d.metadata),
        "timestamp": to_iso(d.timestamp),
    }


def turn_json(t: Any) -> dict[str, Any]:
    """A conversation :class:`~pensive_core.memory.Turn`."""
    return {
        "id": t.id,
        "seq": t.seq,
        "role": t.role,
        "text": t.text,
        "timestamp": to_iso(t.timestamp),
        "metadata": dict(t.metadata),
        "segment": t.segment,
        "drift": t.drift,
        "shift": bool(t.shift),
    }


def result_json(res: Any) -> dict[str, Any]:
    """A :class:`~pensive_core.types.QueryResult`."""
    return {
        "text": res.query,
        "tier": res.tier,
        "confidence": float(res.confidence),
        "match": None if res.match is None else float(res.match),
        "weak": bool(res.weak),
        "latency_ms": float(res.latency_ms),
        "cached_from": res.cached_from,
        "card": res.card,
        "hits": [hit_json(h) for h in res.hits],
        "time_scope": None if res.time_scope is None else _plain(asdict(res.time_scope)),
        "aggregation": None if res.aggregation is None else _plain(asdict(res.aggregation)),
    }
