"""Reading files into :class:`Document` s: ``.txt``, ``.md``, ``.jsonl`` and ``.html``.

A broken file never stops the others: each failure is reported as ``(source, message)``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

from .errors import InputError
from .timeutil import ensure_utc
from .types import Document

__all__ = ["SUFFIXES", "iter_files", "load_file"]

SUFFIXES = (".txt", ".md", ".markdown", ".jsonl", ".html", ".htm")


def iter_files(path: Path) -> Iterator[Path]:
    """Yield the loadable files under ``path`` (or ``path`` itself), sorted, hidden ones skipped."""
    if path.is_file():
        yield path
        return
    if not path.exists():
        raise InputError(f"no such file or folder: {path}")
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            p = Path(root) / name
            if not name.startswith(".") and p.suffix.lower() in SUFFIXES:
                yield p


def _read_text(path: Path) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{path}: not UTF-8 text (byte {exc.start}: {data[exc.start : exc.start + 1]!r}); "
            "convert it to UTF-8 first"
        ) from None


class _HTMLText(HTMLParser):
    _SKIP = {"script", "style", "noscript", "template", "svg", "head"}
    _BLOCK = {
        "p",
        "div",
        "br",
        "li",
        "tr",
        "section",
        "article",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "pre",
        "blockquote",
        "table",
        "ul",
        "ol",
        "header",
        "footer",
        "main",
    }

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._skip = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        elif tag in self._SKIP:
            self._skip += 1
        elif tag in self._BLOCK:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in self._SKIP:
            self._skip = max(0, self._skip - 1)
        elif tag in self._BLOCK:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not self._skip:
            self.parts.append(data)


def html_to_text(html: str) -> tuple[str, str]:
    """Extract ``(title, visible text)`` from HTML, paragraphs separated by blank lines."""
    parser = _HTMLText()
    parser.feed(html)
    parser.close()
    text = "".join(parser.parts)
    text = re.sub(r"[ \t\r\f\v]+", " ", text)
    text = re.sub(r" *\n *", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    return parser.title.strip(), text


def _doc_id(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix() if root.is_dir() else path.name
    except ValueError:
        return path.as_posix()


def load_file(path: Path, root: Path) -> Iterator[Document | InputError]:
    """Yield the documents in one file; a bad JSONL line is yielded as an error, not raised.

    Args:
        path: The file.
        root: The folder given by the caller; document ids are paths relative to it.

    Raises:
        InputError: If the file cannot be read or has no text.
    """
    suffix = path.suffix.lower()
    mtime = ensure_utc(path.stat().st_mtime)
    text = _read_text(path)
    base_meta = {"source": str(path)}
    if suffix == ".jsonl":
        yield from _load_jsonl(path, text)
        return
    if suffix in (".html", ".htm"):
        title, body = html_to_text(text)
        meta = {**base_meta, "title": title or path.stem, "format": "html"}
    else:
        body = text
        heading = re.search(r"^\s*#\s+(.+)$", text, re.MULTILINE) if suffix != ".txt" else None
        title = heading.group(1).strip() if heading else path.stem
        meta = {**base_meta, "title": title, "format": "markdown" if suffix != ".txt" else "text"}
    if not body.strip():
        raise InputError(f"{path}: file has no text")
    yield Document(id=_doc_id(path, root), text=body, metadata=meta, timestamp=mtime)


def _load_jsonl(path: Path, text: str) -> Iterator[Document | InputError]:
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            yield InputError(f"{path}:{lineno}: invalid JSON ({exc.msg})")
            continue
        if not isinstance(row, dict):
            yield InputError(f"{path}:{lineno}: each line must be a JSON object")
            continue
        unknown = set(row) - {"id", "_id", "text", "title", "metadata", "timestamp"}
        if unknown:
            yield InputError(
                f"{path}:{lineno}: unknown field(s) {sorted(unknown)}; "
                "expected id, text, title, metadata, timestamp"
            )
            continue
        doc_id = row.get("id", row.get("_id"))
        body = row.get("text")
        if doc_id is None or not isinstance(body, str):
            yield InputError(f"{path}:{lineno}: needs an 'id' and a string 'text'")
            continue
        meta = dict(row.get("metadata") or {})
        meta.setdefault("source", str(path))
        if row.get("title"):
            meta.setdefault("title", row["title"])
            body = f"{row['title']}\n\n{body}"
        try:
            yield Document(id=str(doc_id), text=body, metadata=meta, timestamp=row.get("timestamp"))
        except InputError as exc:
            yield InputError(f"{path}:{lineno}: {exc}")
