"""Sentence-aware chunking sized to the embedder's window.

Text is split into sentences (paragraph breaks, headings and list items are hard boundaries),
then packed greedily into passages of at most ``max_tokens`` embedder tokens. A sentence longer
than the window is split on word boundaries, so no passage is ever silently truncated by the model.
Each passage is an exact slice of the document, so it can be expanded from the archive later.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence

from .types import Chunk

__all__ = ["split_sentences", "chunk_text", "content_hash"]

# Abbreviations after which a period does not end a sentence.
_ABBREV = frozenset(
    """mr mrs ms dr prof sr jr st vs etc e.g i.e al fig figs eq eqs no vol cf approx inc ltd co
    corp jan feb mar apr jun jul aug sep sept oct nov dec u.s u.k ph.d resp""".split()
)
_PARA_RE = re.compile(r"\n[ \t]*\n+|\n(?=[ \t]*(?:#{1,6}\s|[-*+]\s|\d+[.)]\s))")
_END_RE = re.compile(r"[.!?]+[\"')\]]*(?=\s+[\"'(\[]?[A-Z0-9])|\n")


def content_hash(text: str) -> str:
    """Return a short stable hash of ``text`` (blake2b, 16 hex chars)."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


def _sentence_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    cursor = start
    segment = text[start:end]
    for m in _END_RE.finditer(segment):
        cut = start + m.end()
        if m.group().strip() and m.group()[0] == ".":
            # "e.g." / "Fig." / "Dr." are not sentence ends
            word = re.search(r"([\w.]+)\.*$", text[cursor : start + m.start() + 1])
            if word and word.group(1).lower().rstrip(".") in _ABBREV:
                continue
        spans.append((cursor, cut))
        cursor = cut
    spans.append((cursor, end))
    out = []
    for s, e in spans:
        # trim whitespace so every span is an exact, clean slice of the text
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if s < e:
            out.append((s, e))
    return out


def split_sentences(text: str) -> list[tuple[int, int, bool]]:
    """Split ``text`` into sentence spans.

    Args:
        text: The document text.

    Returns:
        ``(start, end, starts_paragraph)`` for each sentence, in order.
    """
    out: list[tuple[int, int, bool]] = []
    para_start = 0
    bounds = [m.span() for m in _PARA_RE.finditer(text)] + [(len(text), len(text))]
    for b_start, b_end in bounds:
        first = True
        for s, e in _sentence_spans(text, para_start, b_start):
            out.append((s, e, first))
            first = False
        para_start = b_end
    return out


def _split_long(
    text: str, start: int, end: int, max_tokens: int, count: Callable[[Sequence[str]], list[int]]
) -> list[tuple[int, int]]:
    """Split one over-long span on word boundaries into pieces that each fit."""
    words = [(m.start() + start, m.end() + start) for m in re.finditer(r"\S+", text[start:end])]
    sizes = count([text[s:e] for s, e in words])
    pieces: list[tuple[int, int]] = []
    cur_start, cur_tokens = None, 0
    last_end = start
    for (ws, we), n in zip(words, sizes):
        if n > max_tokens:
            # a single "word" longer than the window (a URL, a base64 blob): cut it by characters
            if cur_start is not None:
                pieces.append((cur_start, last_end))
                cur_start, cur_tokens = None, 0
            step = max(1, (we - ws) * max_tokens // (n + 1))
            for s in range(ws, we, step):
                pieces.append((s, min(we, s + step)))
            last_end = we
            continue
        if cur_start is not None and cur_tokens + n > max_tokens:
            pieces.append((cur_start, last_end))
            cur_start, cur_tokens = None, 0
        if cur_start is None:
            cur_start = ws
        cur_tokens += n
        last_end = we
    if cur_start is not None:
        pieces.append((cur_start, last_end))
    return pieces


def chunk_text(
    doc_id: str,
    text: str,
    *,
    max_tokens: int,
    count_tokens: Callable[[Sequence[str]], list[int]],
    min_tokens: int = 32,
) -> list[Chunk]:
    """Cut a document into passages that fit the embedder's window.

    Sentences are packed greedily up to ``max_tokens``; at a paragraph break a passage is closed
    early once it holds at least half the window, so passages tend to follow the text's structure.
    A trailing passage smaller than ``min_tokens`` is merged into the previous one when they fit.

    Args:
        doc_id: The document id, used in the chunk ids.
        text: The document text.
        max_tokens: The most embedder tokens a passage may hold (special tokens excluded).
        count_tokens: Counts embedder tokens for a batch of strings.
        min_tokens: Passages smaller than this are merged into a neighbour where possible.

    Returns:
        Passages in document order, with stable content-derived ids.
    """
    sents = split_sentences(text)
    if not sents:
        return []
    sizes = count_tokens([text[s:e] for s, e, _ in sents])
    units: list[tuple[int, int, int, bool]] = []  # start, end, tokens, starts_paragraph
    for (s, e, para), n in zip(sents, sizes):
        if n <= max_tokens:
            units.append((s, e, n, para))
        else:
            pieces = _split_long(text, s, e, max_tokens, count_tokens)
            piece_sizes = count_tokens([text[a:b] for a, b in pieces])
            for i, ((a, b), m) in enumerate(zip(pieces, piece_sizes)):
                units.append((a, b, m, para and i == 0))

    groups: list[list[tuple[int, int, int, bool]]] = []
    cur: list[tuple[int, int, int, bool]] = []
    cur_tokens = 0
    for unit in units:
        n, para = unit[2], unit[3]
        if cur and (cur_tokens + n > max_tokens or (para and cur_tokens >= max_tokens // 2)):
            groups.append(cur)
            cur, cur_tokens = [], 0
        cur.append(unit)
        cur_tokens += n
    if cur:
        if (
            groups
            and cur_tokens < min_tokens
            and sum(u[2] for u in groups[-1]) + cur_tokens <= max_tokens
        ):
            groups[-1].extend(cur)
        else:
            groups.append(cur)

    chunks: list[Chunk] = []
    seen: dict[str, int] = {}
    for ordinal, group in enumerate(groups):
        start, end = group[0][0], group[-1][1]
        body = text[start:end]
        h = content_hash(body)
        n = seen.get(h, 0)
        seen[h] = n + 1
        cid = f"{doc_id}#{h}" if n == 0 else f"{doc_id}#{h}~{n}"
        chunks.append(
            Chunk(id=cid, doc_id=doc_id, ordinal=ordinal, text=body, start=start, end=end, hash=h)
        )
    return chunks
