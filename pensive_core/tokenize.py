"""Lexical tokenisation for BM25.

Identifiers and numbers stay whole ("INV-4471", "Q3", "2024", "3.5"); compound words are also
split into their parts (camelCase, snake_case, kebab-case) so both the whole and the parts match.
Plain words are lower-cased, stop words dropped, and stemmed with PyStemmer.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["CAMEL_RE", "SEP_RE", "STOP_EN", "Tokenizer", "is_number", "split_compound"]

# A token is a run of word characters, possibly joined by - _ . / : where both sides are
# word characters ("INV-4471", "snake_case", "v1.2.3", "3.5"); a leading sign/currency is dropped.
TOKEN_RE = re.compile(r"[^\W_]+(?:[-_./:][^\W_]+)*|_+[^\W_]+(?:_[^\W_]+)*", re.UNICODE)
DIGIT_RE = re.compile(r"\d")
_QUOTED_RE = re.compile(r"[\"“”]([^\"“”]{2,200})[\"“”]")
SEP_RE = re.compile(r"[-_./:]+")
# camelCase boundaries only between letters: "getUserName" -> get User Name, "HTTPServer" ->
# HTTP Server; letter-digit runs like "Q3" or "H2O" stay whole.
CAMEL_RE = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_NUM_SEP_RE = re.compile(r"(?<=\d),(?=\d{3}\b)")

# Standard English stop words (the Lucene/NLTK core list), negations kept out deliberately:
# "not" and "no" change meaning and are kept as tokens.
STOP_EN = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself now of off on once only or other our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why will
    with would you your yours yourself yourselves""".split()
)


def quoted_phrases(text: str) -> list[str]:
    """The phrases a question puts in double quotes, case-folded."""
    return [q.casefold().strip() for q in _QUOTED_RE.findall(text)]


@lru_cache(maxsize=8)
def _stemmer(name: str):  # type: ignore[no-untyped-def]
    import Stemmer  # PyStemmer, a core dependency

    return Stemmer.Stemmer(name)


def split_compound(raw: str) -> list[str]:
    """A token's parts: split at ``- _ . / :`` and camelCase boundaries, a number kept whole
    ("getUserName" -> get, User, Name; "3.5" -> 3.5). Plain words take a fast path that the
    property tests check against the rules."""
    if raw.isalpha() and (raw.islower() or raw.isupper() or raw[1:].islower()):
        return [raw]  # a plain word (most tokens): no separator, no camelCase, not a number
    if is_number(raw):
        return [raw]
    parts: list[str] = []
    for piece in SEP_RE.split(raw):
        if piece:
            parts.extend(p for p in CAMEL_RE.split(piece) if p)
    return parts


def is_number(raw: str) -> bool:
    """Whether ``float()`` reads the token as a number ("3.5", "1e3", "nan")."""
    try:
        float(raw)
    except ValueError:
        return False
    return True


class Tokenizer:
    """Turns text into BM25 terms.

    Args:
        stemmer: A PyStemmer algorithm name ("english"), or "" for no stemming.
        stopwords: "en" to drop English stop words, "none" to keep everything.

    Attributes:
        stopwords: The words dropped (lower case).
    """

    def __init__(self, stemmer: str = "english", stopwords: str = "en") -> None:
        self.stemmer_name = stemmer
        self._stem = _stemmer(stemmer).stemWord if stemmer else None
        self.stopwords: frozenset[str] = STOP_EN if stopwords == "en" else frozenset()
        self._cache: dict[str, str] = {}

    def _word(self, word: str) -> str | None:
        w = word.lower()
        if w in self.stopwords:
            return None
        if self._stem is None or not w.isalpha():
            return w  # identifiers and numbers are never stemmed
        stemmed = self._cache.get(w)
        if stemmed is None:
            stemmed = self._stem(w)
            if len(self._cache) < 200_000:
                self._cache[w] = stemmed
        return stemmed

    def tokenize(self, text: str) -> list[str]:
        """Return the BM25 terms of ``text``, in order, duplicates kept.

        Args:
            text: Any text.

        Returns:
            Terms: whole identifiers and numbers, stemmed lower-case words, and the parts of
            compound identifiers.
        """
        out: list[str] = []
        for raw in TOKEN_RE.findall(_NUM_SEP_RE.sub("", text)):
            raw = raw.strip("_")
            parts = split_compound(raw)
            if len(parts) > 1:
                out.append(raw.lower())  # the identifier whole: "inv-4471", "getusername"
                for part in parts:
                    tok = self._word(part)
                    if tok:
                        out.append(tok)
            else:
                tok = self._word(raw)
                if tok:
                    out.append(tok)
        return out
