"""``POST /v1/explain`` on the real app, a real writer process and real stores: the
explanation of a question, per namespace; unknown ids are 404 and bad bodies 422, nothing
changed."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from pensive_core.server import create_app  # noqa: E402
from tests.conftest import HASH_CONFIG  # noqa: E402

pytestmark = pytest.mark.integration

KEY_A = "key-a-" + "a" * 26
KEY_B = "key-b-" + "b" * 26
A = {"Authorization": f"Bearer {KEY_A}"}
B = {"Authorization": f"Bearer {KEY_B}"}
DOCS = [
    {"id": "inv", "text": "Invoice INV-4471 from Acme Corp was paid on 3 March 2024."},
    {"id": "ferry", "text": "The night ferry to Lisbon leaves the harbour at eleven."},
    {"id": "tea", "text": "Green tea is steeped at eighty degrees for two minutes."},
]
Q = "when does the night ferry leave?"


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    app = create_app(
        tmp_path_factory.mktemp("served"), HASH_CONFIG, keys={KEY_A: "team-a", KEY_B: "team-b"}
    )
    with TestClient(app) as c:
        assert c.post("/v1/documents", json={"documents": DOCS}, headers=A).status_code == 200
        yield c


def _error(r, status: int, code: str) -> None:
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code


def test_explain_route(client):
    body = {"text": Q, "expect": ["ferry", "tea", "gone"], "k": 1, "token_budget": 500}
    r = client.post("/v1/explain", json=body, headers=A)
    assert r.status_code == 200, r.text
    ex = r.json()
    ferry, tea, gone = ex["items"]
    assert ferry["found"] is True and ferry["lost_at"] is None
    assert tea["found"] is False and tea["lost_at"] == "hits" and tea["reason"] == "cut_by_k"
    assert gone["kind"] == "missing"
    assert [s["name"] for s in ex["stages"]][:3] == ["dense", "bm25", "fused"]
    query = client.post("/v1/query", json={"text": Q, "k": 1}, headers=A).json()
    assert [h["chunk_id"] for h in ex["hits"]] == [h["chunk_id"] for h in query["hits"]]
    # explain counts no query: the dashboard shows only the one query above
    assert client.get("/v1/dashboard", headers=A).json()["queries"]["count"] == 1


def test_explain_is_per_namespace_and_refuses_bad_input(client):
    # team-b's store holds none of team-a's documents
    _error(
        client.post("/v1/explain", json={"text": Q, "expect": ["ferry"]}, headers=B),
        404,
        "not_found",
    )
    for bad in (
        {"text": Q, "expect": []},
        {"text": Q, "expect": "ferry"},
        {"text": Q, "expect": ["ferry"], "token_budget": 0},
        {"text": Q, "expect": ["ferry"], "extra": 1},
    ):
        _error(client.post("/v1/explain", json=bad, headers=A), 422, "validation_error")
    _error(
        client.post("/v1/explain", json={"text": Q, "expect": [" "]}, headers=A),
        400,
        "invalid_input",
    )
