"""``pensive mcp`` end to end: the real command in a subprocess, driven by the MCP SDK's own
client over stdio and over streamable HTTP (API keys, namespaces kept apart, keys never
logged). Every tool, bad arguments as tool errors with nothing stored, the server alive after."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
import anyio  # noqa: E402
import httpx  # noqa: E402
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from tests.conftest import free_port  # noqa: E402

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {
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
DOCS = [
    {"id": "inv", "text": "Invoice INV-4471 from Acme Corp was paid on 3 March 2024."},
    {"id": "ferry", "text": "The night ferry to Lisbon leaves the harbour at eleven."},
    {
        "id": "tea",
        "text": "Green tea is steeped at eighty degrees for two minutes.",
        "metadata": {"source": "kitchen.md", "year": 2021},
        "timestamp": "2021-05-01T00:00:00Z",
    },
]
KEY_A = "key-a-" + "a" * 26
KEY_B = "key-b-" + "b" * 26
HANG_GUARD_S = 180  # a hang fails the test; no timing is asserted


def _env() -> dict[str, str]:
    # this checkout's code, also in the subprocess
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "pensive.toml"
    path.write_text('[embedder]\nname = "hash"\ndim = 64\n')
    return path


def _run(body: Callable[[], Awaitable[None]]) -> None:
    async def guarded() -> None:
        with anyio.fail_after(HANG_GUARD_S):
            await body()

    anyio.run(guarded)


async def _call(s: ClientSession, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """A call that must succeed: its structured result (the same JSON as its text)."""
    res = await s.call_tool(tool, args)
    assert not res.is_error, (tool, res.content[0].text)
    assert json.loads(res.content[0].text) == res.structured_content
    return res.structured_content


async def _refused(s: ClientSession, tool: str, args: dict[str, Any], code: str) -> str:
    """A call that must come back as a tool error with ``code``: its message."""
    res = await s.call_tool(tool, args)
    assert res.is_error, (tool, args, res.structured_content)
    err = res.structured_content["error"]
    assert err["code"] == code, (tool, args, err)
    assert res.content[0].text == f"{code}: {err['message']}"
    return err["message"]


def _stdio(store: Path, config: Path) -> StdioServerParameters:
    args = ["-m", "pensive_core.cli", "mcp", "--store", str(store), "--config", str(config)]
    return StdioServerParameters(
        command=sys.executable, args=args, env=_env(), cwd=str(store.parent)
    )


def test_stdio_every_tool(tmp_path, config):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "birds.md").write_text("# Birds\n\nThe arctic tern migrates from pole to pole.\n")
    (folder / "trains.txt").write_text("The sleeper train to Vienna departs at nine.\n")

    async def body() -> None:
        async with (
            stdio_client(_stdio(tmp_path / "store", config)) as (r, w),
            ClientSession(r, w) as s,
        ):
            await s.initialize()
            tools = {t.name: t for t in (await s.list_tools()).tools}
            assert set(tools) == TOOLS
            for t in tools.values():
                assert t.description and len(t.description) > 40, t.name
                assert t.input_schema["type"] == "object", t.name
            assert tools["search"].input_schema["required"] == ["query"]
            assert {"query", "k", "filters", "as_of"} <= set(
                tools["search"].input_schema["properties"]
            )
            assert tools["search"].annotations.read_only_hint is True
            assert tools["delete"].annotations.destructive_hint is True

            report = await _call(s, "ingest", {"documents": DOCS})
            assert report["added"] == 3
            report = await _call(s, "ingest", {"paths": [str(folder)]})
            assert report["added"] == 2 and report["errors"] == []

            found = await _call(s, "search", {"query": "INV-4471 invoice", "k": 3})
            assert found["tier"] in ("L1", "L2", "L3")
            top = found["hits"][0]
            assert top["doc_id"] == "inv" and "INV-4471" in top["text"]
            assert top["chunk_id"] and isinstance(top["score"], float)
            found = await _call(s, "search", {"query": "arctic tern"})
            assert found["hits"][0]["doc_id"] == "birds.md"
            # filters and as_of reach the query
            found = await _call(s, "search", {"query": "tea", "filters": {"year": {"$lt": 2000}}})
            assert found["hits"] == []
            found = await _call(
                s, "search", {"query": "green tea", "as_of": "2020-01-01T00:00:00Z"}
            )
            assert "tea" not in {h["doc_id"] for h in found["hits"]}
            found = await _call(
                s, "search", {"query": "green tea", "as_of": "2022-01-01T00:00:00Z"}
            )
            assert found["hits"][0]["doc_id"] == "tea"

            doc = await _call(s, "get_document", {"id": "tea"})
            assert doc == {
                "id": "tea",
                "text": DOCS[2]["text"],
                "metadata": {"source": "kitchen.md", "year": 2021},
                "timestamp": "2021-05-01T00:00:00+00:00",
            }

            said = await _call(
                s, "remember", {"session_id": "s1", "text": "I moved to Lisbon last week"}
            )
            assert said["turn"]["role"] == "user" and said["turn"]["seq"] == 0
            await _call(
                s,
                "remember",
                {"session_id": "s1", "role": "assistant", "text": "Noted: you live in Lisbon."},
            )
            await _call(s, "remember", {"session_id": "s2", "text": "My cat is called Miso"})
            fact = await _call(
                s, "remember", {"session_id": "s1", "kind": "fact", "text": "Answer in French."}
            )
            assert isinstance(fact["fact"], int)

            recalled = await _call(s, "recall", {"session_id": "s1", "query": "Lisbon", "k": 5})
            texts = [h["text"] for h in recalled["hits"]]
            assert "I moved to Lisbon last week" in texts
            assert all("Miso" not in t for t in texts)  # another session's turns never come
            assert {h["metadata"]["session_id"] for h in recalled["hits"]} == {"s1"}

            ctx = await _call(
                s, "context", {"session_id": "s1", "query": "where do I live?", "token_budget": 500}
            )
            assert "Answer in French." in ctx["text"] and "Lisbon" in ctx["text"]
            assert 0 < ctx["tokens"] <= ctx["budget"] == 500

            gone = await _call(s, "forget", {"session_id": "s1"})
            assert gone["cleared"] == 2
            recalled = await _call(s, "recall", {"session_id": "s1", "query": "Lisbon"})
            assert recalled["hits"] == []
            recalled = await _call(s, "recall", {"session_id": "s2", "query": "cat"})
            assert "Miso" in recalled["hits"][0]["text"]  # the other session is kept

            assert (await _call(s, "delete", {"id": "ferry"}))["chunks"] >= 1
            await _refused(s, "get_document", {"id": "ferry"}, "not_found")
            stats = await _call(s, "stats", {})
            assert stats["documents"] == 4
            assert stats["path"] == str(tmp_path / "store")  # a local host may see its path

    _run(body)


# (tool, arguments, code, a piece of the message)
BAD: list[tuple[str, dict[str, Any], str, str]] = [
    ("search", {"query": "tea", "k": 0}, "validation_error", "k"),
    ("search", {"query": "tea", "k": "5"}, "validation_error", "k"),
    ("search", {"query": "tea", "k": 2.0}, "validation_error", "k"),
    ("search", {"query": ""}, "validation_error", "query"),
    ("search", {"query": "   "}, "invalid_input", "query is empty"),
    ("search", {}, "validation_error", "query"),
    ("search", {"query": "tea", "limit": 3}, "validation_error", "limit"),
    ("search", {"query": "tea", "as_of": 5}, "validation_error", "ISO-8601"),
    ("search", {"query": "tea", "filters": {"year": {"$near": 3}}}, "invalid_input", "$near"),
    ("search", {"query": "tea", "filters": {"year": 10**400}}, "invalid_input", "finite"),
    ("get_document", {"id": "nope"}, "not_found", "nope"),
    ("get_document", {"id": 7}, "validation_error", "id"),
    ("delete", {"id": "nope"}, "not_found", "nope"),
    ("remember", {"session_id": "s9", "text": ""}, "validation_error", "text"),
    (
        "remember",
        {"session_id": "s9", "text": "hi", "metadata": {"role": "x"}},
        "invalid_input",
        "role",
    ),
    ("remember", {"session_id": "s9", "text": "hi", "kind": "rumour"}, "validation_error", "kind"),
    ("recall", {"session_id": "never", "query": "x"}, "not_found", "never"),
    ("context", {"session_id": "never", "query": "x"}, "not_found", "never"),
    (
        "context",
        {"session_id": "s1", "query": "x", "token_budget": 0},
        "validation_error",
        "budget",
    ),
    ("forget", {"session_id": "never"}, "not_found", "never"),
    ("no_such_tool", {}, "unknown_tool", "no_such_tool"),
]
BAD_INGESTS: list[tuple[dict[str, Any], str, str]] = [
    # one good document and one bad: the whole call is refused, the good one not stored
    (
        {"documents": [{"id": "ok", "text": "fine"}, {"id": "x", "text": ""}]},
        "validation_error",
        "text",
    ),
    (
        {"documents": [{"id": "ok", "text": "fine"}, {"id": "a\x00b", "text": "t"}]},
        "invalid_input",
        "NUL",
    ),
    (
        {
            "documents": [
                {"id": "ok", "text": "fine"},
                {"id": "y", "text": "t", "metadata": {"n": 10**400}},
            ]
        },
        "invalid_input",
        "finite",
    ),
    ({"documents": [{"id": "ok", "text": "fine", "colour": "red"}]}, "validation_error", "colour"),
    ({"documents": []}, "validation_error", "documents"),
    ({}, "validation_error", "either documents or paths"),
    ({"documents": [{"id": "ok", "text": "fine"}], "paths": ["x"]}, "validation_error", "not both"),
    ({"paths": ["/no/such/folder"]}, "invalid_input", "/no/such/folder"),
]


def test_stdio_bad_arguments_are_tool_errors_and_store_nothing(tmp_path, config):
    async def body() -> None:
        async with (
            stdio_client(_stdio(tmp_path / "store", config)) as (r, w),
            ClientSession(r, w) as s,
        ):
            await s.initialize()
            await _call(s, "ingest", {"documents": DOCS[:1]})
            await _call(s, "remember", {"session_id": "s1", "text": "hello"})
            for tool, args, code, piece in BAD:
                message = await _refused(s, tool, args, code)
                assert piece in message, (tool, args, message)
            for args, code, piece in BAD_INGESTS:
                message = await _refused(s, "ingest", args, code)
                assert piece in message, (args, message)
            # nothing of a refused call was stored
            stats = await _call(s, "stats", {})
            assert stats["documents"] == 1
            await _refused(s, "get_document", {"id": "ok"}, "not_found")
            await _refused(s, "recall", {"session_id": "s9", "query": "hi"}, "not_found")
            turns = await _call(s, "recall", {"session_id": "s1", "query": "hello"})
            assert [h["text"] for h in turns["hits"]] == ["hello"]
            # and the server still serves
            assert (await _call(s, "search", {"query": "INV-4471"}))["hits"][0]["doc_id"] == "inv"

    _run(body)


def test_stdio_refuses_http_options_and_a_locked_store(tmp_path, config):
    base = [sys.executable, "-m", "pensive_core.cli", "mcp", "--config", str(config)]
    out = subprocess.run(
        [*base, "--store", str(tmp_path / "s"), "--port", "9"],
        env=_env(),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=HANG_GUARD_S,
    )
    assert out.returncode == 1 and "go with --http" in out.stderr
    out = subprocess.run(
        [*base, "--store", str(tmp_path / "s"), "--http"],
        env={k: v for k, v in _env().items() if k != "PENSIVE_API_KEYS"},
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=HANG_GUARD_S,
    )
    assert out.returncode == 1 and "needs API keys" in out.stderr
    # a store another process writes: refused at start, before the host sends anything
    from pensive_core import Pensive

    with Pensive(tmp_path / "busy", config=str(config)):
        out = subprocess.run(
            [*base, "--store", str(tmp_path / "busy")],
            env=_env(),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=HANG_GUARD_S,
        )
    assert out.returncode == 1 and "open for writing" in out.stderr, out.stderr
    assert out.stdout == ""  # nothing on the protocol's channel


# -- streamable HTTP ---------------------------------------------------------------------------------
@pytest.fixture
def http_server(tmp_path, config):
    """``pensive mcp --http`` with key A (a keys file) and key B (the environment)."""
    port = free_port()
    keys = tmp_path / "keys.toml"
    keys.write_text(f'[keys]\n"{KEY_A}" = "team-a"\n')
    cmd = [
        sys.executable,
        "-m",
        "pensive_core.cli",
        "mcp",
        "--http",
        "--store",
        str(tmp_path / "store"),
        "--config",
        str(config),
        "--keys",
        str(keys),
        "--port",
        str(port),
    ]
    env = {**_env(), "PENSIVE_API_KEYS": f"{KEY_B}=team-b"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + HANG_GUARD_S  # a hang guard, not a timing
    while True:
        assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
        try:
            if httpx.post(url, json={}, timeout=2).status_code == 401:  # the gate answers
                break
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "pensive mcp --http never answered"
        time.sleep(0.1)
    server = {"url": url, "proc": proc}
    try:
        yield server
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=60)


def _session(url: str, headers: dict[str, str]) -> Any:
    """An MCP client session over streamable HTTP sending ``headers`` with every request."""
    from contextlib import asynccontextmanager

    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    @asynccontextmanager
    async def opened() -> Any:
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            streamable_http_client(url, http_client=http) as streams,
        ):
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as s:
                await s.initialize()
                yield s

    return opened()


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def test_http_keys_and_namespaces(http_server):
    url = http_server["url"]
    # refused before MCP sees it: no key, a wrong key, a key sent the wrong way
    for headers in (
        {},
        {"Authorization": f"Bearer {KEY_A}-wrong"},
        {"X-API-Key": "x" * 32},
        {"Authorization": f"Basic {KEY_A}"},
    ):
        res = httpx.post(url, json=INITIALIZE, headers={**ACCEPT, **headers}, timeout=30)
        assert res.status_code == 401, headers
        assert res.json()["error"]["data"]["code"] == "unauthorized"
    # the same request with a key is served
    res = httpx.post(
        url, json=INITIALIZE, headers={**ACCEPT, "Authorization": f"Bearer {KEY_A}"}, timeout=30
    )
    assert res.status_code == 200

    async def body() -> None:
        with pytest.raises(Exception) as refused:
            async with _session(url, {}):
                pass
        assert "unauthorized: missing API key" in repr(refused.value)

        async with _session(url, {"Authorization": f"Bearer {KEY_A}"}) as a:
            assert {t.name for t in (await a.list_tools()).tools} == TOOLS
            assert (await _call(a, "ingest", {"documents": DOCS}))["added"] == 3
            hits = (await _call(a, "search", {"query": "INV-4471"}))["hits"]
            assert hits[0]["doc_id"] == "inv"
            await _call(a, "remember", {"session_id": "shared-name", "text": "A's secret plan"})
            # files on the server's machine are not for remote clients
            message = await _refused(a, "ingest", {"paths": ["/etc"]}, "invalid_input")
            assert "over HTTP" in message
            # the server's limits apply: [server] max_k is 100
            await _refused(a, "search", {"query": "tea", "k": 101}, "invalid_input")
            # where the server keeps its files is not the client's business
            message = await _refused(a, "get_document", {"id": "nope"}, "not_found")
            assert "store" not in message and "/" not in message, message
            stats = await _call(a, "stats", {})
            assert stats["documents"] == 3 and "path" not in stats

        async with _session(url, {"X-API-Key": KEY_B}) as b:
            assert (await _call(b, "stats", {}))["documents"] == 0
            assert (await _call(b, "search", {"query": "INV-4471"}))["hits"] == []
            await _refused(b, "get_document", {"id": "inv"}, "not_found")
            await _refused(b, "delete", {"id": "inv"}, "not_found")
            await _refused(b, "recall", {"session_id": "shared-name", "query": "plan"}, "not_found")
            await _call(b, "ingest", {"documents": [{"id": "b1", "text": "Team B's own note."}]})

        async with _session(url, {"X-API-Key": KEY_A}) as a:
            assert (await _call(a, "stats", {}))["documents"] == 3  # B's ingest stayed in B's
            await _refused(a, "get_document", {"id": "b1"}, "not_found")
            assert (await _call(a, "get_document", {"id": "inv"}))["id"] == "inv"

    _run(body)
    proc = http_server["proc"]
    assert proc.poll() is None  # every refusal left the server serving


def test_http_never_logs_a_key(http_server):
    async def body() -> None:
        async with _session(http_server["url"], {"Authorization": f"Bearer {KEY_A}"}) as a:
            await _call(a, "stats", {})
        httpx.post(http_server["url"], json=INITIALIZE, headers={"X-API-Key": KEY_B + "x"})

    _run(body)
    proc = http_server["proc"]
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    log = out.decode("utf-8", "replace")
    assert "POST /mcp" in log and "401" in log  # requests were logged...
    assert KEY_A not in log and KEY_B not in log  # ...and no key with them


def _rpc(url: str, headers: dict[str, str], body: str) -> dict[str, Any]:
    """One JSON-RPC request as raw text (JSON that no SDK writes: NaN, Infinity)."""
    res = httpx.post(url, headers=headers, content=body, timeout=60)
    assert res.status_code == 200, res.text
    if res.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:] for line in res.text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1])
    return res.json()


def test_http_nan_and_infinity_get_the_core_messages(http_server):
    url = http_server["url"]
    headers = {**ACCEPT, "Content-Type": "application/json", "X-API-Key": KEY_B}
    res = httpx.post(url, json=INITIALIZE, headers=headers, timeout=30)
    assert res.status_code == 200
    headers = {
        **headers,
        "mcp-session-id": res.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-06-18",
    }
    httpx.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(n: int, tool: str, arguments: str) -> dict[str, Any]:
        body = (
            f'{{"jsonrpc":"2.0","id":{n},"method":"tools/call",'
            f'"params":{{"name":"{tool}","arguments":{arguments}}}}}'
        )
        return _rpc(url, headers, body)["result"]

    for n, (tool, arguments, message) in enumerate(
        [
            ("search", '{"query":"tea","filters":{"x":NaN}}', "filter on 'x': the value is nan"),
            (
                "ingest",
                '{"documents":[{"id":"a","text":"t","metadata":{"x":Infinity}}]}',
                "Document 'a': metadata['x'] is inf",
            ),
            (
                "remember",
                '{"session_id":"s","text":"t","metadata":{"x":-1e400}}',
                "turn metadata['x'] is -inf",
            ),
        ],
        start=2,
    ):
        result = call(n, tool, arguments)
        assert result["isError"] is True
        assert result["structuredContent"]["error"]["code"] == "invalid_input"
        assert result["structuredContent"]["error"]["message"].startswith(message), result
    assert call(9, "stats", "{}")["structuredContent"]["documents"] == 0
    gone = call(10, "recall", '{"session_id":"s","query":"t"}')["structuredContent"]
    assert gone["error"]["code"] == "not_found"  # the refused turn opened no session
