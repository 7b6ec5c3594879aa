"""Which questions ask about one entity as a whole ("who is X", "tell me about X", "X?").

The phrasings are fixed in ``tests/data/entity_questions.json``. A question matches when,
after one of the openers below and without a trailing "please", what is left is a name; it is
an *entity question* only if that name is a known entity's whole key (checked by the caller),
so "who is X's manager", "when did X move", "X and Y" or "who was X in 2019" never reach a card
(their rest is not a key), and a possessive or a year in the name is refused here already.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["entity_question"]

_OPENERS = re.compile(
    r"^(?:"
    r"(?:who|what)\s*(?:'s|’s|\s+(?:is|was|are|were))"
    r"|(?:(?:can|could|would)\s+you\s+)?tell\s+(?:me|us)\s+about"
    r"|what\s+(?:do|does|did)\s+(?:you|we|it)\s+know\s+about"
    r"|describe"
    r"|(?:information|info)\s+(?:about|on)"
    r")\s+(?P<x>.+)$",
    re.IGNORECASE,
)
_PLEASE_HEAD = re.compile(r"^(?:please|pls|kindly)[\s,]+", re.IGNORECASE)
_PLEASE_TAIL = re.compile(r"[\s,]+(?:please|pls|thanks|thank you)$", re.IGNORECASE)
_POSSESSIVE = re.compile(r"['’]s\s+\S")  # "X's manager": something of X, not X
_YEAR = re.compile(r"\b(?:1[0-9]|20)\d{2}\b")
_MAX_WORDS = 8  # the longest name the extractor keeps
# a bare question that opens like these asks something about a name, not for the name
_ASKS = re.compile(
    r"^(?:who|whom|whose|what|which|when|where|why|how|is|are|was|were|do|does|did|can|could"
    r"|should|would|will|has|have|had|compare|not|no)\b",
    re.IGNORECASE,
)


def entity_question(text: str) -> str | None:
    """The name an entity question asks about, as written; None for any other question.

    Args:
        text: The question.

    Returns:
        The name ("Scott Derrickson" for "who's Scott Derrickson, please?"), for the caller to
        look up as a whole entity key; None when the question asks something else.
    """
    t = unicodedata.normalize("NFKC", text).strip()
    for _ in range(2):  # "Who is X, please?" and "Who is X? please"
        t = t.rstrip(" ?!.").strip()
        t = _PLEASE_TAIL.sub("", t)
    t = _PLEASE_HEAD.sub("", t).strip()
    m = _OPENERS.match(t)
    name = (m.group("x") if m else t).strip(" ,?!.")
    if _ASKS.match(name):
        return None
    if not name or len(name.split()) > _MAX_WORDS or len(name) > 120:
        return None
    if _POSSESSIVE.search(name) or _YEAR.search(name) or "?" in name:
        return None
    return name
