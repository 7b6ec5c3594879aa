"""The MCP tools without a transport: ``call_tool`` on real stores (hash embedder), the key a
request presents, and store paths hidden from remote clients. The MCP SDK is not needed here;
tests/integration/test_mcp.py drives the real command through the SDK's client."""

from __future__ import annotations

import json
import math

import pytest

from pensive_core import Pensive
from pensive_core.errors import InputError
from pensive_core.mcp_server import TOOLS, Stores, call_tool
from pensive_core.namespaces import hide_root, namespace_path
from pensive_core.server.keys import presented_key
from tests.conftest import HASH_CONFIG


@pytest.fixture
def stores(tmp_path):
    s = Stores(tmp_path / "root", HASH_CONFIG)
    yield s
    s.close()


@pytest.fixture
def remote(tmp_path):
    s = Stores(tmp_path / "root", HASH_CONFIG, remote=True)
    yield s
    s.close()


def test_every_tool_has_a_strict_object_schema():
    assert set(TOOLS) == {
        "search",
        "get_document",
        "ingest",
        "delete",
        "remember",
        "recall",
        "context",
        "forget",
        "stats",
    }
    for tool in TOOLS.values():
        schema = tool.args.model_json_schema()
        json.dumps(schema)  # what list_tools sends
        assert schema["type"] == "object", tool.name
        assert schema.get("additionalProperties") is False, tool.name  # unknown fields refused
        assert tool.description.strip(), tool.name
    for name in ("remember", "recall", "context", "forget"):
        assert "session_id" in TOOLS[name].args.model_json_schema()["required"], name


def test_the_core_refuses_with_the_messages_of_the_python_and_http_apis(stores):
    with Pensive(stores.root / "other", HASH_CONFIG) as p, pytest.raises(InputError) as core:
        p.query("tea", filters={"x": math.nan})
    out, failed = call_tool(
        stores, "default", "search", {"query": "tea", "filters": {"x": math.nan}}
    )
    assert failed and out["error"] == {"code": "invalid_input", "message": str(core.value)}


def test_a_refused_ingest_stores_nothing(stores):
    docs = [
        {"id": "good", "text": "Green tea."},
        {"id": "bad", "text": "x", "metadata": {"n": math.inf}},
    ]
    out, failed = call_tool(stores, "default", "ingest", {"documents": docs})
    assert failed and out["error"]["code"] == "invalid_input"
    assert "metadata['n'] is inf" in out["error"]["message"]
    out, failed = call_tool(stores, "default", "stats", {})
    assert not failed and out["documents"] == 0
    out, failed = call_tool(stores, "default", "ingest", {"documents": docs[:1]})
    assert not failed and out["added"] == 1


def test_a_refused_turn_opens_no_session(stores):
    args = {"session_id": "s", "text": "hi", "metadata": {"seq": 3}}  # a reserved key
    out, failed = call_tool(stores, "default", "remember", args)
    assert failed and out["error"]["code"] == "invalid_input"
    out, failed = call_tool(stores, "default", "recall", {"session_id": "s", "query": "hi"})
    assert failed and out["error"]["code"] == "not_found"
    assert stores.open("default").conversations() == []


def test_arguments_are_not_coerced(stores):
    for args in ({"query": "tea", "k": "5"}, {"query": "tea", "k": True}, {"query": 5}):
        out, failed = call_tool(stores, "default", "search", args)
        assert failed and out["error"]["code"] == "validation_error", args
    out, failed = call_tool(stores, "default", "search", None)  # no arguments at all
    assert failed and "query: Field required" in out["error"]["message"]


def test_a_fact_is_carried_by_every_context(stores):
    call_tool(stores, "default", "remember", {"session_id": "s", "text": "I live in Porto."})
    out, failed = call_tool(
        stores, "default", "remember", {"session_id": "s", "kind": "fact", "text": "Be brief."}
    )
    assert not failed
    out, failed = call_tool(stores, "default", "context", {"session_id": "s", "query": "weather?"})
    assert not failed and "Be brief." in out["text"]
    args = {"session_id": "s", "query": "weather?", "template": "research", "strategy": "recency"}
    out, failed = call_tool(stores, "default", "context", args)
    assert not failed and "Answer (with citations):" in out["text"] and "Be brief." in out["text"]
    for bad in ({"template": "/etc/hostname"}, {"strategy": "os:system"}):
        out, failed = call_tool(stores, "default", "context", {**args, **bad})
        assert failed and "unknown prompt" in out["error"]["message"]
    out, failed = call_tool(
        stores,
        "default",
        "remember",
        {"session_id": "s", "kind": "fact", "text": "x", "metadata": {"a": 1}},
    )
    assert failed and "a fact takes text only" in out["error"]["message"]


def test_remote_clients_get_no_paths_and_the_server_limits(remote, tmp_path):
    out, failed = call_tool(remote, "team-a", "ingest", {"paths": [str(tmp_path)]})
    assert failed and "refused over HTTP" in out["error"]["message"]
    out, failed = call_tool(remote, "team-a", "get_document", {"id": "nope"})
    assert failed and out["error"]["message"] == "no document with id 'nope'"
    out, failed = call_tool(remote, "team-a", "search", {"query": "tea", "k": 101})
    assert failed and "this server's limit is 100" in out["error"]["message"]
    out, failed = call_tool(remote, "team-a", "search", {"query": "t" * 4001})
    assert failed and "the limit is 4000" in out["error"]["message"]
    out, failed = call_tool(remote, "team-a", "stats", {})
    assert not failed and "path" not in out
    assert (namespace_path(remote.root, "team-a") / "pensive.sqlite").is_file()


def test_unknown_tool(stores):
    out, failed = call_tool(stores, "default", "drop_everything", {})
    assert failed and out["error"]["code"] == "unknown_tool"
    assert "search" in out["error"]["message"]


def test_presented_key():
    from starlette.datastructures import Headers

    key = "k" * 20
    assert presented_key({"x-api-key": key}) == key
    assert presented_key({"authorization": f"Bearer {key}"}) == key
    assert presented_key({"authorization": f"bearer  {key} "}) == key
    assert presented_key({"authorization": f"Basic {key}"}) is None
    assert presented_key({"authorization": "Bearer "}) is None
    assert presented_key({}) is None
    # X-API-Key first, as the HTTP API takes it; header names in any case
    both = Headers({"X-Api-Key": "from-header", "Authorization": f"Bearer {key}"})
    assert presented_key(both) == "from-header"


def test_hide_root(tmp_path):
    root = tmp_path / "data"
    store = namespace_path(root, "team-a")
    assert hide_root(f"no document with id 'a' in {store}", root) == "no document with id 'a'"
    assert hide_root(f"cannot write {store}/x.npy (disk full)", root) == (
        "cannot write <store> (disk full)"
    )
    assert hide_root("nothing to hide", root) == "nothing to hide"


def test_search_takes_min_score_and_pins(stores):
    docs = [
        {"id": "tea", "text": "Green tea is steeped at eighty degrees."},
        {"id": "ferry", "text": "The night ferry to Lisbon leaves at eleven."},
    ]
    assert not call_tool(stores, "default", "ingest", {"documents": docs})[1]
    args = {"query": "night ferry to Lisbon", "k": 1, "pins": ["tea"]}
    out, failed = call_tool(stores, "default", "search", args)
    assert not failed and out["hits"][0]["doc_id"] == "tea" and out["hits"][0]["pinned"]
    off = {**args, "query": "What colour is the far side of the moon?", "min_score": 1.0}
    out, failed = call_tool(stores, "default", "search", off)
    assert not failed and [h["doc_id"] for h in out["hits"]] == ["tea"]
    out, failed = call_tool(stores, "default", "search", {**args, "pins": ["nope"]})
    assert failed and out["error"]["code"] == "not_found"
    for bad in ({"min_score": 2}, {"min_score": "0.5"}, {"pins": "tea"}, {"pins": [""]}):
        out, failed = call_tool(stores, "default", "search", {**args, **bad})
        assert failed and out["error"]["code"] == "validation_error", bad
