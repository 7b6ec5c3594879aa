"""L3 escalation: search the whole archived documents when L2 lacks an identifier, figure or
quote the question asks for, or (``[router] l3_below``) is unsure; a hit is the matching
passage expanded to its neighbours."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from ..archive import DocumentStore, fts_all, fts_any  # fts_*: kept importable from here
from ..tokenize import DIGIT_RE, TOKEN_RE, quoted_phrases
from ..types import Document, Hit
from .state import QueryState

if TYPE_CHECKING:
    from ..components import Components

__all__ = [
    "Escalation",
    "exact_needles",
    "fts_all",
    "fts_any",
    "missing_needles",
    "window_text",
]

L3_PASSAGES = 2  # archive passages an exact-string escalation adds to L2's answer


def exact_needles(text: str) -> list[str]:
    """The exact strings a question asks for: quoted phrases, identifiers and long numbers.

    An identifier mixes letters and digits ("INV-4471", "Q3", "BRCA1", "COVID-19"); a number
    counts when it has four or more digits or a decimal point ("2024", "3.5"). Short plain
    numbers ("5", "10%") are quantities a passage may state in other words, not strings to find:
    on SciFact, escalating for them lowered nDCG@10 (benchmarks/results/tune_router.md).
    """
    nfkc = unicodedata.normalize("NFKC", text)
    out: list[str] = quoted_phrases(nfkc)
    for tok in TOKEN_RE.findall(nfkc):
        if not DIGIT_RE.search(tok):
            continue
        has_alpha = any(ch.isalpha() for ch in tok)
        digits = sum(ch.isdigit() for ch in tok)
        if has_alpha or digits >= 4 or "." in tok:
            low = tok.casefold()
            if low not in out:
                out.append(low)
    return out


def missing_needles(needles: Iterable[str], hits: Sequence[Hit]) -> list[str]:
    """Needles that no hit's text contains (case-insensitively)."""
    needles = list(needles)
    if not needles:
        return []  # most questions: nothing to look for, no passage to fold
    texts = [unicodedata.normalize("NFKC", h.text).casefold() for h in hits]
    return [n for n in needles if not any(n in t for t in texts)]


def window_text(archive: DocumentStore, doc: Document, ordinal: int, window: int) -> str:
    """The document's text from ``window`` passages before ``ordinal`` to as many after."""
    spans = archive.neighbours(doc.id, ordinal, window)
    return doc.text[spans[0][1] : spans[-1][2]] if spans else doc.text


def _with_sources(h: Hit, more: Mapping[str, int]) -> Hit:
    return Hit(
        h.doc_id, h.chunk_id, h.text, h.score, h.metadata, h.timestamp, {**more, **h.sources}
    )


class Escalation:
    """L3: when L2 lacks what was asked (or is unsure), search the whole archived documents
    and merge what they hold into the answer."""

    def __init__(self, comps: Components) -> None:
        self._comps = comps

    def run(self, state: QueryState) -> None:
        """Escalate ``state`` if called for: its hits, confidence and tier become L3's."""
        comps = self._comps
        router = comps.config.router
        text, hits, conf, k, cutoff = (
            state.text,
            state.hits,
            state.confidence,
            state.k,
            state.cutoff,
        )
        allowed = state.allowed
        missing = missing_needles(exact_needles(text), hits) if router.l3_exact else []
        low = not hits or conf < router.l3_below
        why = "exact" if missing else "low_confidence" if low else None
        state.note("l3", {"reason": why, "missing": missing, "confidence": conf})
        if why is None:
            return
        counts = comps.counters["l3"]
        with state.timed("l3_ms"):
            words = comps.words.tokenize(text)
            limit = k if allowed is None else 10 * k  # room for documents the filter removes
            archive = comps.archive
            if missing:
                counts["exact"] += 1
                # documents holding every missing string, ranked by BM25 over the whole
                # question (the needles are among the words, so none holding them is excluded)
                found = archive.search_documents(missing, (), words, limit)
                if not found and len(missing) > 1:
                    found = archive.search_documents((), missing, words, limit)
            else:
                counts["low_confidence"] += 1
                found = archive.search_documents((), (), words, limit) if words else []
            l3: list[Hit] = []
            for doc_id, score in found:
                hit = self.archive_hit(doc_id, score, len(l3) + 1, missing, words, cutoff)
                if hit is not None and (allowed is None or hit.chunk_id in allowed):
                    l3.append(hit)
                    if len(l3) == k:
                        break
        state.note("l3", {"reason": why, "missing": missing, "confidence": conf, "found": l3})
        if not l3:
            return
        counts["found"] += 1
        l2 = {h.chunk_id: h for h in hits}
        # a passage both tiers found keeps the archive's expanded text and both sets of ranks
        l3 = [_with_sources(h, l2[h.chunk_id].sources) if h.chunk_id in l2 else h for h in l3]
        state.tier = "L3"
        if missing:
            # the archive's best passages holding what was asked: first when L2 was unsure,
            # after L2's top passage when it was confident (a confident L2 answer usually
            # names the thing differently: SciFact, benchmarks/results/tune_router.md)
            lead = l3[:L3_PASSAGES]
            seen = {h.chunk_id for h in lead}
            rest = [h for h in hits if h.chunk_id not in seen]
            at = 0 if conf < router.l3_first_below else 1
            state.hits = (rest[:at] + lead + rest[at:])[:k]
            verified = not missing_needles(missing, lead[:1])
            state.confidence = max(conf, 0.9 if verified else 0.6)
            return
        # low confidence: interleave by reciprocal rank; agreement on the top raises confidence
        rrf: dict[str, float] = {}
        by_id = {h.chunk_id: h for h in hits} | {h.chunk_id: h for h in l3}
        for lst in (hits, l3):
            for r, h in enumerate(lst, 1):
                rrf[h.chunk_id] = rrf.get(h.chunk_id, 0.0) + 1.0 / (60 + r)
        order = sorted(rrf, key=lambda c: -rrf[c])[:k]
        agree = bool(hits) and hits[0].doc_id in {h.doc_id for h in l3[:3]}
        state.hits = [by_id[c] for c in order]
        state.confidence = min(1.0, conf + 0.25) if agree else conf

    def archive_hit(
        self,
        doc_id: str,
        score: float,
        rank: int,
        needles: list[str],
        words: list[str],
        cutoff: datetime | None,
    ) -> Hit | None:
        """The passage of an archived document that holds what was asked, with its neighbours."""
        archive = self._comps.archive
        passages = archive.doc_chunks(doc_id)
        if not passages:
            return None
        folded = [unicodedata.normalize("NFKC", t).casefold() for _, _, t in passages]

        def fit(i: int) -> tuple[int, int]:
            exact = sum(1 for n in needles if n in folded[i])
            return exact, sum(1 for w in words if w in folded[i])

        best = max(range(len(passages)), key=fit)
        cid = passages[best][0]
        row = archive.chunks([cid]).get(cid)
        if row is None or (cutoff is not None and row.timestamp and row.timestamp > cutoff):
            return None
        doc = archive.document(doc_id)
        text = window_text(archive, doc, row.ordinal, 1) if doc is not None else row.text
        return Hit(doc_id, cid, text, score, row.metadata, row.timestamp, {"archive": rank})
