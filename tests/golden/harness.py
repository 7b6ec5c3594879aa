"""Golden behaviour file: what the engine answers, recorded once and compared on every change.

Recorded on the engine as it stood before it was split into query and ingest stages (commit
6c80d35), so that the split could be shown to change nothing. Each scenario opens a fresh store
with one configuration, ingests the fixed corpus (:mod:`tests.golden.corpus`), asks every
question twice (the second pass is what L1 serves), then applies scripted changes (an ingest of
new documents, a replacement, a delete, a move of the vectors to another backend) and asks every
question again after each, with L1's automatic refresh off in most scenarios so that the tier
of each answer shows exactly which cached entries the change invalidated. Recorded per answer:
the hits (ids, text, scores, metadata, time, sources, validity), tier, confidence, the time
scope, the aggregation and the names of the timed stages; per ingest the report's counts; at
the end the store's counts and L1's invalidation figures. Conversation memory has a scenario of
its own (turns, recall, context).

Only the public API is used, so the same harness runs on any engine that keeps it.

Rerun::

    python -m tests.golden.harness check            # compare with tests/golden/*.json.gz
    python -m tests.golden.harness check --only graph_off
    python -m tests.golden.harness record           # write them again (only on a trusted engine)

``tests/unit/test_golden.py`` runs the hash-embedder scenarios in the test suite and the MiniLM
scenario when the model is installed.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import sys
import tempfile
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from pensive_core import Hit, Pensive, QueryResult

from . import corpus as C

HERE = Path(__file__).resolve().parent
HASH = {"embedder": {"name": "hash", "dim": 256}}
# refresh off: a cached answer survives a change only if nothing invalidated it; the time
# budget of a refresh would make its count depend on the machine's speed
NO_REFRESH = {"router": {"l1_refresh": 0}}
TIMELESS_REFRESH = {"router": {"l1_refresh": 8, "l1_refresh_ms": 600_000}}


def _merge(*parts: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = _merge(out[key], value)
            else:
                out[key] = value
    return out


# name -> config. Each runs the whole script; "minilm" needs the bundled model.
SCENARIOS: dict[str, dict[str, Any]] = {
    "default": _merge(HASH, NO_REFRESH),
    # shallow candidate lists: a new passage enters few of them, so invalidation is selective
    "shallow": _merge(HASH, NO_REFRESH, {"fusion": {"depth": 8}}),
    "refresh": _merge(HASH, TIMELESS_REFRESH, {"fusion": {"depth": 8}}),
    "graph_off": _merge(HASH, NO_REFRESH, {"graph": {"enabled": False}}),
    "temporal_off": _merge(HASH, NO_REFRESH, {"temporal": {"enabled": False}}),
    "rrf": _merge(HASH, NO_REFRESH, {"fusion": {"method": "rrf"}}),
    "zscore": _merge(HASH, NO_REFRESH, {"fusion": {"method": "zscore"}}),
    "graph_spread": _merge(
        HASH,
        NO_REFRESH,
        {"graph": {"query_entities": 0.5, "cycles": 2, "edges": {"mentioned_in": 0.5}}},
    ),
    "learning": _merge(
        HASH, NO_REFRESH, {"graph": {"learning": {"enabled": True, "deterministic": True}}}
    ),
    "l1_off": _merge(HASH, {"router": {"l1": False}}),
    "low_confidence": _merge(HASH, NO_REFRESH, {"router": {"l3_below": 0.6}}),
    "no_context": _merge(HASH, NO_REFRESH, {"context": {"generator": "none"}}),
    "dense_only": _merge(HASH, NO_REFRESH, {"fusion": {"weights": {"dense": 1.0, "bm25": 0.0}}}),
    "minilm": dict(NO_REFRESH),
}
MODEL_SCENARIOS = {"minilm"}


# -- what is recorded ------------------------------------------------------------------------
def _t(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _digest(text: str) -> str:
    """A passage's text as a short digest: the file stays small, and any change still shows."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def _outcome(call: Callable[[], Any]) -> Any:
    """What a call returned, or the error it raised (its type and message)."""
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 - an error is behaviour to record too
        return {"error": type(exc).__name__, "message": str(exc)}


def hit_record(h: Hit) -> dict[str, Any]:
    return {
        "doc_id": h.doc_id,
        "chunk_id": h.chunk_id,
        "text": _digest(h.text),
        "score": h.score,
        "metadata": dict(h.metadata),
        "timestamp": _t(h.timestamp),
        "sources": dict(h.sources),
        "valid_from": _t(h.valid_from),
        "valid_to": _t(h.valid_to),
        "superseded_by": h.superseded_by,
    }


def result_record(res: QueryResult) -> dict[str, Any]:
    scope = res.time_scope
    agg = res.aggregation
    return {
        "tier": res.tier,
        "confidence": res.confidence,
        "cached_from": res.cached_from,
        "stages": sorted(res.timings),
        "time_scope": None
        if scope is None
        else [scope.kind, _t(scope.start), _t(scope.end), scope.source, scope.supported],
        "aggregation": None
        if agg is None
        else [
            list(agg.entities),
            list(agg.terms),
            agg.count,
            agg.documents,
            agg.mentions,
            agg.truncated,
        ],
        "hits": [hit_record(h) for h in res.hits],
    }


def report_record(rep: Any) -> dict[str, Any]:
    keys = (
        "added",
        "updated",
        "unchanged",
        "chunks_embedded",
        "chunks_reused",
        "chunks_deleted",
        "contexts",
        "contexts_cached",
        "contexts_fallback",
        "llm_calls",
    )
    return {k: getattr(rep, k) for k in keys}


def ask_all(p: Pensive) -> list[dict[str, Any]]:
    out = []
    for text, k, as_of, filters, context in C.QUESTIONS:
        res = p.query(text, k, as_of=as_of, filters=filters, context=context)
        out.append(result_record(res))
    return out


def store_record(p: Pensive) -> dict[str, Any]:
    s = p.stats()
    l1 = s["l1"]
    return {
        "documents": s["documents"],
        "chunks": s["chunks"],
        "vectors": s["vectors"],
        "bm25_terms": s["bm25_terms"],
        "graph": s["graph"],
        "temporal": s["temporal"],
        "context": s["context"],
        "l3": s["l3"],
        "l1": None
        if l1 is None
        else {k: l1.get(k) for k in ("entries", "invalidated", "refreshed") if k in l1},
    }


def run_scenario(name: str, root: Path) -> dict[str, Any]:
    cfg = SCENARIOS[name]
    out: dict[str, Any] = {"config": cfg}
    with Pensive(root / name, config=cfg) as p:
        out["ingest"] = report_record(p.ingest(C.corpus()))
        out["ingest_again"] = report_record(p.ingest(C.corpus()))
        out["ingest_archived"] = report_record(p.ingest([C.ARCHIVED], archive_only=True))
        out["first"] = ask_all(p)
        out["second"] = ask_all(p)
        ceo = p.query("Who is the CEO of Vantor?", 3)
        out["history"] = _outcome(lambda: [hit_record(h) for h in p.history(ceo.hits[0])])
        manual = p.query("harbour master vault code", 3, filters={"doc_id": "manual"})
        out["expand"] = [p.expand(h, 1) for h in manual.hits]
        out["get"] = p.get("incident").text
        out["after_new"] = [[report_record(p.ingest([d])), ask_all(p)] for d in C.NEW_DOCS]
        out["after_replace"] = [report_record(p.ingest([C.REPLACED])), ask_all(p)]
        out["after_delete"] = [p.delete(C.DELETED), ask_all(p)]
        moved = p.reindex("memory")
        out["after_reindex"] = [
            {k: moved[k] for k in ("from", "to", "vectors", "embedded")},
            ask_all(p),
        ]
        out["store"] = store_record(p)
    return out


def run_conversation(root: Path) -> dict[str, Any]:
    """Conversation memory on the hash embedder: turns, recall, prompt context."""
    turns = [
        ("user", "I moved to Lisbon last week, the flat is near the river.", {"turn": 1}),
        ("assistant", "Congratulations on the move to Lisbon!", {"turn": 2}),
        ("user", "My sister Marta lives in Porto and works as a nurse.", {"turn": 3}),
        ("assistant", "Porto is a lovely city; nursing is demanding work.", {"turn": 4}),
        ("user", "Let's talk about my garden: the tomatoes are struggling.", {"turn": 5}),
        ("assistant", "Tomatoes need sun and regular watering.", {"turn": 6}),
        ("user", "I water them every morning but the leaves turn yellow.", {"turn": 7}),
        ("assistant", "Yellow leaves can mean too much water or too little nitrogen.", {"turn": 8}),
        ("user", "Back to travel: I want to visit Marta in Porto in May.", {"turn": 9}),
        ("assistant", "The train from Lisbon to Porto takes about three hours.", {"turn": 10}),
        ("user", "I switched jobs: I now work at Vantor as a data engineer.", {"turn": 11}),
        ("assistant", "Good luck at Vantor!", {"turn": 12}),
    ] * 2
    out: dict[str, Any] = {}
    with Pensive(root / "conversation", config=_merge(HASH, NO_REFRESH)) as p:
        p.ingest(C.corpus()[:22])
        chat = p.conversation("s1", user="u1")
        stored = []
        for n, (role, text, meta) in enumerate(turns):
            ts = C.day(2025, 1 + n // 10, 1 + n % 10)
            t = chat.add(role, text, timestamp=ts, metadata={**meta, "n": n})
            stored.append([t.seq, t.role, t.segment, round(t.drift, 9) if t.drift else t.drift])
        out["turns"] = stored
        out["recall"] = {
            q: [hit_record(h) for h in chat.recall(q, k=5)]
            for q in (
                "where do I live?",
                "what is wrong with my tomatoes?",
                "who is Marta?",
                "where do I work now?",
                "and her?",
            )
        }
        out["recall_hv"] = [
            hit_record(h) for h in chat.recall("Porto trip", 4, method="hypervector")
        ]
        out["recall_as_of"] = [
            hit_record(h) for h in chat.recall("Lisbon", 3, as_of=C.day(2025, 1, 5))
        ]
        out["context"] = chat.context("When should I visit my sister?", token_budget=400)
        other = p.conversation("s2", user="u1")
        other.add("user", "In this chat: my bike is a blue Gazelle.", timestamp=C.day(2025, 6, 1))
        out["recall_user"] = [
            hit_record(h) for h in other.recall("where do I live?", 3, scope="user")
        ]
        out["sessions"] = p.conversations(user="u1")
    return out


# -- compare ---------------------------------------------------------------------------------
def diff(want: Any, got: Any, path: str = "", tol: float = 1e-6) -> list[str]:
    """Where ``got`` differs from ``want`` (floats within ``tol``)."""
    if isinstance(want, dict) and isinstance(got, dict):
        out = []
        for key in sorted(set(want) | set(got), key=str):
            if key not in got or key not in want:
                out.append(f"{path}.{key}: {'missing' if key not in got else 'unexpected'}")
            else:
                out += diff(want[key], got[key], f"{path}.{key}", tol)
        return out
    if isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            return [f"{path}: {len(got)} items, want {len(want)}"]
        out = []
        for i, (a, b) in enumerate(zip(want, got)):
            out += diff(a, b, f"{path}[{i}]", tol)
        return out
    if isinstance(want, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        if math.isclose(want, got, rel_tol=0, abs_tol=tol) or want == got:
            return []
        return [f"{path}: {got!r}, want {want!r}"]
    return [] if want == got else [f"{path}: {got!r}, want {want!r}"]


def golden_path(name: str) -> Path:
    return HERE / f"golden_{name}.json.gz"


def read_golden(name: str) -> Any:
    return json.loads(gzip.decompress(golden_path(name).read_bytes()))


def write_golden(name: str, value: Any) -> None:
    data = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    golden_path(name).write_bytes(gzip.compress(data, mtime=0))


def _canonical(value: Any) -> Any:
    """As JSON would give it back (tuples as lists, int keys as strings)."""
    return json.loads(json.dumps(value))


def produce(name: str, root: Path) -> Any:
    return _canonical(
        run_conversation(root) if name == "conversation" else run_scenario(name, root)
    )


def check(name: str, root: Path) -> list[str]:
    want = read_golden(name)
    return diff(want, produce(name, root), name)


def names(include_model: bool) -> list[str]:
    return [n for n in [*SCENARIOS, "conversation"] if include_model or n not in MODEL_SCENARIOS]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.golden.harness")
    ap.add_argument("action", choices=["record", "check"])
    ap.add_argument("--only", action="append", help="a scenario (repeatable)")
    ap.add_argument("--no-model", action="store_true", help="skip the MiniLM scenario")
    args = ap.parse_args(argv)
    chosen = args.only or names(not args.no_model)
    failed = 0
    say: Callable[[str], None] = print
    with tempfile.TemporaryDirectory() as tmp:
        for name in chosen:
            if args.action == "record":
                write_golden(name, produce(name, Path(tmp)))
                say(f"recorded {name}")
                continue
            problems = check(name, Path(tmp))
            failed += bool(problems)
            say(f"{name}: {'ok' if not problems else f'{len(problems)} differences'}")
            for line in problems[:40]:
                say("  " + line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
