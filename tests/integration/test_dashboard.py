"""The dashboard page in Debian's headless Chromium, against the real app served by uvicorn.

The API is driven over HTTP (ingest, questions answered by L1, L2 and L3), then the page is
checked to show what the API did: per-tier counts, the last queries with their tier and each
hit's sources, the ingest jobs and a live progress bar. Playwright only drives the browser:
nothing is downloaded (no ``playwright install``).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("playwright")
httpx = pytest.importorskip("httpx")

from playwright.sync_api import expect  # noqa: E402

from tests.conftest import HASH_CONFIG, docs_corpus  # noqa: E402

pytestmark = pytest.mark.integration

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
KEY = "dashboard-test-key-0123456789"  # namespace "default"
XSS_KEY = "dashboard-xss-key-0123456789"  # namespace "xss": its own figures
XSS = "<img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The real app on a free loopback port; yields its base URL."""
    if not CHROMIUM.is_file():
        msg = f"{CHROMIUM} is missing (make chromium installs Debian's package)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    import uvicorn

    from pensive_core.server import create_app

    app = create_app(
        tmp_path_factory.mktemp("serve") / "store",
        config=HASH_CONFIG,
        keys={KEY: "default", XSS_KEY: "xss"},
    )
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not (srv.started and srv.servers):
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    port = srv.servers[0].sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    while httpx.get(f"{url}/health/ready").status_code != 200:
        assert time.monotonic() < deadline, "the writer process did not become ready"
        time.sleep(0.1)
    yield url
    srv.should_exit = True
    thread.join(30)


@pytest.fixture(scope="module")
def browser(server):
    from playwright.sync_api import sync_playwright

    expect.set_options(timeout=10_000)

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, server):
    ctx = browser.new_context(viewport={"width": 1366, "height": 900})
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.goto(f"{server}/dashboard")
    yield pg
    ctx.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


SNAPSHOT = """(jobId) => {
  const box = document.querySelector("#ingest"), bar = box.querySelector(".bar[role=progressbar]");
  const state = box.querySelector(`.jobs tr[data-job="${jobId}"] .state`);
  return {active: box.querySelector(".active").textContent, now: bar.getAttribute("aria-valuenow"),
          max: bar.getAttribute("aria-valuemax"), progress: box.querySelector(".progress").textContent,
          state: state ? state.textContent : null};
}"""


def api(server: str, key: str) -> httpx.Client:
    return httpx.Client(base_url=server, headers={"Authorization": f"Bearer {key}"}, timeout=60)


def connect(page, key: str) -> None:
    page.fill("#api-key", key)
    page.click("#connect")


def text(page, selector: str) -> str:
    return page.locator(selector).inner_text().strip()


def test_dashboard_shows_tiers_queries_and_ingest(server, page, tmp_path):
    docs = [d for d in docs_corpus() if d.id != "inv"]
    inv = next(d for d in docs_corpus() if d.id == "inv")
    with api(server, KEY) as c:
        r = c.post(
            "/v1/documents",
            json={
                "documents": [{"id": d.id, "text": d.text, "metadata": d.metadata} for d in docs],
                "wait": True,
            },
        )
        assert r.status_code == 200, r.text
        r = c.post(
            "/v1/documents",
            json={"documents": [{"id": inv.id, "text": inv.text}], "archive_only": True},
        )
        assert r.status_code == 200, r.text
        answers = []
        for q in [
            "Acme revenue in Q3 2024",
            "Acme revenue in Q3 2024",  # the same question again: the L1 cache answers
            "arctic tern migration",
            "Who paid invoice INV-4471?",  # an identifier only the archive holds: L3
        ]:
            r = c.post("/v1/query", json={"text": q, "k": 3})
            assert r.status_code == 200, r.text
            answers.append(r.json())
        tiers = [a["tier"] for a in answers]
        assert tiers[0] == "L2" and tiers[1] == "L1" and tiers[3] == "L3", tiers
        truth = c.get("/v1/dashboard").json()

    connect(page, KEY)
    # (expect() polls from Python: the page's CSP forbids the eval that wait_for_function needs)
    expect(page.locator("#namespace")).to_have_text("default")
    assert page.locator("#error").is_hidden()
    assert text(page, "#updated") not in ("", "never")

    # per tier: the counts of what the API answered, and the numbers the API computed
    for t in ("L1", "L2", "L3"):
        want = tiers.count(t)
        assert want >= 1
        card = f"#tier-{t}"
        assert text(page, f"{card} .count") == str(want)
        assert text(page, f"{card} .share") == f"{100 * want / len(tiers):.1f} %"
        p50 = truth["tiers"][t]["p50_ms"]
        assert float(text(page, f"{card} .p50")) == pytest.approx(p50, rel=0.01, abs=0.01)
        assert text(page, f"{card} .p99") != "–"
    assert text(page, "#latency .count") == str(len(tiers))
    assert float(text(page, "#latency .p95")) == pytest.approx(
        truth["queries"]["p95_ms"], rel=0.01, abs=0.01
    )

    # the last queries, newest first, each with its tier badge and its hits' sources
    rows = page.locator("#recent tbody tr")
    assert rows.count() == len(answers)
    for row, ans in zip([rows.nth(i) for i in range(rows.count())], reversed(answers)):
        assert row.locator("td.q").inner_text() == ans["text"]
        badge = row.locator(".tier-badge")
        assert badge.inner_text() == ans["tier"]
        assert badge.get_attribute("class") == f"tier-badge tier-{ans['tier']}"
        hits = row.locator(".hit")
        assert hits.count() == len(ans["hits"])
        for i, hit in enumerate(ans["hits"]):
            assert hits.nth(i).locator(".doc").inner_text() == hit["doc_id"]
            sources = " · ".join(f"{name} #{rank}" for name, rank in hit["sources"].items())
            assert hits.nth(i).locator(".src").inner_text() == sources
    newest = rows.nth(0)
    assert newest.locator(".tier-badge").inner_text() == "L3"
    assert "archive #1" in newest.locator(".hit").nth(0).inner_text()
    assert newest.locator(".hit .doc").nth(0).inner_text() == "inv"

    # the finished jobs and the store's totals
    jobs = page.locator("#ingest .jobs tbody tr")
    assert jobs.count() == 2
    assert jobs.nth(0).locator(".state").inner_text() == "done"
    assert jobs.nth(0).locator(".docs").inner_text() == "1"  # the archive-only invoice
    assert jobs.nth(1).locator(".docs").inner_text() == str(len(docs))
    assert text(page, "#ingest .documents") == str(len(docs) + 1)
    assert int(text(page, "#ingest .chunks")) >= len(docs) + 1
    assert text(page, "#ingest .active") == "none"

    # a larger ingest: the page follows its progress while it polls
    # the engine reports progress every 256 documents, 0.2-1.5 s apart on the machines this
    # ran on: four reports (1,000 is the most one request takes), and the test has the page
    # poll ten times a second (its own timer polls once a second, slower than a fast machine
    # ingests)
    bulk = 1000
    sentence = "Bulk note {i}: the night ferry on route {r} leaves at {h}:15 from pier {p}."
    payload = [
        {
            "id": f"bulk-{i}",
            "text": " ".join(sentence.format(i=i, r=i % 17, h=j % 24, p=j) for j in range(2)),
        }
        for i in range(bulk)
    ]
    with api(server, KEY) as c:
        r = c.post("/v1/documents", json={"documents": payload, "wait": False})
        assert r.status_code == 202, r.text
        job_id = r.json()["job"]["id"]
    seen: list[int] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        page.evaluate("poll()")  # the page's own refresh, now
        shown = page.evaluate(SNAPSHOT, job_id)  # one read: the page may re-render between two
        if job_id in shown["active"]:
            assert shown["max"] == str(bulk)
            assert shown["progress"] == f"{shown['now']} / {bulk} documents"
            if not seen or seen[-1] != int(shown["now"]):
                seen.append(int(shown["now"]))
            if len(seen) == 2:
                page.screenshot(path=str(tmp_path / "dashboard-ingesting.png"), full_page=True)
        elif shown["state"] == "done":
            break
        page.wait_for_timeout(100)
    else:
        pytest.fail(f"the bulk ingest did not finish; progress seen: {seen}")
    assert len(seen) >= 2 and seen == sorted(seen) and seen[-1] > seen[0], seen
    assert 0 < seen[-1] <= bulk
    row = page.locator(f'#ingest .jobs tr[data-job="{job_id}"]')
    assert row.locator(".docs").inner_text() == str(bulk)
    expect(page.locator("#ingest .documents")).to_have_text(str(len(docs) + 1 + bulk))
    assert text(page, "#ingest .active") == "none"
    page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)


def test_wrong_key_shows_error_and_the_key_is_never_in_a_url(server, page):
    urls: list[str] = []
    page.on("request", lambda req: urls.append(req.url))
    connect(page, "not-a-key-of-this-server-000")
    page.wait_for_selector("#error", state="visible")
    assert "401" in text(page, "#error")
    assert text(page, "#namespace") == "–"
    assert (
        page.evaluate("sessionStorage.getItem('pensive.apiKey')") == "not-a-key-of-this-server-000"
    )
    assert page.evaluate("localStorage.length") == 0
    # the right key clears the error
    connect(page, KEY)
    page.wait_for_selector("#error", state="hidden")
    # connecting hides the error at once; the namespace comes with the first answer
    expect(page.locator("#namespace")).to_have_text("default")
    assert urls and not any(KEY in u or "not-a-key" in u for u in urls)


def test_query_text_is_shown_as_text(server, page, tmp_path):
    with api(server, XSS_KEY) as c:
        r = c.post(
            "/v1/documents",
            json={"documents": [{"id": '"><b id=evil>doc</b>', "text": f"A note about {XSS}"}]},
        )
        assert r.status_code == 200, r.text
        r = c.post("/v1/query", json={"text": XSS, "k": 3})
        assert r.status_code == 200, r.text
        assert r.json()["hits"], "the note should be found"
    connect(page, XSS_KEY)
    expect(page.locator("#namespace")).to_have_text("xss")
    row = page.locator("#recent tbody tr").nth(0)
    assert row.locator("td.q").inner_text() == XSS
    assert row.locator(".doc").nth(0).inner_text() == '"><b id=evil>doc</b>'
    assert page.locator("img").count() == 0
    assert page.locator("#evil").count() == 0
    assert text(page, "#tier-L1 .count") == "0"
    assert text(page, "#tier-L1 .p50") == "–"  # no L1 query in this namespace yet


def test_explain_panel_shows_each_stage_and_where_an_item_was_lost(server, page):
    """A recent query's explain button fills the panel; the table is POST /v1/explain's answer
    (ranks and reasons per stage), with user-given ids written as text."""
    with api(server, KEY) as c:
        docs = docs_corpus()
        r = c.post(
            "/v1/documents",
            json={"documents": [{"id": d.id, "text": d.text} for d in docs], "wait": True},
        )
        assert r.status_code == 200, r.text
        q = "Which invoice did Globex pay?"
        assert c.post("/v1/query", json={"text": q, "k": 1}).status_code == 200
        body = {"text": q, "expect": ["inv", "tea", XSS], "k": 1}
        truth = c.post("/v1/explain", json=body).json()
    tea = next(i for i in truth["items"] if i["id"] == "tea")
    assert tea["found"] is False and tea["lost_at"] in ("hits", "retrieval")

    connect(page, KEY)
    newest = page.locator("#recent tbody tr").nth(0)
    expect(newest.locator("td.q")).to_have_text(q)
    newest.locator("button.explain-q").click()
    assert page.locator("#explain-text").input_value() == q
    assert page.locator("#explain-k").input_value() == "1"
    page.fill("#explain-expect", f"inv, tea, {XSS}")
    page.click("#explain-run")
    verdict = page.locator("#explain .verdict")
    expect(verdict).to_have_text("verdict: " + truth["verdict"])
    # one column per item in the store, one row per stage that ran, each cell the API's rank
    heads = page.locator("#explain .stages thead th")
    assert [heads.nth(i).inner_text() for i in range(heads.count())] == ["stage", "inv", "tea"]
    ran = [s["name"] for s in truth["stages"] if s["ran"]]
    rows = page.locator("#explain .stages tbody tr")
    assert rows.count() == len(ran)
    items = [i for i in truth["items"] if i["kind"] != "missing"]
    for n, stage in enumerate(ran):
        row = rows.nth(n)
        assert row.get_attribute("data-stage") == stage
        for col, item in enumerate(items, start=1):
            s = next((x for x in item["stages"] if x["stage"] == stage), {})
            cell = row.locator("td").nth(col)
            rank = "–" if s.get("rank") is None else f"#{s['rank']}"
            assert cell.locator("b").inner_text() == rank
            if s.get("note"):
                assert cell.locator(".note").inner_text() == s["note"]
    sentences = page.locator("#explain .sentences li")
    assert sentences.count() == 3
    assert sentences.nth(2).inner_text() == f"{XSS}: not in store (no such document or passage)"
    assert page.locator("img").count() == 0
    # an expectation that names nothing: the API's message, shown as an error
    page.fill("#explain-expect", "nothing-like-it")
    page.click("#explain-run")
    expect(verdict).to_contain_text("none of the expected ids")
    assert "bad" in (verdict.get_attribute("class") or "")
    assert page.locator("#explain .stages tbody tr").count() == 0
