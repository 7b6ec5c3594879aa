import json

from pensive_core import Pensive
from pensive_core.loaders import html_to_text
from tests.conftest import HASH_CONFIG


def write_tree(root):
    (root / "sub").mkdir(parents=True)
    (root / "notes.txt").write_text("Plain text about the lighthouse keeper.")
    (root / "guide.md").write_text(
        "# Setup Guide\n\nInstall the widget first.\n\n## Usage\n\nRun it."
    )
    (root / "sub" / "page.html").write_text(
        "<html><head><title>Harbour</title><style>p{}</style></head><body>"
        "<h1>Harbour news</h1><p>The ferry &amp; the tug arrived.</p>"
        "<script>var x = 'ignore me';</script></body></html>"
    )
    rows = [
        {
            "id": "j1",
            "text": "JSON line about INV-4471",
            "metadata": {"kind": "invoice"},
            "timestamp": "2024-05-02T00:00:00Z",
        },
        "not json at all",
        {"id": "j2", "text": ""},
        {"id": "j3", "text": "fine line", "bogus": 1},
        {"id": "j4", "title": "Titled", "text": "body text"},
    ]
    (root / "data.jsonl").write_text(
        "\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows)
    )
    (root / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (root / ".hidden.txt").write_text("hidden")
    (root / "image.png").write_bytes(b"\x89PNG")


def test_ingest_path_reads_each_format_and_reports_bad_input(tmp_path):
    root = tmp_path / "docs"
    write_tree(root)
    with Pensive(tmp_path / "store", config=HASH_CONFIG) as p:
        report = p.ingest_path(root)
        assert report.added == 5  # txt, md, html, j1, j4
        bad = {src.split("/")[-1]: msg for src, msg in report.errors}
        assert "latin1.txt" in bad and "UTF-8" in bad["latin1.txt"]
        messages = " ".join(m for _, m in report.errors)
        assert "data.jsonl line 2:" in messages and "data.jsonl line 3:" in messages
        assert "data.jsonl line 4:" in messages and "bogus" in messages
        md = p.get("guide.md")
        assert md.metadata["title"] == "Setup Guide"
        html = p.get("sub/page.html")
        assert "ferry & the tug" in html.text and "ignore me" not in html.text
        assert html.metadata["title"] == "Harbour"
        j1 = p.get("j1")
        assert j1.metadata["kind"] == "invoice" and j1.timestamp.year == 2024
        assert p.get("j4").text.startswith("Titled")
        assert p.query("INV-4471", k=1).hits[0].doc_id == "j1"
        again = p.ingest_path(root)
        assert again.unchanged == 5 and again.chunks_embedded == 0


def test_html_to_text_blocks():
    title, text = html_to_text("<title> T </title><p>a</p><p>b<br>c</p>")
    assert title == "T"
    assert text.split("\n\n") == ["a", "b", "c"]


def test_missing_path_is_an_error(tmp_path):
    import pytest

    from pensive_core import InputError

    with (
        Pensive(tmp_path / "s", config=HASH_CONFIG) as p,
        pytest.raises(InputError, match="no such"),
    ):
        p.ingest_path(tmp_path / "nope")
