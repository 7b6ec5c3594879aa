"""Schemathesis against the service's own OpenAPI schema: generated requests (valid and not)
on every operation, over real HTTP to uvicorn on 127.0.0.1, never get a 5xx."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("fastapi")
schemathesis = pytest.importorskip("schemathesis")
import httpx  # noqa: E402
import uvicorn  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402

from pensive_core.server import create_app  # noqa: E402
from tests.conftest import HASH_CONFIG, free_port, wait_ready  # noqa: E402

pytestmark = pytest.mark.integration

KEY = "schema-key-" + "s" * 24
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The real app under uvicorn in a thread, with a few documents and a session."""
    root = tmp_path_factory.mktemp("schema")
    app = create_app(root, HASH_CONFIG, keys={KEY: "fuzz"})
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    wait_ready(url)
    docs = [
        {"id": f"d{i}", "text": f"Seed document {i} about herons and ferries."} for i in range(5)
    ]
    httpx.post(f"{url}/v1/documents", json={"documents": docs}, headers=AUTH, timeout=60)
    turn = {"role": "user", "text": "I keep bees in the garden."}
    httpx.post(f"{url}/v1/conversations/s/turns", json=turn, headers=AUTH, timeout=60)
    yield url
    server.should_exit = True
    thread.join(30)


@pytest.fixture(scope="module")
def api_schema(served):
    return schemathesis.openapi.from_url(f"{served}/openapi.json")


def _fuzz(api_schema, served: str, headers: dict[str, str], examples: int) -> list[str]:
    """Run every operation's generated cases; the failures, one line each."""
    from hypothesis import given

    failures: list[str] = []
    calls = [0]
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 15  # every route of the API is in the schema
    for op in operations:

        @given(case=op.as_strategy())
        @settings(
            max_examples=examples,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def run(case) -> None:
            calls[0] += 1
            case.call_and_validate(
                base_url=served, headers=headers, checks=[not_a_server_error], timeout=60
            )

        try:
            run()
        except Exception as exc:  # noqa: BLE001 - every operation is tried; all failures listed
            failures.append(f"{op.label}: {str(exc)[:2000]}")
    assert calls[0] >= 3 * len(operations)  # generated cases were really sent
    return failures


def test_no_request_gets_a_server_error(api_schema, served):
    assert _fuzz(api_schema, served, AUTH, 30) == []


def test_no_request_without_a_key_gets_a_server_error(api_schema, served):
    assert _fuzz(api_schema, served, {}, 5) == []
