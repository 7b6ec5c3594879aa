"""The HTTP service on the real app, a real writer process and real stores: auth and namespace
isolation, every route, limits, bad input (nothing stored half-way), timeouts, CORS, a writer
killed mid-flight, and keys never logged."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from pathlib import Path
from urllib.parse import quote

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from pensive_core import Document, Pensive  # noqa: E402
from pensive_core.errors import ConfigError  # noqa: E402
from pensive_core.server import create_app, run  # noqa: E402
from pensive_core.server.keys import KeyRing, load_keys  # noqa: E402
from pensive_core.server.worker import WorkerError  # noqa: E402
from tests.conftest import HASH_CONFIG, free_port, wait_ready  # noqa: E402

pytestmark = pytest.mark.integration

KEY_A = "key-a-" + "a" * 26
KEY_B = "key-b-" + "b" * 26
A = {"Authorization": f"Bearer {KEY_A}"}
B = {"X-API-Key": KEY_B}
DOCS = [
    {"id": "inv", "text": "Invoice INV-4471 from Acme Corp was paid on 3 March 2024."},
    {"id": "ferry", "text": "The night ferry to Lisbon leaves the harbour at eleven."},
    {"id": "tea", "text": "Green tea is steeped at eighty degrees for two minutes."},
]


def _app(root: Path, config: dict | None = None, **options):
    # two readers: concurrent queries really run side by side on separate store handles
    cfg = {**HASH_CONFIG, "server": {"readers": 2}, **(config or {})}
    options.setdefault("keys", {KEY_A: "team-a", KEY_B: "team-b"})
    return create_app(root, cfg, **options)


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    root = tmp_path_factory.mktemp("served")
    with TestClient(_app(root)) as c:
        c.root = root
        assert c.post("/v1/documents", json={"documents": DOCS}, headers=A).status_code == 200
        yield c


def _count(c, headers) -> int:
    return c.get("/v1/dashboard", headers=headers).json()["ingest"]["documents"]


def _error(r, status: int, code: str) -> dict:
    assert r.status_code == status, r.text
    body = r.json()["error"]
    assert body["code"] == code, body
    assert body["message"] and body["request_id"] == r.headers["x-request-id"]
    return body


# -- auth and namespaces ---------------------------------------------------------------------
def test_a_key_reads_and_writes_its_own_namespace_only(client):
    hit = client.post("/v1/query", json={"text": "when was INV-4471 paid?"}, headers=A).json()
    assert hit["hits"][0]["doc_id"] == "inv"
    # team-b's store is another folder: none of team-a's documents, jobs or sessions
    other = client.post("/v1/query", json={"text": "when was INV-4471 paid?"}, headers=B).json()
    assert all(h["doc_id"] != "inv" for h in other["hits"])
    _error(client.get("/v1/documents/inv", headers=B), 404, "not_found")
    job_id = client.get("/v1/jobs", headers=A).json()["jobs"][0]["id"]
    assert client.get(f"/v1/jobs/{job_id}", headers=A).status_code == 200
    _error(client.get(f"/v1/jobs/{job_id}", headers=B), 404, "not_found")
    client.post(
        "/v1/conversations/s1/turns", json={"role": "user", "text": "I keep bees."}, headers=A
    )
    assert "s1" in client.get("/v1/conversations", headers=A).json()["sessions"]
    assert client.get("/v1/conversations", headers=B).json()["sessions"] == []
    # and reading team-a's session through team-b's key finds no such session (nor makes one)
    _error(client.get("/v1/conversations/s1/turns", headers=B), 404, "not_found")
    assert client.get("/v1/conversations", headers=B).json()["sessions"] == []
    # a delete through team-b's key cannot touch team-a's document
    _error(client.delete("/v1/documents/inv", headers=B), 404, "not_found")
    assert client.get("/v1/documents/inv", headers=A).status_code == 200
    assert (client.root / "namespaces" / "team-a" / "pensive.sqlite").is_file()
    assert (client.root / "namespaces" / "team-b" / "pensive.sqlite").is_file()


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer nope-nope-nope-nope"},
        {"X-API-Key": KEY_A[:-1]},
        {"Authorization": KEY_A},
    ],
)
def test_a_missing_or_unknown_key_is_refused(client, headers):
    for r in (
        client.post("/v1/query", json={"text": "tea"}, headers=headers),
        client.post("/v1/documents", json={"documents": DOCS[:1]}, headers=headers),
        client.get("/v1/stats", headers=headers),
        client.get("/v1/dashboard", headers=headers),
    ):
        _error(r, 401, "unauthorized")


def test_keys_are_checked_at_start(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="no API keys"):
        create_app(tmp_path, HASH_CONFIG)
    with pytest.raises(ConfigError, match="shorter than 16"):
        create_app(tmp_path, HASH_CONFIG, keys={"short": "a"})
    with pytest.raises(ConfigError, match="namespace"):
        create_app(tmp_path, HASH_CONFIG, keys={KEY_A: "../etc"})
    with pytest.raises(ConfigError, match="loopback"):
        run(tmp_path, HASH_CONFIG, host="0.0.0.0", no_auth=True)
    keys = tmp_path / "keys.toml"
    keys.write_text(f'[keys]\n"{KEY_A}" = "team-a"\n')
    monkeypatch.setenv("PENSIVE_API_KEYS", f"{KEY_B}=team-b")
    assert load_keys(keys) == {KEY_A: "team-a", KEY_B: "team-b"}
    keys.write_text("[keys\n")
    with pytest.raises(ConfigError) as err:
        load_keys(keys)
    assert KEY_A not in str(err.value)
    assert KEY_A not in repr(KeyRing({KEY_A: "team-a"}))


def test_without_auth_every_request_is_the_default_namespace(tmp_path):
    with Pensive(tmp_path, config=HASH_CONFIG) as p:  # what `pensive ingest` made
        p.ingest([Document("local", "Made by the command line: the barn owl report.")])
    with TestClient(_app(tmp_path, keys=None, no_auth=True)) as c:
        r = c.post("/v1/query", json={"text": "barn owl report"})
        assert r.json()["hits"][0]["doc_id"] == "local"
        assert c.get("/v1/config").json()["auth"] == "none"


# -- the routes ------------------------------------------------------------------------------
def test_query_tiers_and_hit_fields(client):
    q = {"text": "Which ferry goes to Lisbon at night?", "k": 2}
    first = client.post("/v1/query", json=q, headers=A).json()
    again = client.post("/v1/query", json=q, headers=A).json()
    assert first["tier"] in ("L2", "L3") and again["tier"] == "L1"
    hit = first["hits"][0]
    assert hit["doc_id"] == "ferry" and hit["sources"] and "night ferry" in hit["text"]
    assert set(hit) >= {"doc_id", "chunk_id", "text", "score", "metadata", "timestamp", "sources"}
    assert len(first["hits"]) <= 2
    board = client.get("/v1/dashboard", headers=A).json()
    assert board["tiers"]["L1"]["count"] >= 1 and board["recent"][0]["text"] == q["text"]
    assert board["recent"][0]["tier"] == "L1"


def test_query_match_weak_and_min_score(client):
    q = {"text": "When does the night ferry to Lisbon leave the harbour?", "k": 3}
    full = client.post("/v1/query", json=q, headers=A).json()
    assert isinstance(full["weak"], bool) and 0.0 <= full["match"] <= 1.0
    assert full["match"] == max(h["match"] for h in full["hits"])
    best = full["hits"][0]["match"]
    cut = client.post("/v1/query", json={**q, "min_score": best}, headers=A).json()
    assert [h["match"] for h in cut["hits"]] == [
        h["match"] for h in full["hits"] if h["match"] >= best
    ]
    off = {"text": "What colour is the far side of the moon?", "k": 3}
    some = client.post("/v1/query", json=off, headers=A).json()
    assert some["hits"] and some["match"] < 1.0  # an unrelated question: no hit matches fully
    none = client.post("/v1/query", json={**off, "min_score": 1}, headers=A).json()
    assert none["hits"] == [] and none["weak"] is True and none["match"] == some["match"]
    for bad in (1.5, -0.1, "0.5", True):  # refused like a bad k: by the body's shape
        _error(
            client.post("/v1/query", json={**q, "min_score": bad}, headers=A),
            422,
            "validation_error",
        )


def test_query_pins_and_mentions(client):
    q = {"text": "When does the night ferry to Lisbon leave?", "k": 2}
    res = client.post("/v1/query", json={**q, "pins": ["tea"]}, headers=A).json()
    assert res["hits"][0]["doc_id"] == "tea" and res["hits"][0]["pinned"] is True
    assert [h["pinned"] for h in res["hits"][1:]] == [False] * (len(res["hits"]) - 1)
    said = client.post("/v1/query", json={"text": "what is in @inv?", "k": 1}, headers=A).json()
    assert said["hits"][0]["doc_id"] == "inv" and said["hits"][0]["pinned"] is True
    entries = client.get("/v1/stats", headers=A).json()["l1"]["entries"]
    body = _error(
        client.post("/v1/query", json={**q, "pins": ["tea", "no-such"]}, headers=A),
        404,
        "not_found",
    )
    assert "no-such" in body["message"]
    # another namespace's document is not there to pin
    _error(client.post("/v1/query", json={**q, "pins": ["tea"]}, headers=B), 404, "not_found")
    for bad in ("tea", [1], [""], ["x"] * 21):
        r = client.post("/v1/query", json={**q, "pins": bad}, headers=A)
        assert r.status_code == 422, (bad, r.text)
    assert client.get("/v1/stats", headers=A).json()["l1"]["entries"] == entries


def test_as_of_and_filters(client):
    docs = [
        {
            "id": "ceo-old",
            "text": "Maria Silva is the CEO of Northwind.",
            "timestamp": "2019-01-01T00:00:00Z",
            "metadata": {"source": "old.pdf"},
        },
        {
            "id": "ceo-new",
            "text": "Jon Berg is the CEO of Northwind.",
            "timestamp": "2023-01-01T00:00:00Z",
            "metadata": {"source": "new.pdf"},
        },
    ]
    assert client.post("/v1/documents", json={"documents": docs}, headers=A).status_code == 200
    old = client.post(
        "/v1/query",
        json={"text": "Who is the CEO of Northwind?", "as_of": "2020-01-01T00:00:00Z"},
        headers=A,
    ).json()
    assert old["hits"][0]["doc_id"] == "ceo-old"
    only = client.post(
        "/v1/query", json={"text": "CEO of Northwind", "filters": {"source": "new.pdf"}}, headers=A
    ).json()
    assert {h["doc_id"] for h in only["hits"]} == {"ceo-new"}
    _error(
        client.post("/v1/query", json={"text": "CEO", "filters": {"$bogus": 1}}, headers=A),
        400,
        "invalid_input",
    )


def test_replace_get_and_delete(client):
    doc = {"id": "note", "text": "The blue kettle is in the attic."}
    r = client.post("/v1/documents", json={"documents": [doc]}, headers=A).json()
    assert r["result"]["added"] == 1 and r["job"]["state"] == "done"
    doc["text"] = "The blue kettle is in the garden shed."
    assert (
        client.post("/v1/documents", json={"documents": [doc]}, headers=A).json()["result"][
            "updated"
        ]
        == 1
    )
    assert client.get("/v1/documents/note", headers=A).json()["text"] == doc["text"]
    gone = client.delete("/v1/documents/note", headers=A).json()
    assert gone["job"]["kind"] == "delete" and gone["result"]["chunks"] >= 1
    _error(client.get("/v1/documents/note", headers=A), 404, "not_found")
    _error(client.delete("/v1/documents/note", headers=A), 404, "not_found")


def test_ingest_without_waiting_gives_a_job_to_poll(client):
    docs = [
        {"id": f"bulk{i}", "text": f"Bulk report {i} on the grain harvest of plot {i}."}
        for i in range(600)
    ]
    r = client.post("/v1/documents", json={"documents": docs, "wait": False}, headers=A)
    assert r.status_code == 202
    job = r.json()["job"]
    assert job["total"] == 600 and job["state"] in ("queued", "running")
    deadline = time.time() + 120
    while job["state"] not in ("done", "failed") and time.time() < deadline:
        time.sleep(0.1)
        job = client.get(f"/v1/jobs/{job['id']}", headers=A).json()
    assert job["state"] == "done" and job["done"] == 600 and job["report"]["added"] == 600
    hit = client.post("/v1/query", json={"text": "grain harvest of plot 417"}, headers=A).json()[
        "hits"
    ][0]
    assert hit["doc_id"] == "bulk417"


def test_queries_are_answered_while_an_ingest_is_in_flight(client):
    docs = [
        {"id": f"long{i}", "text": f"Long ingest page {i}: " + "words " * 200 + f"marker{i}"}
        for i in range(800)
    ]
    job = client.post("/v1/documents", json={"documents": docs, "wait": False}, headers=A).json()[
        "job"
    ]
    during = 0
    while True:
        r = client.post("/v1/query", json={"text": "green tea steeping", "k": 3}, headers=A)
        assert r.status_code == 200 and r.json()["hits"][0]["doc_id"] == "tea"
        state = client.get(f"/v1/jobs/{job['id']}", headers=A).json()["state"]
        if state in ("done", "failed"):
            break
        during += state == "running"
    assert state == "done"
    assert during >= 1  # answered while the writer was mid-ingest, not after


def test_upload_files(client, tmp_path):
    files = [
        ("files", ("heron.txt", b"The grey heron nests by the old mill pond.", "text/plain")),
        (
            "files",
            (
                "more.jsonl",
                b'{"id": "j1", "text": "Kingfishers dive for minnows."}\n',
                "application/json",
            ),
        ),
    ]
    r = client.post("/v1/documents/upload", files=files, headers=A)
    assert r.status_code == 200, r.text
    assert r.json()["job"]["kind"] == "upload" and r.json()["result"]["added"] == 2
    assert client.get("/v1/documents/heron.txt", headers=A).status_code == 200
    assert client.get("/v1/documents/j1", headers=A).status_code == 200
    # a path in the file name is reduced to its last part: nothing is written where it points
    evil = [("files", ("../../../../tmp/pensive-evil.txt", b"Path escape attempt.", "text/plain"))]
    assert client.post("/v1/documents/upload", files=evil, headers=A).status_code == 200
    assert client.get("/v1/documents/pensive-evil.txt", headers=A).status_code == 200
    assert not Path("/tmp/pensive-evil.txt").exists()
    before = _count(client, A)
    bad = [
        ("files", ("ok.txt", b"A fine file.", "text/plain")),
        ("files", ("latin.txt", b"caf\xe9 au lait", "text/plain")),
    ]
    body = _error(client.post("/v1/documents/upload", files=bad, headers=A), 400, "invalid_input")
    assert body["details"][0]["file"] == "latin.txt" and "UTF-8" in body["details"][0]["message"]
    _error(
        client.post(
            "/v1/documents/upload",
            files=[("files", ("x.exe", b"MZ", "application/octet-stream"))],
            headers=A,
        ),
        415,
        "unsupported_media_type",
    )
    assert _count(client, A) == before  # the good file of a failed upload was not stored either


def test_conversation_routes(client):
    sid = "chat-1"
    for role, text in [
        ("user", "I moved to Lisbon last week."),
        ("assistant", "How is Lisbon?"),
        ("user", "Sunny. My sister Ana visits in May."),
    ]:
        r = client.post(
            f"/v1/conversations/{sid}/turns",
            json={"role": role, "text": text, "user": "u1"},
            headers=A,
        )
        assert r.status_code == 200, r.text
    turns = client.get(f"/v1/conversations/{sid}/turns", headers=A).json()["turns"]
    assert [t["seq"] for t in turns] == [0, 1, 2] and turns[0]["role"] == "user"
    assert len(client.get(f"/v1/conversations/{sid}/turns?limit=1", headers=A).json()["turns"]) == 1
    hits = client.post(
        f"/v1/conversations/{sid}/recall", json={"query": "where do I live?", "k": 2}, headers=A
    ).json()["hits"]
    assert "Lisbon" in hits[0]["text"] and hits[0]["metadata"]["session_id"] == sid
    ctx = client.post(
        f"/v1/conversations/{sid}/context",
        json={"query": "who visits?", "token_budget": 200},
        headers=A,
    ).json()
    assert "Ana" in ctx["text"] and ctx["tokens"] <= 200
    qa = client.post(
        f"/v1/conversations/{sid}/context",
        json={"query": "who visits?", "strategy": "weighted", "template": "qa"},
        headers=A,
    ).json()
    assert qa["text"].endswith("Question: who visits?\nAnswer:")
    for bad in (
        {"strategy": "os:system"},  # a class path would import code
        {"template": "/etc/hostname"},  # a path would read the server's files
        {"template": "{context}"},  # no {query}
    ):
        r = client.post(f"/v1/conversations/{sid}/context", json={"query": "x", **bad}, headers=A)
        _error(r, 400, "invalid_input")
    assert client.get("/v1/conversations?user=u1", headers=A).json()["sessions"] == [sid]
    assert client.delete(f"/v1/conversations/{sid}", headers=A).json()["cleared"] == 3
    assert client.get(f"/v1/conversations/{sid}/turns", headers=A).json()["turns"] == []
    _error(
        client.post(
            f"/v1/conversations/{sid}/turns", json={"role": "user", "text": "   "}, headers=A
        ),
        400,
        "invalid_input",
    )


def test_stats_config_health_and_schema(client):
    stats = client.get("/v1/stats", headers=A).json()
    assert (
        stats["documents"] >= 3 and "path" not in stats and stats["server"]["namespace"] == "team-a"
    )
    cfg = client.get("/v1/config", headers=A).json()
    assert cfg["config"]["embedder"]["name"] == "hash" and cfg["auth"] == "keys"
    assert client.get("/health/live").json() == {"status": "ok"}
    assert client.get("/health/ready").status_code == 200
    schema = client.get("/openapi.json").json()
    paths = set(schema["paths"])
    assert {
        "/v1/query",
        "/v1/documents",
        "/v1/documents/upload",
        "/v1/documents/{doc_id}",
        "/v1/conversations/{session_id}/recall",
        "/v1/stats",
        "/v1/config",
        "/health/ready",
    } <= paths
    assert {"HTTPBearer", "APIKeyHeader"} <= set(schema["components"]["securitySchemes"])
    page = client.get("/dashboard")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    _error(client.get("/v1/nothing-here", headers=A), 404, "not_found")
    _error(client.put("/v1/query", headers=A), 405, "method_not_allowed")


# -- bad input: a clear 4xx, nothing stored --------------------------------------------------
def test_bad_input_is_refused_whole(client):
    before = _count(client, A)
    ok = {"id": "fine", "text": "A perfectly fine document."}
    jsonct = {**A, "content-type": "application/json"}
    cases = [
        # invalid UTF-8 in a JSON body
        (
            client.post(
                "/v1/documents",
                content=b'{"documents": [{"id": "x", "text": "caf\xe9"}]}',
                headers=jsonct,
            ),
            400,
            "invalid_utf8",
        ),
        (
            client.post("/v1/documents", content=b'{"documents": [', headers=jsonct),
            400,
            "invalid_json",
        ),
        # a 10 MB document: refused before parsing
        (
            client.post(
                "/v1/documents",
                json={"documents": [ok, {"id": "big", "text": "x" * 10_000_000}]},
                headers=A,
            ),
            413,
            "payload_too_large",
        ),
        (
            client.post(
                "/v1/documents", json={"documents": [ok, {"id": "e", "text": ""}]}, headers=A
            ),
            422,
            "validation_error",
        ),
        (
            client.post(
                "/v1/documents", json={"documents": [ok, {"id": "w", "text": " \n\t "}]}, headers=A
            ),
            400,
            "invalid_input",
        ),
        (
            client.post(
                "/v1/documents", json={"documents": [ok, {"id": " ", "text": "no id"}]}, headers=A
            ),
            400,
            "invalid_input",
        ),
        (client.post("/v1/documents", json={"documents": []}, headers=A), 422, "validation_error"),
        (
            client.post("/v1/documents", json={"documents": [ok], "colour": "red"}, headers=A),
            422,
            "validation_error",
        ),
        (
            client.post("/v1/documents", json={"documents": [{**ok, "extra": 1}]}, headers=A),
            422,
            "validation_error",
        ),
        (
            client.post("/v1/documents", json={"documents": [{**ok, "text": 42}]}, headers=A),
            422,
            "validation_error",
        ),
        (
            client.post(
                "/v1/documents",
                json={"documents": [{**ok, "timestamp": "yesterday-ish"}]},
                headers=A,
            ),
            422,
            "validation_error",
        ),
        (
            client.post(
                "/v1/documents", json={"documents": [{**ok, "metadata": _nest(40)}]}, headers=A
            ),
            400,
            "json_too_deep",
        ),
        (
            client.post("/v1/query", content=b"[" * 200_000 + b"]" * 200_000, headers=jsonct),
            400,
            "json_too_deep",
        ),
        (client.post("/v1/query", json={"text": "q" * 5000}, headers=A), 400, "query_too_long"),
        (client.post("/v1/query", json={"text": "tea", "k": 101}, headers=A), 400, "invalid_input"),
        (
            client.post("/v1/query", json={"text": "tea", "k": 0}, headers=A),
            422,
            "validation_error",
        ),
        (client.post("/v1/query", json={"text": "   "}, headers=A), 400, "invalid_input"),
        (client.post("/v1/query", json="tea", headers=A), 422, "validation_error"),
    ]
    for r, status, code in cases:
        _error(r, status, code)
    assert _count(client, A) == before
    _error(client.get("/v1/documents/fine", headers=A), 404, "not_found")


def _nest(depth: int) -> dict:
    node: dict = {"leaf": 1}
    for _ in range(depth):
        node = {"n": node}
    return node


@pytest.mark.parametrize(
    "ids",
    [
        ("report", "report\n"),  # a trailing newline once routed as "report": wrong delete
        ("a", "a\nb", "\na"),
        ("x/y", "x/y\r\n", "x/y/"),
    ],
)
def test_ids_with_line_breaks_reach_exactly_their_document(client, ids):
    """A path parameter that stopped at a line break (or let `$` match before a final one)
    read and deleted another document: every id the API stores must round-trip."""
    docs = [
        {"id": i, "text": f"Line break ledger entry {n} for routing."} for n, i in enumerate(ids)
    ]
    assert client.post("/v1/documents", json={"documents": docs}, headers=A).status_code == 200
    for doc in docs:
        r = client.get(f"/v1/documents/{quote(doc['id'], safe='')}", headers=A)
        assert r.status_code == 200 and r.json()["id"] == doc["id"], (doc["id"], r.text)
    last = docs[-1]["id"]
    r = client.delete(f"/v1/documents/{quote(last, safe='')}", headers=A)
    assert r.status_code == 200, r.text
    r = client.get(f"/v1/documents/{quote(last, safe='')}", headers=A)
    _error(r, 404, "not_found")
    for doc in docs[:-1]:  # nothing else went
        r = client.get(f"/v1/documents/{quote(doc['id'], safe='')}", headers=A)
        assert r.status_code == 200 and r.json()["text"] == doc["text"]
        client.delete(f"/v1/documents/{quote(doc['id'], safe='')}", headers=A)


def test_path_like_ids_never_touch_the_file_system(client, tmp_path):
    evil = "../../etc/passwd"
    before = {p for p in client.root.parent.rglob("*")}
    r = client.post(
        "/v1/documents",
        json={"documents": [{"id": evil, "text": "root:x:0:0 is not a file here"}]},
        headers=A,
    )
    assert r.status_code == 200
    got = client.get("/v1/documents/..%2F..%2Fetc%2Fpasswd", headers=A).json()
    assert got["id"] == evil
    created = {p for p in client.root.parent.rglob("*")} - before
    assert not [p for p in created if "passwd" in p.name or p.name == "etc"]
    assert (
        client.delete("/v1/documents/..%2F..%2Fetc%2Fpasswd", headers=A).json()["result"]["chunks"]
        >= 1
    )
    assert Path("/etc/passwd").is_file()  # untouched
    sid = "../../../tmp/pensive-session"
    client.post(
        f"/v1/conversations/{sid.replace('/', '%2F')}/turns",
        json={"role": "user", "text": "hi there"},
        headers=A,
    )
    assert not Path("/tmp/pensive-session").exists()


def test_limits_from_config(tmp_path):
    cfg = {"server": {"max_document_chars": 100, "max_documents": 2, "max_body_bytes": 4096}}
    with TestClient(_app(tmp_path, cfg)) as c:
        _error(
            c.post(
                "/v1/documents", json={"documents": [{"id": "a", "text": "x" * 101}]}, headers=A
            ),
            413,
            "document_too_large",
        )
        three = [{"id": str(i), "text": "short"} for i in range(3)]
        _error(
            c.post("/v1/documents", json={"documents": three}, headers=A), 413, "too_many_documents"
        )
        _error(
            c.post(
                "/v1/documents", json={"documents": [{"id": "a", "text": "y " * 3000}]}, headers=A
            ),
            413,
            "payload_too_large",
        )
        assert _count(c, A) == 0


def test_a_slow_query_times_out(tmp_path):
    with TestClient(_app(tmp_path, {"server": {"query_timeout_s": 0.0001}})) as c:
        c.post("/v1/documents", json={"documents": DOCS}, headers=A)
        _error(c.post("/v1/query", json={"text": "night ferry"}, headers=A), 504, "timeout")


def test_a_changed_embedder_is_a_clear_error(tmp_path):
    with Pensive(tmp_path, config=HASH_CONFIG) as p:
        p.ingest([Document("a", "Built with 256-dimensional hash vectors.")])
    app = create_app(tmp_path, {"embedder": {"name": "hash", "dim": 128}}, no_auth=True)
    with pytest.raises(WorkerError, match=r"embedder\.dim = 128 does not match"), TestClient(app):
        pass
    with Pensive(tmp_path, config=HASH_CONFIG) as p:  # and the store is as it was
        assert p.query("hash vectors").hits[0].doc_id == "a"


def test_cors_is_off_unless_configured(tmp_path, client):
    pre = {"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
    r = client.options("/v1/query", headers=pre)
    assert "access-control-allow-origin" not in r.headers
    r = client.post(
        "/v1/query", json={"text": "tea"}, headers={**A, "Origin": "https://evil.example"}
    )
    assert "access-control-allow-origin" not in r.headers
    with TestClient(_app(tmp_path, {"server": {"cors_origins": ["https://app.example"]}})) as c:
        ok = c.options("/v1/query", headers={**pre, "Origin": "https://app.example"})
        assert ok.headers["access-control-allow-origin"] == "https://app.example"
        no = c.options("/v1/query", headers=pre)
        assert "access-control-allow-origin" not in no.headers


# -- the writer killed, secrets never logged -------------------------------------------------
def test_a_killed_writer_is_restarted_and_loses_nothing_acknowledged(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    app = _app(tmp_path)
    with TestClient(app) as c:
        assert c.post("/v1/documents", json={"documents": DOCS}, headers=A).status_code == 200
        writer = app.state.service.writer
        pid = writer.pid
        docs = [
            {"id": f"k{i}", "text": f"Kill test page {i} " + "filler " * 300} for i in range(400)
        ]
        job = c.post("/v1/documents", json={"documents": docs, "wait": False}, headers=A).json()[
            "job"
        ]
        while c.get(f"/v1/jobs/{job['id']}", headers=A).json()["state"] == "queued":
            time.sleep(0.01)
        os.kill(pid, signal.SIGKILL)
        deadline = time.time() + 60
        while (writer.pid == pid or not writer.alive) and time.time() < deadline:
            time.sleep(0.05)
        assert writer.alive and writer.pid != pid and writer.restarts == 1
        failed = c.get(f"/v1/jobs/{job['id']}", headers=A).json()
        assert failed["state"] in ("failed", "done")
        if failed["state"] == "failed":
            assert failed["error"]["code"] == "writer_crashed"
        assert c.get("/health/ready").status_code == 200
        # acknowledged before the kill: still there; the interrupted job can simply be re-sent
        assert (
            c.post("/v1/query", json={"text": "INV-4471"}, headers=A).json()["hits"][0]["doc_id"]
            == "inv"
        )
        r = c.post("/v1/documents", json={"documents": docs}, headers=A)
        assert r.status_code == 200
        assert c.post("/v1/query", json={"text": "kill test page 399"}, headers=A).json()["hits"]
        assert c.get("/v1/stats", headers=A).json()["documents"] == len(DOCS) + len(docs)
    text = caplog.text + json.dumps([r.getMessage() for r in caplog.records])
    assert KEY_A not in text and KEY_B not in text


def test_keys_never_reach_the_log(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    with TestClient(_app(tmp_path)) as c:
        c.post("/v1/documents", json={"documents": DOCS}, headers=A)
        c.post("/v1/query", json={"text": "tea"}, headers=A)
        c.post("/v1/query", json={"text": "tea"}, headers={"Authorization": f"Bearer {KEY_A}x"})
        c.get("/v1/config", headers=B)
        assert KEY_A not in c.get("/v1/config", headers=A).text
    assert caplog.records  # something was logged, and no key in it
    assert KEY_A not in caplog.text and KEY_B not in caplog.text


def test_concurrent_clients(client):
    errors: list[str] = []

    def worker(n: int) -> None:
        for i in range(15):
            if i % 5 == 0:
                r = client.post(
                    "/v1/documents",
                    json={
                        "documents": [
                            {"id": f"c{n}-{i}", "text": f"Thread {n} note {i} zebra{n}x{i}"}
                        ]
                    },
                    headers=A,
                )
            else:
                r = client.post("/v1/query", json={"text": "night ferry Lisbon"}, headers=A)
            if r.status_code != 200:
                errors.append(r.text)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    hit = client.post("/v1/query", json={"text": "zebra3x10"}, headers=A).json()["hits"][0]
    assert hit["doc_id"] == "c3-10"


def test_pensive_serve_logs_requests_but_never_a_key(tmp_path):
    """The real command: uvicorn's access log and the writer's log, read from the process."""
    import subprocess
    import sys

    import httpx

    port = free_port()
    (tmp_path / "pensive.toml").write_text('[embedder]\nname = "hash"\ndim = 64\n')
    keys = tmp_path / "keys.toml"
    keys.write_text(f'[keys]\n"{KEY_A}" = "team-a"\n')
    env = {**os.environ, "PENSIVE_API_KEYS": f"{KEY_B}=team-b"}
    cmd = [
        sys.executable,
        "-m",
        "pensive_core.cli",
        "serve",
        "--store",
        str(tmp_path / "s"),
        "--config",
        str(tmp_path / "pensive.toml"),
        "--keys",
        str(keys),
        "--port",
        str(port),
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url)
        assert (
            httpx.post(f"{url}/v1/documents", json={"documents": DOCS}, headers=A).status_code
            == 200
        )
        assert httpx.post(f"{url}/v1/query", json={"text": "tea"}, headers=B).status_code == 200
        assert (
            httpx.post(
                f"{url}/v1/query",
                json={"text": "tea"},
                headers={"Authorization": f"Bearer {KEY_A}-wrong"},
            ).status_code
            == 401
        )
        assert httpx.get(f"{url}/v1/config", headers=A).status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    log = out.decode("utf-8", "replace")
    assert "POST /v1/query" in log and "401" in log  # requests were logged...
    assert KEY_A not in log and KEY_B not in log  # ...and no key with them
    assert "restarting" not in log  # a clean stop does not look like a crash
