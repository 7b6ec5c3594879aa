"""Pins: documents a caller forces into a query's result, by id (``query(..., pins=[...])``)
or by a mention in the question (``@doc-id``, ``@"Title"``).

A pinned document is represented by its passage that best answers the question (the L2
stages run with the document as the only one allowed, so the passage is chosen the way any
hit is), marked ``pinned`` and put ahead of the retrieved hits in the order the pins were
given. Pins come on top of ``k``: they are never counted as retrieved, never reordered,
dropped by ``min_score`` or cached in L1 (they are looked up again on every call, so a pin to a
document re-ingested since is its current text). ``filters`` and ``as_of`` narrow what is
retrieved, not what is pinned.

Mentions: ``@"..."`` names a document by its ``title`` metadata (case and spacing ignored) or
its id; ``@word`` names a document by id (a trailing ``.,;:!?)`` is not part of it). A quoted
mention naming no document is an error, like an unknown id in ``pins``; a bare ``@word`` that
names no document is left in the question as typed ("what did @alice say"), and an ``@``
inside a word (an e-mail address) or a URL (``https://host/@name``, ``?u=@name``) is never a
mention. Resolved mentions are taken out of the
text that is searched.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import InputError, NotFoundError
from ..filters import parse_filter
from ..validate import check_text
from .state import QueryState

if TYPE_CHECKING:
    from ..components import Components
    from ..types import Hit

__all__ = ["MAX_PINS", "PinSet", "Pins", "find_mentions", "validate_pins"]

MAX_PINS = 20
# not after a word character (an e-mail address) nor inside a URL (a path, a query string)
_MENTION = re.compile(r'(?<![\w@/:.=&?#%+])@(?:"([^"\r\n]{1,500})"|([^\s"@]+))')
_TRAILING = ".,;:!?)]}'"


def validate_pins(pins: Any) -> tuple[str, ...]:
    """The pinned ids: a sequence of non-empty strings (a bare string is one id), duplicates
    dropped in order; None is no pins.

    Raises:
        InputError: On another type, an empty or over-long id, more than :data:`MAX_PINS`.
    """
    if pins is None:
        return ()
    if isinstance(pins, str):
        pins = [pins]
    if not isinstance(pins, (list, tuple)) or not all(isinstance(p, str) for p in pins):
        raise InputError("pins must be a document id (str) or a list of them")
    out: list[str] = []
    for i, pin in enumerate(pins):
        check_text(pin, f"pins[{i}]")
        if not pin.strip() or len(pin) > 1024:
            raise InputError(f"pins[{i}] must be a non-empty document id of at most 1024 chars")
        if pin not in out:
            out.append(pin)
    if len(out) > MAX_PINS:
        raise InputError(f"at most {MAX_PINS} pins per query, got {len(out)}")
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class Mention:
    """One ``@`` mention in a question: where it is, what it names, whether it was quoted."""

    start: int
    end: int
    name: str
    quoted: bool


def find_mentions(text: str) -> list[Mention]:
    """The ``@id`` and ``@"Title"`` mentions in ``text``, in order (not yet resolved)."""
    out = []
    for m in _MENTION.finditer(text):
        if m.group(1) is not None:
            name = " ".join(m.group(1).split())
            if name:
                out.append(Mention(m.start(), m.end(), name, True))
            continue
        word = m.group(2).rstrip(_TRAILING)
        if word:
            out.append(Mention(m.start(), m.start() + 1 + len(word), word, False))
    return out


@dataclasses.dataclass(frozen=True)
class PinSet:
    """What a question's pins resolved to.

    Args:
        ids: The pinned document ids, in order (``pins`` first, then mentions).
        text: The question with resolved mentions taken out (what is searched).
    """

    ids: tuple[str, ...]
    text: str


class Pins:
    """Resolves pins and mentions against the store and builds the pinned hits."""

    def __init__(self, comps: Components) -> None:
        self._comps = comps
        self._titles: tuple[int, dict[str, list[str]]] | None = None

    def _by_title(self, name: str) -> list[str]:
        commit = self._comps.commit_no
        if self._titles is None or self._titles[0] != commit:
            doc_ids, metas, _ = self._comps.archive.filter_rows()
            titles: dict[str, list[str]] = {}
            for doc_id, meta in zip(doc_ids, metas):
                title = meta.get("title") if isinstance(meta, dict) else None
                if isinstance(title, str) and title.strip():
                    titles.setdefault(" ".join(title.casefold().split()), []).append(doc_id)
            self._titles = (commit, titles)
        return self._titles[1].get(name.casefold(), [])

    def _exists(self, doc_id: str) -> bool:
        return bool(self._comps.archive.chunk_ids(doc_id))

    def resolve(self, text: str, pins: Sequence[str]) -> PinSet:
        """The documents ``pins`` and the mentions in ``text`` name.

        Raises:
            NotFoundError: If a pinned id or a quoted mention names no stored document.
            InputError: If a quoted title names several documents, or the pins (with the
                mentions) are more than :data:`MAX_PINS`.
        """
        missing = [p for p in pins if not self._exists(p)]
        if missing:
            raise NotFoundError(
                f"pinned document{'s' if len(missing) > 1 else ''} not in the store: "
                + ", ".join(repr(m) for m in missing)
            )
        ids = list(pins)
        keep: list[str] = []
        last = 0
        for m in find_mentions(text):
            doc_id = self._mentioned(m)
            if doc_id is None:
                continue  # a bare @word naming no document is part of the question
            keep.append(text[last : m.start])
            last = m.end
            if doc_id not in ids:
                ids.append(doc_id)
        if len(ids) > MAX_PINS:
            raise InputError(f"at most {MAX_PINS} pins per query, got {len(ids)}")
        if not keep:
            return PinSet(tuple(ids), text)
        keep.append(text[last:])
        return PinSet(tuple(ids), " ".join("".join(keep).split()))

    def _mentioned(self, m: Mention) -> str | None:
        if self._exists(m.name):
            return m.name
        if not m.quoted:
            return None
        found = self._by_title(m.name)
        if not found:
            raise NotFoundError(f'@"{m.name}" names no document (by title or id) in the store')
        if len(found) > 1:
            raise InputError(
                f'@"{m.name}" names {len(found)} documents ({", ".join(found[:5])}): '
                "mention one by its id"
            )
        return found[0]

    def hits(self, ids: Sequence[str], text: str, answer: Any) -> list[Hit]:
        """One hit per pinned document, its passage that best answers ``text``, marked pinned.

        Args:
            ids: The pinned document ids.
            text: The question searched (may be empty: then each document's first passage).
            answer: The router's L2/L3 answer function, run with only that document allowed.
        """
        from ..types import Hit

        out = []
        for rank, doc_id in enumerate(ids, 1):
            best = None
            if text.strip():
                where = parse_filter({"doc_id": doc_id})  # every stage honours it
                state = QueryState(text, 1, None, where, ())
                hits = answer(state).hits
                best = next((h for h in hits if h.doc_id == doc_id), None)
            if best is None:  # nothing in it matched: its first passage stands for it
                doc = self._comps.archive.document(doc_id)
                rows = self._comps.archive.doc_chunks(doc_id)
                if doc is None or not rows:
                    raise NotFoundError(f"pinned document {doc_id!r} is no longer stored")
                cid, _, body = min(rows, key=lambda r: r[1])
                best = Hit(doc_id, cid, body, 0.0, doc.metadata, doc.timestamp)
            out.append(dataclasses.replace(best, pinned=True, sources={"pin": rank}))
        return out
