"""Aggregation questions: "how many times did X happen?", "list every time Y was mentioned".

Top-k retrieval cannot answer these: the answer is *every* passage about the thing, and how
many there are. This module recognises such questions and works out what they are about;
the store then collects every passage linked to those entities in the graph.

What is counted: the passages that name *every* entity the question names (an entity is
named when a run of its words matches an entity of the graph, longest first), and that also
contain every other content word of the question ("How many times did Caroline mention her
*dog*?" counts Caroline's passages that say "dog", stemmed), leaving out the words that only
say the question is a count ("how many times", "mention", "list", "every", ...).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .extract import normalize_entity

__all__ = ["AggregateQuery", "is_aggregation", "parse_aggregation"]

_TRIGGERS = re.compile(
    r"\bhow\s+many\s+times\b"
    r"|\bhow\s+often\b"
    r"|\b(?:the\s+)?number\s+of\s+times\b"
    r"|\bhow\s+many\s+(?:mentions|messages|passages|documents|occasions|instances|occurrences)\b"
    r"|\b(?:list|show|find|give|count|name|what\s+are|which\s+are)\b[^?.!]*?"
    r"\b(?:every|all|each)\s+(?:the\s+)?(?:time|times|mention|mentions|occasion|occasions|"
    r"instance|instances|occurrence|occurrences|passage|passages)\b"
    r"|\bevery\s+(?:time|mention|occasion|instance|occurrence)\b"
    r"|\bcount\s+(?:the\s+)?(?:times|mentions|occurrences)\b",
    re.IGNORECASE,
)
# words that say the question is a count or a listing, not what is counted
_COUNT_WORDS = frozenset(
    "how many much often times time number count list show find give every all each "
    "mention mentions mentioned mentioning occasion occasions instance instances "
    "occurrence occurrences passage passages document documents message messages "
    "happen happened happens say said says talk talked talks speak spoke discuss discussed "
    "refer referred appear appeared come came up bring brought total did does do done "
    "ever get got go went me us tell".split()
)


@dataclass(frozen=True)
class AggregateQuery:
    """What an aggregation question asks to collect.

    Attributes:
        entities: Entity keys every counted passage must name (longest matches first).
        terms: Other content words (as the caller's tokenizer gives them) every counted
            passage must contain.
    """

    entities: tuple[str, ...]
    terms: tuple[str, ...]


# every trigger holds one of these words: a cheap test before the regular expression
_CUES = ("how", "number", "every", "all", "each", "count")


def is_aggregation(text: str) -> bool:
    """Whether ``text`` asks for a count or a list of every occurrence."""
    low = text.casefold()
    return any(c in low for c in _CUES) and _TRIGGERS.search(text) is not None


def parse_aggregation(
    text: str,
    known: Callable[[str], bool],
    tokenize: Callable[[str], list[str]],
    stopwords: frozenset[str] | Mapping[str, object] = frozenset(),
    max_words: int = 6,
) -> AggregateQuery | None:
    """The entities and terms an aggregation question is about, or None if it is not one
    or names nothing the graph knows.

    Args:
        text: The question.
        known: Whether an entity key is in the graph.
        tokenize: The store's word tokenizer (stemmed, stopwords removed) for the terms.
        stopwords: One-word entity names that are not taken as entities ("it", "may").
        max_words: Longest entity name tried, in words.
    """
    if not is_aggregation(text):
        return None
    words = [re.sub(r"'s$", "", w.strip('.,;:!?"()')) for w in normalize_entity(text).split()]
    taken = [False] * len(words)
    entities: list[str] = []
    for n in range(min(max_words, len(words)), 0, -1):  # longest names first
        for i in range(len(words) - n + 1):
            if any(taken[i : i + n]):
                continue
            gram = " ".join(words[i : i + n])
            if n == 1 and (gram in stopwords or gram in _COUNT_WORDS or len(gram) < 2):
                continue
            if gram and known(gram):
                entities.append(gram)
                taken[i : i + n] = [True] * n
    if not entities:
        return None
    rest = " ".join(w for w, t in zip(words, taken) if not t and w not in _COUNT_WORDS)
    terms = tuple(dict.fromkeys(tokenize(rest)))
    return AggregateQuery(tuple(entities), terms)
