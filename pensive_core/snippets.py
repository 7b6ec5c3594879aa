"""Query-biased snippets: show the part of a passage that matched, not its first line."""

from __future__ import annotations

from .chunking import split_sentences
from .tokenize import Tokenizer

__all__ = ["snippet"]

_TOKENIZER: Tokenizer | None = None


def snippet(text: str, query: str, width: int = 200) -> str:
    """Return the stretch of ``text`` that best matches ``query``, about ``width`` characters.

    The sentence sharing the most distinct query terms (stemmed, stop words dropped) is the
    anchor; following sentences are added while they fit. Ties go to the earlier sentence.

    Args:
        text: A passage.
        query: The question it was retrieved for.
        width: Target length in characters; the result is cut with "…" beyond it.

    Returns:
        A single-line excerpt of ``text``.
    """
    global _TOKENIZER
    if _TOKENIZER is None:
        _TOKENIZER = Tokenizer()
    terms = set(_TOKENIZER.tokenize(query))
    spans = split_sentences(text)
    if not spans:
        return ""
    scores = [len(terms & set(_TOKENIZER.tokenize(text[s:e]))) for s, e, _ in spans]
    best = max(range(len(spans)), key=lambda i: (scores[i], -i))
    start, end = spans[best][0], spans[best][1]
    for _, e, _ in spans[best + 1 :]:
        if e - start > width:
            break
        end = e
    out = " ".join(text[start:end].split())
    prefix = "… " if best > 0 else ""
    return prefix + (out if len(out) <= width else out[: width - 1] + "…")
