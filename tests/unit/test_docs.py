"""The documentation runs: every code block of README.md and docs/ is executed (Python blocks
of a page in order, in one namespace, in a scratch folder, offline; TOML blocks loaded as a
Pensive config; JSON blocks parsed), except a block whose line above says
``<!-- not run: REASON -->``; and ``mkdocs build --strict`` builds the site without a warning
(broken links and anchors, a docstring mkdocstrings cannot read)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```\s*$", re.M | re.S)
NOT_RUN = re.compile(r"<!--\s*not run:\s*(\S[^>]*?)\s*-->\s*$")
RUNNABLE = {"python", "toml", "json"}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    code: str
    not_run: str | None  # the reason given, for a block that is not run


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    out = []
    for m in FENCE.finditer(text):
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        reason = NOT_RUN.search(before)
        line = text.count("\n", 0, m.start()) + 1
        out.append(Block(page, line, m.group(1), m.group(2), reason.group(1) if reason else None))
    return out


ALL = [b for page in PAGES for b in blocks(page)]


def where(b: Block) -> str:
    return f"{b.page.relative_to(ROOT)}:{b.line}"


def test_every_block_runs_or_says_why_not():
    unexplained = [where(b) for b in ALL if b.lang not in RUNNABLE and b.not_run is None]
    assert not unexplained, (
        "these blocks are neither python/toml/json (run) nor marked "
        f"'<!-- not run: REASON -->': {unexplained}"
    )
    run = [b for b in ALL if b.not_run is None]
    skipped = [b for b in ALL if b.not_run is not None]
    # the count is pinned: a block added or dropped is seen here
    assert (len(run), len(skipped)) == (20, 30), (len(run), len(skipped))
    # Python blocks run, but for the template of a user's own test module (its package is theirs)
    assert [where(b) for b in skipped if b.lang == "python"] == ["docs/configuration.md:266"]


def _pages_with_python() -> list[Path]:
    return [p for p in PAGES if any(b.lang == "python" and not b.not_run for b in blocks(p))]


@pytest.mark.slow  # the examples load the bundled MiniLM
@pytest.mark.parametrize("page", _pages_with_python(), ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run(page, tmp_path, monkeypatch):
    """A page's Python blocks in order, in one namespace, in a scratch folder."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()  # a folder of the user's, as the quickstart ingests one
    (tmp_path / "docs" / "note.md").write_text("# Ferry\n\nThe night ferry leaves at 23:40.\n")
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for b in blocks(page):
        if b.lang != "python" or b.not_run:
            continue
        code = compile(b.code, where(b), "exec")
        try:
            exec(code, namespace)  # noqa: S102 - the documentation's own examples
        except Exception as exc:
            raise AssertionError(f"{where(b)} failed: {type(exc).__name__}: {exc}") from exc
    for value in list(namespace.values()):  # stores a block left open
        close = getattr(value, "close", None)
        if type(value).__name__ == "Pensive" and callable(close):
            close()


def test_toml_and_json_blocks_load():
    import tomllib

    from pensive_core.config import load_config

    for b in ALL:
        if b.not_run:
            continue
        if b.lang == "toml":
            load_config(tomllib.loads(b.code), environ={})  # a partial config, checked whole
        elif b.lang == "json":
            json.loads(b.code)


@pytest.mark.slow  # a few seconds: mkdocs reads every page and docstring
def test_the_site_builds_strict(tmp_path):
    pytest.importorskip("mkdocs")
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "site" / "reference" / "config" / "index.html").exists()
    assert (tmp_path / "site" / "results" / "replicas" / "index.html").exists()
