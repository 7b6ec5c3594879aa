"""One input boundary (issue 24, D1-D5, D7-D10): hostile input sent to the real ``pensive
serve`` over HTTP (headers exactly as written, bodies as raw bytes) and to the Python API.

Every refused request answers a documented 4xx code and stores nothing: after each one the
namespace's document, passage, vector and turn counts, and its session folders, are checked
unchanged. Valid but unusual text (NUL, right-to-left marks, zero-width characters) is kept
and comes back exactly as given.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from pensive_core import Document, Pensive
from pensive_core.config import load_config
from pensive_core.errors import ConfigError, InputError, NotFoundError
from pensive_core.timeutil import ensure_utc
from tests.conftest import free_port, wait_ready

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

pytestmark = [pytest.mark.adversarial, pytest.mark.integration]

KEY = "key-a-" + "a" * 26
AUTH = {"X-API-Key": KEY}
CFG = {"embedder": {"name": "hash", "dim": 64}}
ODD = "nul\x00 rtl\u200f zwsp\u200b zwj\u200d bom\ufeff end"  # valid text, kept as given
ODD_ID = "odd rtl\u200f zwsp\u200b \u202eevil"  # ids and keys take all but NUL and surrogates
SURROGATE = "\udc80"
# each of these converts to a time before year 1 or after year 9999 in UTC
OVERFLOWS = ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "9999-12-31T23:59:59-01:00"]
# documented in the error table of docs/service.md, with their statuses
DOCUMENTED_4XX = {
    "invalid_input": 400,
    "invalid_json": 400,
    "invalid_utf8": 400,
    "json_too_deep": 400,
    "query_too_long": 400,
    "invalid_body": 400,
    "unauthorized": 401,
    "not_found": 404,
    "method_not_allowed": 405,
    "config_error": 409,
    "payload_too_large": 413,
    "document_too_large": 413,
    "too_many_documents": 413,
    "unsupported_media_type": 415,
    "validation_error": 422,
}


# -- the server ----------------------------------------------------------------------------------
class Server:
    def __init__(self, url: str, root: Path) -> None:
        self.url, self.root = url, root
        self.http = httpx.Client(base_url=url, timeout=60)

    def send(self, method: str, path: str, body: bytes | None = None, ct: str | None = None):
        headers = dict(AUTH)
        if ct is not None:
            headers["Content-Type"] = ct
        return self.http.request(method, path, content=body, headers=headers)

    def post(self, path: str, doc, ct: str = "application/json"):
        raw = doc if isinstance(doc, bytes) else json.dumps(doc).encode("ascii")
        return self.send("POST", path, raw, ct)

    def get(self, path: str):
        return self.send("GET", path)

    def counts(self) -> dict[str, int]:
        stats = self.get("/v1/stats").json()
        sessions = self.get("/v1/conversations").json()["sessions"]
        turns = sum(len(self.get(f"/v1/conversations/{s}/turns").json()["turns"]) for s in sessions)
        folders = [p for p in self.root.glob("**/conversations/*/*") if p.is_dir()]
        return {
            "documents": stats["documents"],
            "chunks": stats["chunks"],
            "vectors": stats["vectors"],
            "sessions": len(sessions),
            "turns": turns,
            "session_folders": len(folders),
        }


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``pensive serve`` in its own process, one key (namespace team-a), the hash embedder."""
    tmp = tmp_path_factory.mktemp("boundary")
    (tmp / "pensive.toml").write_text('[embedder]\nname = "hash"\ndim = 64\n')
    (tmp / "keys.toml").write_text(f'[keys]\n"{KEY}" = "team-a"\n')
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "pensive_core.cli",
        "serve",
        "--store",
        str(tmp / "s"),
        "--config",
        str(tmp / "pensive.toml"),
        "--keys",
        str(tmp / "keys.toml"),
        "--port",
        str(port),
    ]
    proc = subprocess.Popen(
        cmd, env=dict(os.environ), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url)
        srv = Server(url, tmp / "s")
        seed = {"documents": [{"id": "seed", "text": "The lighthouse keeper logs every ship."}]}
        assert srv.post("/v1/documents", seed).status_code == 200
        r = srv.post("/v1/conversations/known/turns", {"role": "user", "text": "I live in Porto"})
        assert r.status_code == 200, r.text
        yield srv
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()


def refused(r, status: int, code: str) -> dict:
    assert r.status_code == status, r.text
    assert DOCUMENTED_4XX[code] == status
    body = r.json()["error"]
    assert body["code"] == code, body
    return body


@pytest.fixture
def unchanged(server):
    """Checks after the test that nothing the test sent was stored."""
    before = server.counts()
    yield server
    assert server.counts() == before


def deep_doc(doc_id: str, depth: int) -> bytes:
    """A document whose metadata nests ``depth`` objects deep, as raw JSON (too deep for
    ``json.dumps``)."""
    meta = b'{"a": ' * depth + b'"leaf"' + b"}" * depth
    return b'{"documents": [{"id": "%s", "text": "t", "metadata": %s}]}' % (doc_id.encode(), meta)


# -- D1: the JSON guard sees every body the framework parses as JSON ---------------------------
JSON_TYPES = [
    "APPLICATION/JSON",
    "Application/JSON",
    "application/json; charset=utf-8",
    "Application/Json;Charset=UTF-8",
    "application/vnd.api+json",
]


@pytest.mark.parametrize("ct", JSON_TYPES)
def test_deep_json_is_refused_whatever_the_content_type_case(unchanged, ct):
    refused(unchanged.post("/v1/documents", deep_doc("deep", 954), ct), 400, "json_too_deep")
    refused(unchanged.get("/v1/documents/deep"), 404, "not_found")


@pytest.mark.parametrize("ct", JSON_TYPES)
def test_invalid_utf8_is_refused_whatever_the_content_type_case(unchanged, ct):
    raw = b'{"documents": [{"id": "bad-bytes", "text": "caf\xe9 \xff\xfe"}]}'
    refused(unchanged.post("/v1/documents", raw, ct), 400, "invalid_utf8")


@pytest.mark.parametrize("ct", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_a_json_route_refuses_a_body_not_sent_as_json(unchanged, ct):
    body = json.dumps({"documents": [{"id": "untyped", "text": "t"}]}).encode()
    r = unchanged.send("POST", "/v1/documents", body, ct)
    assert r.status_code in (400, 415), r.text
    assert r.json()["error"]["code"] in ("unsupported_media_type", "json_too_deep", "invalid_utf8")
    # untyped and deep: still refused by depth (a framework version that reads it as JSON)
    r = unchanged.send("POST", "/v1/documents", deep_doc("d", 900), ct)
    assert r.status_code in (400, 415), r.text


def test_a_broken_multipart_upload_is_invalid_body(unchanged):
    r = unchanged.send(
        "POST",
        "/v1/documents/upload",
        b"--xyz\r\nContent-Disposition: form-data; name=files; filename=a.txt\r\n\r\nno end",
        "multipart/form-data; boundary=xyz",
    )
    assert r.status_code in (400, 422), r.text
    assert r.json()["error"]["code"] in ("invalid_body", "validation_error")


def test_json_with_a_content_type_in_capitals_is_accepted_and_odd_text_round_trips(server):
    doc = {"id": ODD_ID, "text": "Odd text: " + ODD, "metadata": {ODD_ID: ODD}}
    r = server.post("/v1/documents", {"documents": [doc]}, "APPLICATION/JSON; Charset=UTF-8")
    assert r.status_code == 200, r.text
    got = server.get("/v1/documents/" + ODD_ID)
    assert got.status_code == 200, got.text
    back = got.json()
    assert back["text"] == doc["text"] and back["metadata"] == doc["metadata"]
    r = server.post(
        "/v1/conversations/odd/turns", {"role": "user", "text": ODD, "metadata": {"v": ODD}}
    )
    assert r.status_code == 200, r.text
    turns = server.get("/v1/conversations/odd/turns").json()["turns"]
    assert turns[0]["text"] == ODD and turns[0]["metadata"]["v"] == ODD


# -- D2: times that overflow once in UTC -----------------------------------------------------------
@pytest.mark.parametrize("when", OVERFLOWS)
def test_times_that_overflow_in_utc_are_invalid_input_over_http(unchanged, when):
    doc = {"documents": [{"id": "t", "text": "a dated note", "timestamp": when}]}
    refused(unchanged.post("/v1/documents", doc), 400, "invalid_input")
    refused(unchanged.post("/v1/query", {"text": "note", "as_of": when}), 400, "invalid_input")
    turn = {"role": "user", "text": "hello", "timestamp": when}
    refused(unchanged.post("/v1/conversations/known/turns", turn), 400, "invalid_input")
    refused(unchanged.post("/v1/conversations/new-t/turns", turn), 400, "invalid_input")
    recall = {"query": "where", "as_of": when}
    refused(unchanged.post("/v1/conversations/known/recall", recall), 400, "invalid_input")


# -- D3/D4: strings that do not encode as UTF-8 ----------------------------------------------------
SURROGATE_DOCS = {
    "id": {"id": "s" + SURROGATE, "text": "t"},
    "text": {"id": "s", "text": "t " + SURROGATE},
    "metadata key": {"id": "s", "text": "t", "metadata": {"k" + SURROGATE: 1}},
    "metadata value": {"id": "s", "text": "t", "metadata": {"k": SURROGATE}},
    "nested value": {"id": "s", "text": "t", "metadata": {"k": [{"n": ["x", SURROGATE]}]}},
}


@pytest.mark.parametrize("where", sorted(SURROGATE_DOCS))
def test_a_lone_surrogate_in_a_document_is_invalid_input(unchanged, where):
    body = {"documents": [{"id": "fine", "text": "fine"}, SURROGATE_DOCS[where]]}
    refused(unchanged.post("/v1/documents", body), 400, "invalid_input")
    refused(unchanged.post("/v1/query", {"text": "t " + SURROGATE}), 400, "invalid_input")
    refused(unchanged.get("/v1/documents/fine"), 404, "not_found")


@pytest.mark.parametrize(
    "turn",
    [
        {"role": "user", "text": "t", "metadata": {"k": SURROGATE}},
        {"role": "user", "text": "t", "metadata": {SURROGATE: "v"}},
        {"role": "user", "text": "t", "metadata": {"deep": {"er": [SURROGATE]}}},
        {"role": "user", "text": "t " + SURROGATE},
        {"role": "user" + SURROGATE, "text": "t"},
        {"role": "user", "text": "t", "user": "ana" + SURROGATE},
    ],
)
def test_a_turn_with_a_lone_surrogate_is_not_logged(unchanged, turn):
    refused(unchanged.post("/v1/conversations/known/turns", turn), 400, "invalid_input")
    refused(unchanged.post("/v1/conversations/fresh/turns", turn), 400, "invalid_input")
    # the session still answers, and never shows the refused turn
    assert unchanged.post("/v1/conversations/known/recall", {"query": "t"}).status_code == 200
    ctx = unchanged.post("/v1/conversations/known/context", {"query": "where do I live?"})
    assert ctx.status_code == 200 and "\\udc80" not in ctx.text
    refused(unchanged.get("/v1/conversations/fresh/turns"), 404, "not_found")


def test_a_lone_surrogate_in_an_uploaded_title_is_invalid_input(unchanged):
    line = json.dumps({"id": "up", "text": "body", "title": "T" + SURROGATE}).encode() + b"\n"
    r = unchanged.http.post(
        "/v1/documents/upload", headers=AUTH, files={"files": ("t.jsonl", line)}
    )
    body = refused(r, 400, "invalid_input")
    assert "title" in body["details"][0]["message"]


# -- D5: reads never write -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "method, path, body",
    [
        ("GET", "/v1/conversations/{sid}/turns", None),
        ("POST", "/v1/conversations/{sid}/recall", {"query": "where do I live?"}),
        ("POST", "/v1/conversations/{sid}/context", {"query": "where do I live?"}),
        ("DELETE", "/v1/conversations/{sid}", None),
    ],
)
def test_reading_an_unknown_session_is_404_and_creates_nothing(unchanged, method, path, body):
    for sid in ("never-seen", "nope-2"):
        raw = None if body is None else json.dumps(body).encode()
        ct = None if body is None else "application/json"
        r = unchanged.send(method, path.format(sid=sid), raw, ct)
        refused(r, 404, "not_found")
        assert sid in r.json()["error"]["message"]


@pytest.mark.parametrize(
    "method, path",
    [
        ("POST", "/v1/conversations/%ED%A0%80/turns"),  # a lone surrogate, UTF-8 encoded
        ("POST", "/v1/conversations/%FF%FE/turns"),
        ("GET", "/v1/conversations/%C0%AF/turns"),  # an overlong '/'
        ("GET", "/v1/documents/%FF"),
        ("GET", "/v1/stats?namespace=%FF"),
    ],
)
def test_a_url_that_is_not_utf8_is_refused_not_replaced(unchanged, method, path):
    # decoded with replacement, different bad ids became the same "\ufffd\ufffd" session
    body = json.dumps({"role": "user", "text": "secret of client A"}).encode()
    r = unchanged.send(method, path, body if method == "POST" else None, "application/json")
    refused(r, 400, "invalid_utf8")


# -- D7: messages name what the client sent, never where the server keeps it ---------------------
def test_not_found_messages_are_clean(unchanged):
    body = refused(unchanged.get("/v1/documents/nope"), 404, "not_found")
    assert body["message"] == "no document with id 'nope'"
    body = refused(unchanged.send("DELETE", "/v1/documents/nope"), 404, "not_found")
    assert "namespaces" not in body["message"] and "/" not in body["message"]
    assert str(unchanged.root) not in body["message"]


def test_upload_errors_name_the_uploaded_file(unchanged):
    data = b'{"id": "a", "text": "fine"}\n{broken\n'
    r = unchanged.http.post(
        "/v1/documents/upload", headers=AUTH, files={"files": ("broken.jsonl", data)}
    )
    body = refused(r, 400, "invalid_input")
    message = body["details"][0]["message"]
    assert message.startswith("broken.jsonl line 2: invalid JSON"), message
    assert "pensive-upload" not in r.text and "/tmp" not in r.text


# -- D8: stats are current -------------------------------------------------------------------------
def test_stats_counts_are_all_current(server):
    before = server.get("/v1/stats").json()
    docs = [{"id": f"d8-{i}", "text": f"Counting note number {i} on the stats."} for i in range(4)]
    assert server.post("/v1/documents", {"documents": docs}).status_code == 200
    after = server.get("/v1/stats").json()  # no query in between: nothing else reloads
    assert after["documents"] == before["documents"] + 4
    assert after["chunks"] == before["chunks"] + 4
    assert after["vectors"] == after["chunks"]


# -- D9: finite numbers only -----------------------------------------------------------------------
@pytest.mark.parametrize("number", [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e400"])
def test_non_finite_numbers_are_invalid_input_over_http(unchanged, number):
    doc = b'{"documents": [{"id": "n", "text": "t", "metadata": {"v": %s}}]}' % number
    refused(unchanged.post("/v1/documents", doc), 400, "invalid_input")
    nested = b'{"documents": [{"id": "n", "text": "t", "metadata": {"v": [1, {"w": %s}]}}]}'
    refused(unchanged.post("/v1/documents", nested % number), 400, "invalid_input")
    flt = b'{"text": "t", "filters": {"v": {"$gt": %s}}}' % number
    refused(unchanged.post("/v1/query", flt), 400, "invalid_input")
    k = b'{"text": "t", "k": %s}' % number
    refused(unchanged.post("/v1/query", k), 422, "validation_error")
    turn = b'{"role": "user", "text": "t", "metadata": {"v": %s}}' % number
    refused(unchanged.post("/v1/conversations/known/turns", turn), 400, "invalid_input")


# -- D10: strict types, nothing coerced -------------------------------------------------------------
GOOD_DOC = {"id": "strict", "text": "strict types"}


@pytest.mark.parametrize(
    "path, body",
    [
        ("/v1/documents", {"documents": [GOOD_DOC], "archive_only": "yes"}),
        ("/v1/documents", {"documents": [GOOD_DOC], "archive_only": 1}),
        ("/v1/documents", {"documents": [GOOD_DOC], "wait": "no"}),
        ("/v1/documents", {"documents": [{**GOOD_DOC, "timestamp": 1700000000}]}),
        ("/v1/documents", {"documents": [{**GOOD_DOC, "id": 7}]}),
        ("/v1/query", {"text": "t", "k": True}),
        ("/v1/query", {"text": "t", "k": "5"}),
        ("/v1/query", {"text": "t", "k": 5.0}),
        ("/v1/query", {"text": "t", "as_of": 1700000000}),
        ("/v1/conversations/known/turns", {"role": "user", "text": "t", "timestamp": 1700000000}),
        ("/v1/conversations/known/recall", {"query": "t", "k": "3"}),
        ("/v1/conversations/known/context", {"query": "t", "token_budget": "100"}),
    ],
)
def test_wrong_types_are_422_and_store_nothing(unchanged, path, body):
    refused(unchanged.post(path, body), 422, "validation_error")


# -- the Python API: the same boundary, in validate.py -------------------------------------------
def counts(p: Pensive) -> tuple[int, int, int, int, list[str]]:
    s = p.stats(disk=False)
    return (
        s["documents"],
        s["chunks"],
        s["vectors"],
        len(p.components.sparse.ids()),
        p.conversations(),
    )


def folders(path: Path) -> int:
    return sum(1 for f in path.glob("**/conversations/*/*") if f.is_dir())


@pytest.fixture
def store(tmp_path):
    with Pensive(tmp_path / "store", config=CFG) as p:
        p.ingest([Document(id="seed", text="The lighthouse keeper logs every ship.")])
        p.conversation("known").add("user", "I live in Porto")
        before, n = counts(p), folders(tmp_path)
        yield p
        assert counts(p) == before and folders(tmp_path) == n


@pytest.mark.parametrize("when", OVERFLOWS)
def test_times_that_overflow_in_utc_are_input_errors_in_python(store, when):
    with pytest.raises(InputError, match="years 1 to 9999"):
        Document(id="t", text="a dated note", timestamp=when)
    parsed = datetime.fromisoformat(when)
    with pytest.raises(InputError, match="years 1 to 9999"):
        Document(id="t", text="a dated note", timestamp=parsed)
    with pytest.raises(InputError):
        store.query("note", as_of=parsed)
    chat = store.conversation("known")
    with pytest.raises(InputError):
        chat.add("user", "hello", timestamp=parsed)
    with pytest.raises(InputError):
        chat.recall("where", as_of=parsed)
    assert len(chat) == 1


def test_posix_seconds_out_of_range_are_input_errors():
    for bad in (float("inf"), float("nan"), 1e300, -1e300):
        with pytest.raises(InputError):
            ensure_utc(bad)
    west = timezone(timedelta(hours=-14))
    with pytest.raises(InputError):
        ensure_utc(datetime(9999, 12, 31, 23, 0, tzinfo=west))


@pytest.mark.parametrize(
    "fields",
    [
        {"id": "s" + SURROGATE, "text": "t"},
        {"id": "s", "text": "t " + SURROGATE},
        {"id": "s", "text": "t", "metadata": {"k" + SURROGATE: 1}},
        {"id": "s", "text": "t", "metadata": {"k": ("a", {"b": SURROGATE})}},
        {"id": "s", "text": "t", "metadata": {"v": float("nan")}},
        {"id": "s", "text": "t", "metadata": {"v": [float("inf")]}},
        {"id": "s", "text": "t", "metadata": {"v": 10**400}},
        {"id": "s", "text": "t", "metadata": {"v": {1, 2}}},
    ],
)
def test_documents_refuse_what_no_store_could_hold(store, fields):
    with pytest.raises(InputError):
        Document(**fields)


def test_metadata_changed_after_the_document_was_made_is_checked_before_storing(store):
    doc = Document(id="late", text="a late change")
    doc.metadata["k"] = SURROGATE
    with pytest.raises(InputError, match="surrogate"):
        store.ingest([Document(id="first", text="first of the batch"), doc])
    doc.metadata["k"] = float("nan")
    with pytest.raises(InputError, match="finite"):
        store.ingest([doc])


def test_a_lone_surrogate_in_a_jsonl_title_is_refused(store, tmp_path):
    path = tmp_path / "titled.jsonl"
    path.write_text(json.dumps({"id": "j", "text": "body", "title": "T" + SURROGATE}) + "\n")
    report = store.ingest_path(path)
    assert len(report.errors) == 1 and "'title' holds a lone surrogate" in report.errors[0][1]


@pytest.mark.parametrize(
    "args, kwargs",
    [
        (("user", "t"), {"metadata": {"k": SURROGATE}}),
        (("user", "t"), {"metadata": {SURROGATE: 1}}),
        (("user", "t"), {"metadata": {"v": float("nan")}}),
        (("user", "t"), {"metadata": {"v": 1e400}}),
        (("user", "t " + SURROGATE), {}),
        (("us" + SURROGATE, "t"), {}),
    ],
)
def test_a_refused_turn_is_not_logged(store, args, kwargs):
    chat = store.conversation("known")
    with pytest.raises(InputError):
        chat.add(*args, **kwargs)
    assert len(chat) == 1
    assert [h.text for h in chat.recall("t", k=5)] == ["I live in Porto"]


def test_a_session_id_that_is_not_utf8_is_refused(store):
    with pytest.raises(InputError):
        store.conversation("s" + SURROGATE)
    with pytest.raises(InputError):
        store.conversation("known", user="u" + SURROGATE)


def test_odd_but_valid_text_round_trips(tmp_path):
    with Pensive(tmp_path, config=CFG) as p:
        p.ingest([Document(id="odd", text="Odd text: " + ODD, metadata={"v": ODD, ODD_ID: 1})])
        got = p.get("odd")
        assert got.text == "Odd text: " + ODD and got.metadata == {"v": ODD, ODD_ID: 1}
        turn = p.conversation("s").add("user", ODD, metadata={"v": ODD})
        assert turn.text == ODD
        assert p.conversation("s").turns()[0].metadata["v"] == ODD


def test_a_lookup_of_an_unknown_session_creates_nothing(store, tmp_path):
    with pytest.raises(NotFoundError, match="no session 'nope'"):
        store.conversation("nope", create=False)
    assert store.conversation("known", create=False).turns()[0].text == "I live in Porto"


def test_the_cli_reads_of_an_unknown_session_create_nothing(tmp_path):
    from typer.testing import CliRunner

    from pensive_core.cli import app

    root = tmp_path / "store"
    with Pensive(root, config=CFG) as p:
        p.conversation("known").add("user", "I live in Porto")
    n = folders(tmp_path)
    runner = CliRunner()
    for args in (
        ["chat", "turns", "nope"],
        ["chat", "recall", "nope", "where"],
        ["chat", "context", "nope", "where"],
        ["chat", "clear", "nope"],
    ):
        out = runner.invoke(app, [*args, "--store", str(root)])
        assert isinstance(out.exception, NotFoundError), out.output
        assert "no session 'nope'" in str(out.exception)
    assert folders(tmp_path) == n
    with Pensive(root, config=CFG, read_only=True) as p:
        assert p.conversations() == ["known"]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_numbers_are_refused_in_python(store, bad):
    with pytest.raises(InputError):
        store.query("ship", filters={"v": {"$gt": bad}})
    with pytest.raises(InputError):
        store.query("ship", k=bad)
    with pytest.raises(ConfigError):
        load_config({"fusion": {"weights": {"dense": bad, "bm25": 1.0}}})
    assert not math.isfinite(bad)


def test_every_code_the_server_gives_is_in_the_readme_table_with_its_status():
    import ast
    import re

    import pensive_core.server.app as app_module

    tree = ast.parse(Path(app_module.__file__).read_text())
    given: set[tuple[int, str]] = set()
    for node in ast.walk(tree):
        # ApiError(400, "code", ...), _error_response(...), and the (400, "code") pairs of
        # the table of what each engine error becomes
        pair = node.args if isinstance(node, ast.Call) else getattr(node, "elts", None)
        if isinstance(node, (ast.Call, ast.Tuple)) and pair and len(pair) >= 2:
            status, code = pair[0], pair[1]
            if (
                isinstance(status, ast.Constant)
                and isinstance(status.value, int)
                and isinstance(code, ast.Constant)
                and isinstance(code.value, str)
                and re.fullmatch(r"[a-z_]+", code.value)
            ):
                given.add((status.value, code.value))
    # chosen at run time: the framework's refusals
    given |= {(404, "not_found"), (405, "method_not_allowed"), (400, "invalid_body")}
    readme = (Path(__file__).resolve().parents[2] / "docs" / "service.md").read_text()
    table: set[tuple[str, str]] = set()
    for status, codes in re.findall(r"^  \| (\dxx|\d{3}) \| (`[^|]+`) \|", readme, re.M):
        table |= {(status, c) for c in re.findall(r"`([a-z_]+)`", codes)}
    assert len(given) > 15
    for status, code in given:
        assert (str(status), code) in table, (
            f"{status} {code} is not in the docs' table (docs/service.md)"
        )
    assert ("4xx", "http_error") in table
    for status, code in table:  # and nothing listed that the server never gives
        assert code == "http_error" or (int(status), code) in given, code
    assert "case-insensitively" in readme
