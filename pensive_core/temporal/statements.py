"""Statements: what a passage says about a *slot* (a subject's attribute), found by patterns.

A slot is what can change over time: the CEO of Acme, Northwind's Q3 2024 revenue, where
Caroline lives, the answer to a question. Two statements fill the same slot when their slot
keys match; the newer one supersedes the older (see :mod:`pensive_core.temporal.resolve`).

The default extractor is rule-based and deliberately narrow: a sentence becomes a statement
only when it has the shape of an attribute and a short value ("X's revenue was $4.2 million",
"The CEO of Acme is Jane Doe", "Jane Doe is the new CEO of Acme", "Caroline moved to Lisbon",
"Status: amber", "Who ...? Answer."). Prose that merely uses "is" yields nothing: a wrong slot
would demote a passage that is still true. Any object with the same ``extract`` method (an LLM
extractor, say) can replace it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Protocol, runtime_checkable

from ..tokenize import Tokenizer
from .dates import find_dates

__all__ = ["Statement", "StatementExtractor", "RuleStatementExtractor", "slot_key", "norm_value"]


@dataclass(frozen=True)
class Statement:
    """One statement a passage makes.

    Args:
        slot: The normalised slot key (sorted stemmed content words of subject and attribute).
        value: The normalised value; ``""`` when the statement ends the slot ("no longer").
        correction: An explicit correction or update ("Correction:", "Update:", "actually").
        change: Worded as a change ("new", "now", "moved to", "became", "no longer"): when
            neither statement has a time, a change still supersedes what was recorded earlier.
        valid_from: The time the sentence says it holds from ("as of March 2024", "since
            2019"); None when it says none (the document's timestamp is used then).
        text: The sentence.
    """

    slot: str
    value: str
    correction: bool = False
    change: bool = False
    valid_from: datetime | None = None
    text: str = ""


@runtime_checkable
class StatementExtractor(Protocol):
    """Anything that finds statements in a passage (rules by default; an LLM if given).

    Attributes:
        name: Identifies the extractor and its settings; saved with the store, whose
            statements are read again from the archive when it changes.
    """

    name: str

    def extract(self, text: str, reference: datetime | None = None) -> list[Statement]:
        """Statements in ``text``; ``reference`` resolves relative dates ("last week")."""
        ...


_WORDS = Tokenizer(stemmer="english", stopwords="en")
_REF = datetime(2000, 1, 1, tzinfo=timezone.utc)  # any day: only to find relative phrases
# words that qualify a slot without naming a different one
_SLOT_NOISE = frozenset({"s", "current", "new", "now", "curent", "latest", "present", "today"})


def slot_key(*parts: str) -> str:
    """The slot key of a subject/attribute phrase: its stemmed content words, sorted."""
    words = {w for p in parts for w in _WORDS.tokenize(p)} - _SLOT_NOISE
    return " ".join(sorted(words))


_VALUE_TRIM = re.compile(r"^(?:the|a|an)\s+|[\s.,;:!?\"'()]+$|^[\s\"'(]+", re.IGNORECASE)


def norm_value(value: str) -> str:
    """A value for comparison: case-folded, outer punctuation and a leading article removed."""
    v = value.strip().casefold()
    for _ in range(2):
        v = _VALUE_TRIM.sub("", v).strip()
    return re.sub(r"\s+", " ", v)


# -- cues ----------------------------------------------------------------------------------
_CORRECTION_LEAD = re.compile(
    r"^\s*(?:\[?(?:correction|corrected|update|updated|erratum|clarification|revision|"
    r"revised|edit)\]?\s*[:\-–—]\s*|(?:actually|in fact|to correct (?:an|the|our) "
    r"(?:earlier|previous) (?:report|statement|post)),?\s+)",
    re.IGNORECASE,
)
_CORRECTION_INLINE = re.compile(
    r"\b(?:actually|correction|corrected|revised|restated|not as (?:previously|earlier) "
    r"(?:reported|stated)|as previously reported)\b",
    re.IGNORECASE,
)
_CHANGE = re.compile(
    r"\b(?:new|now|no longer|moved|relocated|became|has become|was appointed|was named|"
    r"was elected|replaced|replacing|took over|succeeded|switched|changed|joined|left|"
    r"rose|fell|dropped|grew|increased|decreased|is up|is down)\b",
    re.IGNORECASE,
)
_AS_OF_LEAD = re.compile(
    r"^\s*(?:as of|as at|since|starting|starting from|effective|from|beginning|on|in)\s+"
    r"(?P<date>[^,]{3,40}?),\s*",
    re.IGNORECASE,
)
_AS_OF_TAIL = re.compile(
    r",?\s+(?:as of|as at|since|effective|starting)\s+(?P<date>[^,;]{3,40}?)\s*$", re.IGNORECASE
)
_NOT_TAIL = re.compile(
    r"(?:,|;|\s+-|\s+—|\s+\()\s*(?:not|rather than|instead of|and not|up from|down from|"
    r"from)\b.*$|\s+\((?:not|previously|was|formerly)\b[^)]*\)",
    re.IGNORECASE,
)
_FILLER_LEAD = re.compile(
    r"^\s*(?:so|well|ok|okay|anyway|also|and|but|btw|by the way|fyi|note|please note|"
    r"heads up|just so you know),?\s+",
    re.IGNORECASE,
)


# -- sentence shapes -----------------------------------------------------------------------
def _alternation(words: str) -> str:
    """A regex alternation, longest phrase first (so "was appointed" wins over "was")."""
    phrases = sorted((w.strip() for w in words.split("|")), key=len, reverse=True)
    return "(?:" + "|".join(p.replace(" ", r"\s+") for p in phrases if p) + ")"


_COPULA = _alternation(
    "is|was|are|were|has been|have been|had been|will be|remains|remained|became|has become|"
    "stands at|stood at|rose to|fell to|dropped to|grew to|increased to|decreased to|declined to|"
    "climbed to|reached|totalled|totaled|came to|came in at|amounted to|hit|is now|was now|"
    "is up to|is down to|costs|cost|now costs|is priced at|was priced at|sells for|sold for|"
    "retails for|is listed at|is valued at|was valued at"
)
_APPOINT = _alternation(
    "is|was|became|has become|has been|will be|remains|was named|was appointed|"
    "was elected|was made|has been named|has been appointed|has been elected|took over as|"
    "serves as|served as|is serving as|was promoted to|has been promoted to|is named|is appointed"
)
# a question and its answer: "who is the CEO of Acme? Jane Doe.", or a search-style question
# of three words or more ("record for most assists in a nba game? 30.")
_QA = re.compile(
    r"^(?P<q>(?:(?:who|what|when|where|which|how many|how much|how long|how old|whom)\b[^?]{3,200}|"
    r"[^?\s]+(?:\s+[^?\s]+){2,40}))\?\s+(?P<a>[^?]{1,120})$",
    re.IGNORECASE,
)
_QA_WH = re.compile(
    r"^(?:who|what|when|where|which|how many|how much|how long|how old|whom)\b", re.I
)
# "Jane Doe is the new CEO of Acme" -> slot "CEO of Acme", value "Jane Doe"
_ROLE_FIRST = re.compile(
    rf"^(?P<val>[A-Z][\w'’.\-]*(?:\s+[A-Z][\w'’.\-]*){{0,4}})\s+(?:is\s+)?(?:now\s+)?{_APPOINT}\s+"
    r"(?:now\s+|currently\s+)?(?:the\s+)?(?:new\s+|current\s+|acting\s+|interim\s+|"
    r"permanent\s+)?(?P<role>[\w\-]+(?:\s+[\w\-]+){0,3}?)\s+(?:of|at|for)\s+(?P<org>[^:;,]{2,60}?)"
    r"(?:,\s.*)?$"
)
# "The CEO of Acme is Jane Doe" -> the same slot
_ROLE_LAST = re.compile(
    r"^(?:the\s+)?(?:new\s+|current\s+|acting\s+|interim\s+)?"
    r"(?P<role>[\w\-]+(?:\s+[\w\-]+){0,3}?)\s+(?:of|at|for)\s+(?P<org>[^,:;]{2,60}?)\s+"
    rf"{_COPULA}\s+(?:now\s+|currently\s+|still\s+)?(?P<val>.{{1,60}})$",
    re.IGNORECASE,
)
_RELATIONS: tuple[tuple[str, re.Pattern[str], bool], ...] = (
    (
        "location",
        re.compile(
            r"^(?P<subj>.{1,40}?)\s+(?:has\s+|have\s+|had\s+|just\s+|recently\s+|finally\s+)*"
            r"(?P<verb>moved|relocated|moved back|moved house)\s+(?:back\s+)?to\s+(?P<val>.{2,50})$",
            re.IGNORECASE,
        ),
        True,
    ),
    (
        "location",
        re.compile(
            r"^(?P<subj>.{1,40}?)\s+(?:now\s+|currently\s+|still\s+)?(?P<verb>lives|live|lived|"
            r"is living|are living|is based|are based|resides|reside)\s+in\s+(?P<val>.{2,50})$",
            re.IGNORECASE,
        ),
        False,
    ),
    (
        "employer",
        re.compile(
            r"^(?P<subj>.{1,40}?)\s+(?:now\s+|currently\s+|still\s+|has\s+|have\s+|just\s+|"
            r"recently\s+)*(?:(?P<verb>works|work|worked|is working|are working|is employed|"
            r"was employed|started working|took a job|got a job|started a job)\s+(?:at|for|by)|"
            r"joined)\s+(?P<val>[A-Z].{1,49})$",
            re.IGNORECASE,
        ),
        False,
    ),
)
# "The Northwind offsite will be held in the Maple room", "... moved from A to B"
_PLACE = re.compile(
    r"^(?P<subj>[^,;:]{2,60}?)\s+(?:now\s+|currently\s+)?(?P<verb>will be held|is held|was held|"
    r"is being held|takes place|will take place|is taking place|is located|was located|"
    r"is hosted|will be hosted|has been moved|was moved|moved|has moved|relocated|"
    r"has relocated|was relocated|has been relocated)\s+(?:from\s+.{1,40}?\s+)?"
    r"(?:to|in|at|into)\s+(?P<val>.{2,50})$",
    re.IGNORECASE,
)
# "The Heron team has 9 engineers", "The warehouse holds 420 pallets"
_HAS_COUNT = re.compile(
    r"^(?P<subj>[^,;:]{2,60}?)\s+(?:now\s+|currently\s+|still\s+)?(?:has|have|had|holds|held|"
    r"employs|employed|lists|counts|reports|reported|records|recorded|tracks|numbers)\s+"
    r"(?:about\s+|around\s+|roughly\s+|nearly\s+|over\s+|almost\s+|exactly\s+|just\s+|only\s+)?"
    r"(?P<val>[$€£]?\d[\d,.]*\s*(?:%|percent|million|billion|thousand|bn|[km]\b)?)\s+"
    r"(?P<rest>[^\d].{0,60})$",
    re.IGNORECASE,
)
# "Northwind restated its Q3 2024 revenue to $4.8 million"
_SET_TO = re.compile(
    r"^(?P<subj>[^,;:]{2,60}?)\s+(?:has\s+|have\s+)?(?P<verb>restated|revised|raised|lowered|cut|"
    r"increased|reduced|decreased|changed|updated|adjusted|moved|pushed|set|corrected)\s+"
    r"(?:its|their|his|her|the)\s+(?P<attr>.{2,60}?)\s+(?:to|at)\s+(?P<val>.{1,40})$",
    re.IGNORECASE,
)
# "Ana Lima replaced Bo Chen as head of sales at Globex"
_REPLACED = re.compile(
    r"^(?P<val>[A-Z][\w'’.\-]*(?:\s+[A-Z][\w'’.\-]*){0,4})\s+(?:has\s+)?(?:replaced|succeeded|"
    r"took over from)\s+.{2,40}?\s+as\s+(?:the\s+)?(?:new\s+)?(?P<role>.{2,40}?)\s+"
    r"(?:of|at|for)\s+(?P<org>[^,;:]{2,60})$"
)
_NO_LONGER = re.compile(
    r"^(?P<subj>.{1,40}?)\s+(?:no longer|doesn't|does not|don't|do not)\s+"
    r"(?P<verb>works?|lives?|is based|is employed)\s+(?:at|for|in|by|with)\s+(?P<val>.{2,50})$",
    re.IGNORECASE,
)
_LEFT = re.compile(
    r"^(?P<subj>.{1,40}?)\s+(?:has\s+|have\s+|just\s+|recently\s+)*(?:left|quit|resigned from)"
    r"\s+(?P<val>.{2,50})$",
    re.IGNORECASE,
)
_GENERIC = re.compile(
    rf"^(?P<subj>[^,;:]{{3,80}}?)\s+{_COPULA}\s+(?:now\s+|currently\s+|still\s+)?(?P<val>.{{1,60}})$",
    re.IGNORECASE,
)
_COLON = re.compile(r"^(?P<subj>[A-Za-z][\w'’\- ]{1,60}?)\s*:\s+(?P<val>[^:]{1,60})$")
_SPEAKER = re.compile(r"^(?P<name>[A-Z][\w'’\-]*(?:\s+[A-Z][\w'’\-]*){0,2}):\s+(?P<rest>.+)$")
_ATTRIBUTE_WORDS = frozenset(
    """status state price cost revenue sales profit headcount count total owner lead version
    release phase stage level score rating rank balance budget deadline date due eta target
    address location city employer manager ceo cfo cto president chair director head title
    role team population capital value rate""".split()
)
_PRONOUN_SUBJ = frozenset(
    """it this that there these those which what who whom he she they we i you one here
    everything something nothing anything someone everyone nobody all both each either
    neither some many most few""".split()
)
_PERSONAL = frozenset({"i", "he", "she", "they", "we", "you", "my", "me"})
_SENTENCES = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][)\"'”’\]]))\s+(?=[\"'“(\[]?[A-Z0-9$])|\n+|;\s+")
# a line break ends a sentence after end punctuation or a short line (a record: "Status: red");
# hard-wrapped prose is joined back first
_WRAPPED = re.compile(r"(?<=[^\s.!?:;\"')\]])[ \t]*\n[ \t]*(?=[^\s\-*•#])")
_CLAUSE_LEAD = frozenset(
    """if when while because although though since as so but and or once unless until after
    before whether then how why where whereas yet nor""".split()
)
_HAS_UPPER = re.compile(r"(?:^|\s)\S*[A-Z]")
_HAS_DIGIT = re.compile(r"\d")


_TAIL_WORDS = re.compile(
    r"\s+(?:now|too|again|recently|already|at last|finally|for good|permanently|soon)\s*$",
    re.IGNORECASE,
)


def _clip(val: str) -> str:
    """The value alone: up to a comma or clause, without a date or adverb after it."""
    val = re.split(
        r"\s*(?:,\s|;|\()\s*|\s+(?:and|but|because|since|after|when|with|where|which|who)\s+", val
    )[0]
    for _ in range(3):
        found = find_dates(val, _REF)
        if found and found[-1].span[1] >= len(val.rstrip(" .!")) - 1 and found[-1].span[0] > 0:
            val = val[: found[-1].span[0]].rstrip()
            val = re.sub(r"\s+(?:in|on|at|since|from|by|during|of|as of)$", "", val, flags=re.I)
        val = _TAIL_WORDS.sub("", val)
    return val


def _named(phrase: str) -> bool:
    """A subject that names something: not a pronoun, with a capitalised word or a digit
    ("the Northwind offsite", "Project Falcon", "Q3 sales")."""
    words = phrase.split()
    if not words or len(words) > 10 or words[0].casefold() in _PRONOUN_SUBJ | _PERSONAL:
        return False
    return words[0][:1].isupper() and words[0].casefold() != "the" or _rest_has_name(phrase)


def _attribute(phrase: str) -> set[str]:
    return {re.sub(r"['’]s$", "", w.casefold()) for w in phrase.split()} & _ATTRIBUTE_WORDS


def _unwrap(text: str) -> str:
    lines = text.split("\n")
    if len(lines) < 3 or sum(len(x) for x in lines) / len(lines) < 50:
        return text  # short lines are records or turns, not wrapped prose
    return _WRAPPED.sub(" ", text)


def _split(text: str) -> list[str]:
    out: list[str] = []
    for s in _SENTENCES.split(_unwrap(text)):
        s = s.strip()
        if not s:
            continue
        if out and out[-1].endswith("?") and not s.endswith("?") and len(s.split()) <= 12:
            out[-1] += " " + s  # a question and its answer: one statement
        else:
            out.append(s)
    return out


def _rest_has_name(phrase: str) -> bool:
    """A capitalised word after the first word ("I" aside), or a digit: it names something."""
    words = phrase.split()
    return bool(_HAS_DIGIT.search(phrase)) or any(
        w[:1].isupper() and not re.match(r"I(?:'|’|$)", w) for w in words[1:]
    )


def _short_value(val: str) -> bool:
    words = val.split()
    if not words or len(words) > 8:
        return False
    if words[0].casefold() in {"a", "an", "that", "because", "why", "how", "what", "to", "not"}:
        return False  # "X is a Y" classifies; "X is that ..." explains: neither fills a slot
    if _HAS_DIGIT.search(val) or any(w[:1].isupper() for w in words):
        return True
    return len(words) <= 2


class RuleStatementExtractor:
    """Pattern-based statements (see the module docstring). Costs nothing to construct."""

    name = "rules"

    def extract(self, text: str, reference: datetime | None = None) -> list[Statement]:
        """Statements in ``text``, in order.

        Args:
            text: A passage.
            reference: The passage's time (its document's timestamp): "as of last week"
                resolves against it.

        Returns:
            The statements found; often none.
        """
        out: list[Statement] = []
        speaker: str | None = None
        last_subject: str | None = None
        for n, raw in enumerate(_split(text)):
            sentence = raw
            m = _SPEAKER.match(sentence)
            name = m.group("name").casefold() if m else ""
            if (
                m
                and name not in _ATTRIBUTE_WORDS
                and not _CORRECTION_LEAD.match(name + ":")
                and (len(m.group("rest").split()) > 4 or " " not in m.group("name"))
            ):  # "Caroline: I moved to Lisbon" -- a turn: "I" is the speaker
                speaker, sentence = m.group("name"), m.group("rest")
            st = self._sentence(sentence, reference, speaker, last_subject, n == 0)
            if st is None and ": " in sentence and not _CORRECTION_LEAD.match(sentence):
                # a headline before the clause: "Leadership change at Acme: Jane Doe is ..."
                rest = sentence.split(": ", 1)[1]
                st = self._sentence(rest, reference, speaker, last_subject, n == 0)
            if st is not None:
                out.append(st[0])
                last_subject = st[1] or last_subject
        return out

    def _sentence(
        self,
        sentence: str,
        reference: datetime | None,
        speaker: str | None,
        last_subject: str | None,
        first: bool = True,  # the sentence opens its passage
    ) -> tuple[Statement, str | None] | None:
        s = sentence.strip().rstrip(".!")
        if len(s) < 6 or len(s) > 300:
            return None
        correction = False
        m = _CORRECTION_LEAD.match(s)
        if m:
            correction, s = True, s[m.end() :]
        s = _FILLER_LEAD.sub("", s)
        valid_from = None
        m = _AS_OF_LEAD.match(s)
        if m:
            found = find_dates(m.group("date"), reference)
            if found:
                valid_from, s = found[0].start, s[m.end() :]
        m = _AS_OF_TAIL.search(s)
        if m:
            found = find_dates(m.group("date"), reference)
            if found:
                valid_from = valid_from or found[0].start
                s = s[: m.start()]
        correction = correction or bool(_CORRECTION_INLINE.search(s))
        s = re.sub(r"\bactually\s+|\bnow\s+(?=[a-z])", "", s, flags=re.IGNORECASE).strip()
        change = correction or bool(_CHANGE.search(sentence))
        if not s or (s.split()[0].casefold().strip(",") in _CLAUSE_LEAD and not _QA.match(s)):
            return None  # a clause ("If Microsoft was the Empire, ...") states no slot
        if s[:1].islower() and not _QA.match(s):
            s = s[0].upper() + s[1:]

        def made(slot: str, value: str, subject: str | None = None) -> tuple[Statement, str | None]:
            return Statement(slot, value, correction, change, valid_from, sentence), subject

        def who(subj: str) -> str | None:
            key = subj.strip().casefold()
            if key in {"i", "me"} or key == "we":
                return speaker
            if key in {"he", "she", "they"}:
                return last_subject
            words = subj.split()
            if key in _PRONOUN_SUBJ or not words or len(words) > 5:
                return None
            if not all(w[:1].isupper() or w in {"of", "de", "van", "von", "la"} for w in words):
                return None  # a subject is someone named, not a clause
            return subj.strip()

        m = _QA.match(s)
        if m and not first and not _QA_WH.match(s):
            m = None  # a search-style question only opens a passage: in prose it is rhetoric
        if (
            m
            and speaker is None
            and len(m.group("a").split()) <= 8
            and not ({w.casefold().strip(".,!'") for w in m.group("a").split()} & _PERSONAL)
        ):  # a question and its answer (in a chat, the next line is rarely the answer)
            return made("q " + slot_key(m.group("q")), norm_value(_NOT_TAIL.sub("", m.group("a"))))
        m = _NO_LONGER.match(s)
        if m and (subj := who(m.group("subj"))):
            attr = "employer" if m.group("verb").startswith(("work", "is employed")) else "location"
            st = Statement(slot_key(subj, attr), "", True, True, valid_from, sentence)
            return st, subj
        for attr, pattern, moved in _RELATIONS:
            m = pattern.match(s)
            if m and (subj := who(m.group("subj"))):
                val = _clip(_NOT_TAIL.sub("", m.group("val")))
                if not _short_value(val):
                    continue
                st = Statement(
                    slot_key(subj, attr), norm_value(val), correction, change or moved,
                    valid_from, sentence,
                )  # fmt: skip
                return st, subj
        m = _LEFT.match(s)
        if m and (subj := who(m.group("subj"))) and _rest_has_name(" x " + m.group("val")):
            return Statement(
                slot_key(subj, "employer"), "", correction, True, valid_from, sentence
            ), subj
        m = _REPLACED.match(s)
        if m and _rest_has_name("x " + m.group("org")):
            slot = slot_key(m.group("role"), "of", m.group("org"))
            return Statement("r " + slot, norm_value(m.group("val")), correction, True,
                             valid_from, sentence), None  # fmt: skip
        m = _SET_TO.match(s)
        if m and _named(m.group("subj")) and _short_value(_clip(m.group("val"))):
            fixed = m.group("verb").casefold() in {"restated", "revised", "corrected"}
            st = Statement(
                slot_key(m.group("subj"), m.group("attr")),
                norm_value(_clip(_NOT_TAIL.sub("", m.group("val")))),
                correction or fixed, True, valid_from, sentence,
            )  # fmt: skip
            return st, None
        m = _HAS_COUNT.match(s)
        if m and _named(m.group("subj")):
            rest = _clip(m.group("rest"))
            return made(slot_key(m.group("subj"), rest), norm_value(m.group("val")), None)
        m = _PLACE.match(s)
        if m and _named(m.group("subj")) and _short_value(_clip(m.group("val"))):
            val = norm_value(_clip(_NOT_TAIL.sub("", m.group("val"))))
            moved = "move" in m.group("verb").casefold() or "locat" in m.group("verb").casefold()
            subj = who(m.group("subj")) or m.group("subj")
            st = Statement(slot_key(subj, "location"), val, correction, change or moved,
                           valid_from, sentence)  # fmt: skip
            return st, who(m.group("subj"))
        m = _ROLE_FIRST.match(s)
        if (
            m
            and _short_value(m.group("org"))
            and _rest_has_name("x " + m.group("org"))
            and who(m.group("val")) == m.group("val").strip()
        ):
            slot = slot_key(m.group("role"), "of", m.group("org"))
            return made("r " + slot, norm_value(m.group("val")))
        m = _ROLE_LAST.match(s)
        if m and _short_value(m.group("val")) and _rest_has_name("x " + m.group("org")):
            val = _clip(_NOT_TAIL.sub("", m.group("val")))
            slot = slot_key(m.group("role"), "of", m.group("org"))
            return made("r " + slot, norm_value(val))
        m = _GENERIC.match(s)
        if m:
            subj, val = m.group("subj").strip(), _clip(_NOT_TAIL.sub("", m.group("val")).strip())
            lead = subj.split()[0].casefold()
            if (
                lead not in _PRONOUN_SUBJ
                and lead not in _PERSONAL
                and len(subj.split()) <= 10
                and _rest_has_name(subj)
                and _short_value(val)
                and not re.search(r"[?!]", subj)
                # a plain word ("amber", "great") fills a slot only of a named attribute
                and (_rest_has_name("x " + val) or bool(_attribute(subj)))
            ):
                return made(slot_key(subj), norm_value(val), None)
        m = _COLON.match(s)
        if m:
            subj, val = m.group("subj").strip(), m.group("val")
            words = {w.casefold() for w in subj.split()}
            if (
                (2 <= len(subj.split()) <= 4 or words & _ATTRIBUTE_WORDS)
                and _short_value(val)
                and not words & _PERSONAL
                and not {w.casefold() for w in val.split()} & _PERSONAL
            ):
                return made(slot_key(subj), norm_value(_NOT_TAIL.sub("", val)), None)
        return None
