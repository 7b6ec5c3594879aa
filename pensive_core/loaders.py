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
from .validate import check_text

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


def _read_text(path: Path, name: str) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{name}: not UTF-8 text (byte {exc.start}: {data[exc.start : exc.start + 1]!r}); "
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


def load_file(path: Path, root: Path, source: str | None = None) -> Iterator[Document | InputError]:
    """Yield the documents in one file; a bad JSONL line is yielded as an error, not raised.

    Args:
        path: The file.
        root: The folder given by the caller; document ids are paths relative to it.
        source: The file's name as the caller knows it, for ``metadata["source"]`` and the
            messages (default: ``path``). The server passes the name a file was uploaded
            under, so neither shows where it was kept meanwhile.

    Raises:
        InputError: If the file cannot be read or has no text.
    """
    name = str(path) if source is None else source
    suffix = path.suffix.lower()
    mtime = ensure_utc(path.stat().st_mtime)
    text = _read_text(path, name)
    base_meta = {"source": name}
    if suffix == ".jsonl":
        yield from _load_jsonl(name, text)
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
        raise InputError(f"{name}: file has no text")
    try:
        yield Document(id=_doc_id(path, root), text=body, metadata=meta, timestamp=mtime)
    except InputError as exc:
        raise InputError(f"{name}: {exc}") from None


def _load_jsonl(name: str, text: str) -> Iterator[Document | InputError]:
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            yield InputError(f"{name} line {lineno}: invalid JSON ({exc.msg})")
            continue
        except RecursionError:
            yield InputError(f"{name} line {lineno}: the JSON nests too deep to read")
            continue
        except ValueError as exc:  # an integer of more digits than Python reads
            yield InputError(f"{name} line {lineno}: invalid JSON ({exc})")
            continue
        if not isinstance(row, dict):
            yield InputError(f"{name} line {lineno}: each line must be a JSON object")
            continue
        unknown = set(row) - {"id", "_id", "text", "title", "metadata", "timestamp"}
        if unknown:
            yield InputError(
                f"{name} line {lineno}: unknown field(s) {sorted(unknown)}; "
                "expected id, text, title, metadata, timestamp"
            )
            continue
        doc_id = row.get("id", row.get("_id"))
        body = row.get("text")
        if (
            isinstance(doc_id, bool)
            or not isinstance(doc_id, (str, int))
            or not isinstance(body, str)
        ):
            yield InputError(f"{name} line {lineno}: needs an 'id' (a string) and a string 'text'")
            continue
        meta = row.get("metadata")
        if meta is not None and not isinstance(meta, dict):
            yield InputError(f"{name} line {lineno}: 'metadata' must be a JSON object")
            continue
        meta = dict(meta or {})
        meta.setdefault("source", name)
        title = row.get("title")
        if title:
            if not isinstance(title, str):
                yield InputError(f"{name} line {lineno}: 'title' must be a string")
                continue
            try:
                check_text(title, "'title'")
            except InputError as exc:
                yield InputError(f"{name} line {lineno}: {exc}")
                continue
            meta.setdefault("title", title)
            body = f"{title}\n\n{body}"
        try:
            yield Document(id=str(doc_id), text=body, metadata=meta, timestamp=row.get("timestamp"))
        except InputError as exc:
            yield InputError(f"{name} line {lineno}: {exc}")
