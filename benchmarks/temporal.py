"""Temporal retrieval: hybrid search with temporal resolution off ("hybrid") and on
("hybrid + temporal", the default), six parts in one process.

Each part builds one store with the default configuration (temporal on) and asks every
question under each system by reopening it with ``{"temporal": {"enabled": False}}`` or
without; the L1 cache is off so every question is retrieved, and the graph settings are
given in full (a store keeps the config it was built with). Per-query latency p50/p95 is
recorded per system and part.

* **TimeQA** (human-annotated train file: 320 Wikipedia documents, 1,171 time-scoped
  questions). Every paragraph of every document is one document of a single pooled corpus
  (id ``"{doc_no}:{para_no}"``, no timestamps: encyclopedia text). *Gold-paragraph recall@k*:
  a question counts when any paragraph its answers come from is among the top k documents.
  Questions of even-numbered documents are *tune*, odd *heldout*. *Abstention*: the file's
  unanswerable questions (an answer with an empty string, paragraph 0) and year-shifted
  variants of the answerable ones (every year of the time expression moved 300 years back,
  before anything the document talks about) should abstain -- ``time_scope`` set with a start
  or end and ``supported == 0``; the answerable ones should not.
* **SituatedQA** (temporal, dev). Each question's answer timeline (previous answer -> current
  answer, each with a start date) becomes two dated statements worded alike
  (``"{question}? {answer}."``, timestamp = start), all pooled. For each dated question the
  *valid* statement is the latest one started by that date (the date read as the end of the
  year, or of the day when one is given); the other is its rival. Accuracy = valid ranked above
  rival in the top 20 (a missing one ranks last; both missing is wrong), in three modes:
  *latest-wins* (the undated question, once per timeline: current above previous),
  *as-of in words* (``"... as of 2015"`` as written) and *as-of explicit* (the question without
  "as of ...", ``as_of=`` the end of that year/day). Recall@1 of the valid statement too.
* **LoCoMo temporal** (category 2 of the 5 development conversations): one document per turn,
  timestamped with its session's date; each question filtered to its conversation. Evidence
  recall@k (mean fraction of evidence turns in the top k) and all-evidence@k.
* **Needles**: a ~200k-token haystack (Paul Graham essays, then War and Peace) cut into
  ~2,000-character documents timestamped evenly from 2021-01-01 to 2024-12-31 in haystack
  order; generated needle sentences are spliced into documents at depths 0-100%. Categories:
  critical events, identifiers, gradual drift (5-8 values over time; the latest is right) and
  corrections (an original, later corrected). A question is answered at rank k when a hit at
  rank <= k names the subject and contains the current value (whole words); *stale@1* counts
  top hits that name the subject and hold only an out-of-date value.
* **Needles, held-out phrasings**: drift and corrections only, worded in ways written after the
  statement patterns had been extended from the development templates and before anything
  ran on them (another seed), so the figures are not only on the wording the patterns fit.
* **SciFact**: nDCG@10 on the 809 judged claims, as the single-hop control (temporal
  resolution must not cost ordinary retrieval); ``--scifact-store`` copies a store built by
  ``benchmarks.scifact`` instead of embedding the corpus again.

Beside the two systems, variants show what each setting is worth: ``interval_gain`` on TimeQA
(chosen on its tune half), ``slot_gain``, surfacing and ``demote`` on the needles.

    python -m benchmarks.temporal --store /tmp/temporal-bench --scifact-store DIR
    python -m benchmarks.temporal --parts needles --haystack-tokens 60000   # a quick slice
"""

from __future__ import annotations

import json
import random
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import base_parser, environment, retrieved, source_state, write_results
from benchmarks.multihop import dia_ids
from pensive_core import Document, Pensive, PensiveConfig

UTC = timezone.utc
PARTS = ("timeqa", "situatedqa", "locomo", "needles", "needles_heldout", "scifact")
# every graph and temporal setting given: a store keeps the config it was built with, and
# the numbers must be today's defaults
BASE: dict[str, Any] = {
    "router": {"l1": False},
    "graph": PensiveConfig().graph.model_dump(),
    "temporal": PensiveConfig().temporal.model_dump(),
}
#: The systems compared: query-time overrides of one store built with the defaults.
SYSTEMS: dict[str, dict[str, Any]] = {
    "hybrid": {"temporal": {"enabled": False}},
    "hybrid + temporal": {},
}
#: What each setting is worth, beside the default (run on the parts whose tuning they are).
TIMEQA_VARIANTS: dict[str, dict[str, Any]] = {
    "temporal, interval_gain 0.5": {"temporal": {"interval_gain": 0.5}},
    "temporal, interval_gain 1.0": {"temporal": {"interval_gain": 1.0}},
}
NEEDLE_VARIANTS: dict[str, dict[str, Any]] = {
    "temporal, slot_gain 0": {"temporal": {"slot_gain": 0.0}},
    "temporal, no surfacing": {"temporal": {"surface": False}},
    "temporal, demote 0.25": {"temporal": {"demote": 0.25}},
}
YEAR_SHIFT = -300
SQA_K = 20


def merged(over: dict[str, Any]) -> dict[str, Any]:
    """``BASE`` with ``over`` applied one section deep."""
    cfg = {k: dict(v) for k, v in BASE.items()}
    for section, values in over.items():
        cfg[section] = {**cfg.get(section, {}), **values}
    return cfg


# -- metrics (pure) -----------------------------------------------------------------------------
def ranked_docs(doc_ids: Iterable[str]) -> list[str]:
    """Document ids in first-seen order (a document's best passage stands for it)."""
    return list(dict.fromkeys(doc_ids))


def hit_at(ranked: Sequence[str], gold: set[str], k: int) -> bool:
    """True when any gold id is among the first ``k``."""
    return any(d in gold for d in ranked[:k])


def evidence_recall(ranked: Sequence[str], gold: set[str], k: int) -> float:
    """The fraction of gold ids among the first ``k`` (0 for an empty gold set)."""
    return len(gold & set(ranked[:k])) / len(gold) if gold else 0.0


def ranked_above(ranked: Sequence[str], a: str, b: str) -> bool:
    """True when ``a`` ranks above ``b``; a missing id ranks last, and both missing is False."""
    ra = ranked.index(a) if a in ranked else None
    rb = ranked.index(b) if b in ranked else None
    if ra is None:
        return False
    return rb is None or ra < rb


def abstains(scope: Any) -> bool:
    """Whether a result's ``time_scope`` tells the application to abstain: a time with a start
    or an end was asked about and no returned hit fits it (``TimeScope`` docstring)."""
    if scope is None:
        return False
    bounded = scope.start is not None or scope.end is not None
    return bool(bounded and scope.supported == 0)


def percentiles(ms: Sequence[float]) -> dict[str, float]:
    """p50 and p95 of latencies in milliseconds (empty -> {})."""
    if not ms:
        return {}
    return {
        "query_ms_p50": round(float(np.percentile(ms, 50)), 2),
        "query_ms_p95": round(float(np.percentile(ms, 95)), 2),
    }


def summarize(rows: Sequence[dict[str, Any]], splits: Sequence[str] = ("all",)) -> dict[str, Any]:
    """Mean of every numeric/bool field of ``rows`` per split (a row's ``split`` names its own;
    ``"all"`` takes every row), with ``n``. Splits without rows are left out."""
    out: dict[str, Any] = {}
    for split in splits:
        part = [r for r in rows if split == "all" or r.get("split") == split]
        if not part:
            continue
        keys = [k for k, v in part[0].items() if k != "split" and isinstance(v, (bool, int, float))]
        out[split] = {k: round(sum(float(r[k]) for r in part) / len(part), 4) for k in keys}
        out[split]["n"] = len(part)
    return out


# -- TimeQA -------------------------------------------------------------------------------------
_MONTHS = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_NUMBER = re.compile(r"(?:(?<=\d-)|(?<=\d–)|(?<![\w\-–.$]))(\d{3,4})(?=s\b|[^\w]|$)")
# what may stand right before a year: a time word, a month with an optional day, a range dash
_YEAR_BEFORE = re.compile(
    r"(?:\b(?:in|from|to|until|till|through|since|between|and|by|before|after|during|of|"
    r"around|circa|early|late|mid|year|years|period|the)\s+(?:" + _MONTHS + r"\.?\s+)?"
    r"(?:\d{1,2}(?:st|nd|rd|th)?,?\s+)?(?:" + _MONTHS + r"\.?,?\s+)?"
    r"|\b" + _MONTHS + r"\.?\s+(?:\d{1,2},?\s+)?|\d[-–]|\(|^)$",
    re.IGNORECASE,
)
# ... or right after it: the start of a range ("1346 to 1347", "1975 and 1982")
_YEAR_AFTER = re.compile(
    r"^(?:s|'s)?\s*(?:[-–]|to|and|until|till|through)\s*(?:" + _MONTHS + r"\.?\s+)?\d{3,4}\b",
    re.IGNORECASE,
)


def shift_years(text: str, delta: int = YEAR_SHIFT) -> str | None:
    """Move every year of the text's time expressions by ``delta`` years.

    A year is a 3-4 digit number from 400 to 2099 standing after a time word ("in", "from",
    "to", ...), a month (with an optional day) or a range dash ("1811-1827"), or starting a
    range ("1346 to 1347"); other numbers ("U-567", "ordered 162") are left alone.

    Returns:
        The shifted text, or None when it holds no such year (no unanswerable variant).
    """
    shifted = 0

    def sub(m: re.Match[str]) -> str:
        nonlocal shifted
        year = int(m.group(1))
        before = text[max(0, m.start() - 40) : m.start()]
        after = text[m.end() : m.end() + 30]
        if not 400 <= year <= 2099:
            return m.group(0)
        if not (_YEAR_BEFORE.search(before) or _YEAR_AFTER.match(after)):
            return m.group(0)
        shifted += 1
        return str(year + delta)

    out = _NUMBER.sub(sub, text)
    return out if shifted else None


def load_timeqa(
    data: Path, limit: int | None = None
) -> tuple[list[Document], list[dict[str, Any]]]:
    """Every paragraph (after the title) as a document, and every question with its gold
    paragraphs (empty for an unanswerable one), its split and whether it is answerable."""
    path = data / "timeqa" / "human_annotated_train.json"
    if not path.is_file():
        raise SystemExit(f"error: TimeQA not found at {path}; pass --data DIR")
    raw = json.loads(path.read_text())[:limit]
    docs: list[Document] = []
    questions: list[dict[str, Any]] = []
    for doc_no, item in enumerate(raw):
        title = item["paras"][0]
        for para_no, para in enumerate(item["paras"][1:], start=1):
            if para.strip():
                docs.append(
                    Document(id=f"{doc_no}:{para_no}", text=para, metadata={"title": title})
                )
        for text, answers in item["questions"]:
            gold = {f"{doc_no}:{a['para']}" for a in answers if a["answer"].strip()}
            questions.append(
                {
                    "text": text,
                    "gold": gold,
                    "answerable": bool(gold),
                    "split": "tune" if doc_no % 2 == 0 else "heldout",
                }
            )
    return docs, questions


def eval_timeqa(p: Pensive, questions: list[dict[str, Any]]) -> dict[str, Any]:
    """Recall@1/@5 on answerable questions; abstention on unanswerable and shifted ones."""
    recall, wrong, native, shifted, ms = [], [], [], [], []
    for q in questions:
        res, took = timed_query(p, q["text"], 10)
        ms.append(took)
        if q["answerable"]:
            ranked = ranked_docs(h.doc_id for h in retrieved(res))
            recall.append(
                {
                    "split": q["split"],
                    "recall@1": hit_at(ranked, q["gold"], 1),
                    "recall@5": hit_at(ranked, q["gold"], 5),
                }
            )
            wrong.append({"split": q["split"], "abstained": abstains(res.time_scope)})
            variant = shift_years(q["text"])
            if variant is not None:
                res, took = timed_query(p, variant, 10)
                ms.append(took)
                shifted.append({"split": q["split"], "abstained": abstains(res.time_scope)})
        else:
            native.append({"split": q["split"], "abstained": abstains(res.time_scope)})
    splits = ("all", "tune", "heldout")
    return {
        "recall": summarize(recall, splits),
        "abstention": {
            "unanswerable (file)": summarize(native, splits),
            "unanswerable (years -300)": summarize(shifted, splits),
            "answerable (wrongly abstained)": summarize(wrong, splits),
        },
        **percentiles(ms),
    }


# -- SituatedQA ---------------------------------------------------------------------------------
def start_date(start: dict[str, Any] | None) -> datetime | None:
    """A timeline start ``{year, month, date}`` (nulls allowed) as a UTC datetime; a missing
    month or day is 1, an impossible one falls back to 1."""
    if not start or start.get("year") is None:
        return None
    year, month, day = int(start["year"]), start.get("month") or 1, start.get("date") or 1
    for m, d in ((month, day), (month, 1), (1, 1)):
        try:
            return datetime(year, int(m), int(d), tzinfo=UTC)
        except (TypeError, ValueError):
            continue
    return None


def period_end(text: str) -> datetime | None:
    """The last second of a SituatedQA date: ``"2015"`` -> 2015-12-31 23:59:59, ``"March 5,
    2015"`` -> 2015-03-05 23:59:59; None when unreadable."""
    text = text.strip()
    if re.fullmatch(r"\d{4}", text):
        return datetime(int(text), 12, 31, 23, 59, 59, tzinfo=UTC)
    for fmt in ("%B %d, %Y", "%b %d, %Y", "%d %B %Y", "%B %Y"):
        try:
            day = datetime.strptime(text, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
        return day + timedelta(days=1, seconds=-1)
    return None


def strip_as_of(edited: str) -> tuple[str, str] | None:
    """``"who won ... as of 2015"`` -> ``("who won ...", "2015")``; None without "as of"."""
    m = re.fullmatch(r"(.*\S)\s+as of\s+(.+?)\s*\??", edited.strip(), re.IGNORECASE)
    return (m.group(1), m.group(2)) if m else None


def valid_statement(starts: dict[str, datetime], at: datetime) -> tuple[str, str] | None:
    """Of a timeline's two statements (id -> start), the one valid at ``at`` (the latest that
    started by then) and its rival; None when neither had started."""
    began = [(s, i) for i, s in starts.items() if s <= at]
    if not began or len(starts) != 2:
        return None
    valid = max(began)[1]
    (other,) = [i for i in starts if i != valid]
    return valid, other


def statement(question: str, answer: str) -> str:
    """The plain declarative form every statement takes (only the answer differs)."""
    return f"{question.strip().rstrip('?').strip()}? {answer.strip()}."


def load_situatedqa(
    data: Path, split: str = "dev", limit: int | None = None
) -> tuple[list[Document], list[dict[str, Any]], list[dict[str, Any]], dict[str, int]]:
    """Dated statements from each question's first complete timeline, the undated questions
    (one per timeline) and the dated ones (each with its valid statement and rival)."""
    folder = data / "situatedqa"
    if not (folder / f"raw_temp.{split}.jsonl").is_file():
        raise SystemExit(f"error: SituatedQA not found under {folder}; pass --data DIR")
    raw = [json.loads(line) for line in (folder / f"raw_temp.{split}.jsonl").open()]
    stats = {"questions_with_timelines": 0, "more_than_one_distinct_timeline": 0}
    stats |= {"timelines_used": 0, "skipped_same_answer": 0, "skipped_start_order": 0}
    docs: list[Document] = []
    timelines: dict[str, dict[str, Any]] = {}
    for row in raw:
        tls = row.get("timelines") or []
        if not tls:
            continue
        stats["questions_with_timelines"] += 1
        distinct = {
            (t.get("prev_answers_full"), json.dumps(t.get("prev_start"), sort_keys=True),
             t.get("cur_answers_full"), json.dumps(t.get("cur_start"), sort_keys=True))
            for t in tls
        }  # fmt: skip
        stats["more_than_one_distinct_timeline"] += len(distinct) > 1
        qid = str(row["id"])
        for t in tls:  # the first annotator's complete timeline
            cur, prev = t.get("cur_answers_full"), t.get("prev_answers_full")
            cs, ps = start_date(t.get("cur_start")), start_date(t.get("prev_start"))
            if not (cur and prev and cs and ps):
                continue
            if cur.strip() == prev.strip():
                stats["skipped_same_answer"] += 1
                break
            if ps >= cs:
                stats["skipped_start_order"] += 1
                break
            for period, answer, start in (("prev", prev, ps), ("cur", cur, cs)):
                docs.append(
                    Document(
                        id=f"{qid}:{period}",
                        text=statement(row["question"], answer),
                        metadata={"question": qid, "period": period},
                        timestamp=start,
                    )
                )
            starts = {f"{qid}:prev": ps, f"{qid}:cur": cs}
            timelines[qid] = {"text": row["question"], "starts": starts}
            stats["timelines_used"] += 1
            break
    undated = [
        {"text": t["text"], "valid": f"{q}:cur", "other": f"{q}:prev"} for q, t in timelines.items()
    ]
    dated: list[dict[str, Any]] = []
    stats |= {"dated_rows": 0, "no_valid_statement_yet": 0, "unreadable_date": 0}
    stats["valid_matches_annotated_answer"] = 0
    answers = {d.id: d.text for d in docs}
    for line in (folder / f"qa_temp.{split}.jsonl").open():
        row = json.loads(line)
        tl = timelines.get(str(row["id"]))
        parts = strip_as_of(row["edited_question"])
        if tl is None or parts is None:
            continue
        stats["dated_rows"] += 1
        at = period_end(row["date"])
        if at is None:
            stats["unreadable_date"] += 1
            continue
        pair = valid_statement(tl["starts"], at)
        if pair is None:
            stats["no_valid_statement_yet"] += 1
            continue
        gold = [a.lower() for a in row.get("answer") or []]
        stats["valid_matches_annotated_answer"] += any(a in answers[pair[0]].lower() for a in gold)
        dated.append(
            {
                "edited": row["edited_question"],
                "text": parts[0],
                "as_of": at,
                "valid": pair[0],
                "other": pair[1],
                "valid_is": pair[0].rsplit(":", 1)[1],
            }
        )
    if limit is not None:
        dated, undated = dated[:limit], undated[:limit]
    stats["dated_used"] = len(dated)
    return docs, undated, dated, stats


def eval_situatedqa(
    p: Pensive, undated: list[dict[str, Any]], dated: list[dict[str, Any]]
) -> dict[str, Any]:
    """Valid-above-rival accuracy and recall@1 in the three modes."""
    ms: list[float] = []

    def row(text: str, valid: str, other: str, as_of: datetime | None = None) -> dict[str, Any]:
        res, took = timed_query(p, text, SQA_K, as_of=as_of)
        ms.append(took)
        ranked = ranked_docs(h.doc_id for h in retrieved(res))
        return {"valid_above_rival": ranked_above(ranked, valid, other),
                "recall@1": hit_at(ranked, {valid}, 1)}  # fmt: skip

    latest = [row(q["text"], q["valid"], q["other"]) for q in undated]
    words, explicit = [], []
    for q in dated:
        words.append({"split": q["valid_is"], **row(q["edited"], q["valid"], q["other"])})
        explicit.append(
            {"split": q["valid_is"], **row(q["text"], q["valid"], q["other"], q["as_of"])}
        )
    by = ("all", "cur", "prev")  # "prev": the question's date falls before the latest answer
    return {
        "latest-wins": summarize(latest)["all"] if latest else {},
        "as-of in words": summarize(words, by),
        "as-of explicit": summarize(explicit, by),
        **percentiles(ms),
    }


# -- LoCoMo -------------------------------------------------------------------------------------
def session_time(text: str) -> datetime:
    """A LoCoMo session header ("1:56 pm on 8 May, 2023") as a UTC datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def load_locomo_dated(
    data: Path, categories: tuple[int, ...] = (2,)
) -> tuple[list[Document], list[dict[str, Any]]]:
    """Every turn as a document timestamped with its session's date, and the questions of
    ``categories`` (by default the temporal ones, 2) with their evidence turns."""
    path = data / "locomo" / "locomo_dev.json"
    if not path.is_file():
        raise SystemExit(f"error: LoCoMo not found at {path}; pass --data DIR")
    docs: list[Document] = []
    questions: list[dict[str, Any]] = []
    for sample in json.loads(path.read_text()):
        conv, talk = sample["sample_id"], sample["conversation"]
        for key, turns in talk.items():
            if not re.fullmatch(r"session_\d+", key):
                continue
            when = session_time(talk[f"{key}_date_time"])
            for turn in turns:
                docs.append(
                    Document(
                        id=f"{conv}:{turn['dia_id']}",
                        text=f"{turn['speaker']}: {turn['text']}",
                        metadata={"conv": conv, "session": int(key.split("_")[1])},
                        timestamp=when,
                    )
                )
        for qa in sample["qa"]:
            gold = dia_ids(qa.get("evidence", []))
            if qa.get("category") in categories and gold:
                questions.append(
                    {
                        "text": qa["question"],
                        "gold": {f"{conv}:{d}" for d in gold},
                        "filters": {"conv": conv},
                        "category": qa["category"],
                    }
                )
    return docs, questions


def eval_locomo(
    p: Pensive, questions: list[dict[str, Any]], by: str | None = None
) -> dict[str, Any]:
    """Evidence recall and all-evidence at 5 and 10; with ``by`` (a question field), also
    per value of that field under ``"by"``, from the same queries."""
    rows, ms = [], []
    for q in questions:
        res, took = timed_query(p, q["text"], 10, filters=q["filters"])
        ms.append(took)
        ranked = ranked_docs(h.doc_id for h in retrieved(res))
        row: dict[str, Any] = {f"{m}@{k}": (evidence_recall(ranked, q["gold"], k) if m == "recall"
                                            else q["gold"] <= set(ranked[:k]))
                               for k in (5, 10) for m in ("recall", "all")}  # fmt: skip
        if by is not None:
            row["split"] = str(q[by])
        rows.append(row)
    out = {**summarize(rows)["all"], **percentiles(ms)}
    if by is not None:
        out["by"] = summarize(rows, sorted({r["split"] for r in rows}))
    return out


# -- needles ------------------------------------------------------------------------------------
DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)
CATEGORIES = ("critical events", "identifiers", "gradual drift", "corrections")
HAYSTACK_START = datetime(2021, 1, 1, tzinfo=UTC)
HAYSTACK_END = datetime(2024, 12, 31, tzinfo=UTC)
CHARS_PER_TOKEN = 4  # the haystack's size is estimated, not tokenized
_MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August",
                "September", "October", "November", "December")  # fmt: skip

# (needle, question) templates; {s} the subject, {v} the value
_EVENTS = (
    ("The {s} reopening was moved to {v}.", "When does the {s} reopen?"),
    ("Maintenance on the {s} now ends on {v}.", "When will the work on the {s} be finished?"),
    ("The {s} will close for good on {v}.", "On which day does the {s} shut down permanently?"),
    ("The safety inspection of the {s} is booked for {v}.", "When is the {s} being inspected?"),
)
_EVENT_SUBJECTS = (
    "Harbor Line", "Northgate Bridge", "Cedar Street depot", "Riverside Library",
    "Eastfield pool", "Old Mill tunnel", "Granite Park tramway", "Saltmarsh ferry pier",
    "Beacon Hill clinic", "Willow Creek footbridge", "Quarry Road overpass",
    "Lantern Square market", "Ashford rail yard", "Pinecrest observatory",
)  # fmt: skip
_IDS = (
    ("The {s} account's invoice number is {v}.", "What is the invoice number of the {s} account?",
     "INV-#####"),
    ("The shipment for {s} travels under tracking code {v}.",
     "Which tracking code does the {s} shipment use?", "TRK-####-@@"),
    ("{s}'s support contract is filed as {v}.",
     "Under what reference is the support contract of {s} filed?", "SC-@####"),
    ("The {s} server rack carries asset tag {v}.", "What asset tag is on the {s} server rack?",
     "AT-######"),
)  # fmt: skip
_ID_SUBJECTS = (
    "Meridian", "Bluestone", "Halcyon", "Orchardly", "Tidewater", "Copperfield", "Silverline",
    "Redwater", "Lakeshore", "Summitry", "Ironbridge", "Foxglove", "Brightwater", "Stonegate",
)  # fmt: skip
_DRIFT = (  # ..., (first value range), (step range), direction
    ("Project {s}'s open bug count is {v}.", "How many open bugs does Project {s} have?",
     (250, 480), (3, 30), -1),
    ("The {s} rollout status is {v}.", "What is the status of the {s} rollout?", None, None, 0),
    ("The {s} team has {v} engineers.", "How many engineers work on the {s} team?",
     (4, 12), (1, 6), 1),
    ("The {s} service has {v} percent of its error budget left.",
     "How much error budget does the {s} service have remaining?", (70, 95), (2, 8), -1),
)  # fmt: skip
_DRIFT_SUBJECTS = (
    "Falcon", "Kestrel", "Osprey", "Heron", "Condor", "Merlin", "Puffin", "Plover", "Egret",
    "Lapwing", "Curlew", "Sparrowhawk", "Petrel", "Shearwater",
)  # fmt: skip
_STATUSES = ("red", "amber", "green", "paused", "blocked", "on hold", "at risk", "on track")
_CORRECTED_COMPANIES = (
    "Northwind", "Contoso", "Fabrikam", "Tailspin", "Wingtip", "Litware", "Proseware",
    "Adatum", "Woodgrove", "Lucerne", "Coho Vineyard", "Alpine Ski House",
)  # fmt: skip
_PEOPLE = (
    ("Maria Okafor", "she"), ("Daniel Brandt", "he"), ("Priya Raman", "she"),
    ("Tomasz Nowak", "he"), ("Elena Sokolova", "she"), ("Kwame Mensah", "he"),
    ("Hannah Lindqvist", "she"), ("Rafael Ortega", "he"), ("Aiko Tanaka", "she"),
    ("Samuel Achebe", "he"), ("Ingrid Halvorsen", "she"), ("Luca Moretti", "he"),
)  # fmt: skip
_ORGS = (
    "Acme Robotics", "Globex", "Initech", "Umbrella Labs", "Hooli", "Vandelay Industries",
    "Stark Freight", "Wayne Logistics", "Cyberdyne", "Soylent Foods", "Wonka Works",
    "Tyrell Systems", "Oscorp Energy", "Massive Dynamic",
)  # fmt: skip
_ROOMS = ("Birch", "Maple", "Aspen", "Juniper", "Sequoia", "Hawthorn", "Linden", "Rowan")


@dataclass(frozen=True)
class NeedleCase:
    """One question of the needle suite and the needle sentences it depends on.

    Args:
        category: One of :data:`CATEGORIES`.
        subject: The invented subject every needle and the question name.
        question: The question (never containing ``answer``).
        answer: The value correct now.
        stale: Values that were once stated and are no longer right.
        needles: The needle sentences, oldest first.
        depths: Target depth (0..1 of the haystack) of each needle, non-decreasing.
        depth: The depth the case is reported under: that of the needle holding the answer.
    """

    category: str
    subject: str
    question: str
    answer: str
    stale: tuple[str, ...] = ()
    needles: tuple[str, ...] = ()
    depths: tuple[float, ...] = ()
    depth: float = 0.0
    hosts: tuple[int, ...] = field(default=())


def _code(rng: random.Random, pattern: str) -> str:
    """``#`` a digit, ``@`` a capital letter."""
    return "".join(
        str(rng.randint(0, 9)) if c == "#" else chr(rng.randint(65, 90)) if c == "@" else c
        for c in pattern
    )


def _series(
    rng: random.Random,
    n: int,
    first: tuple[int, int] | None,
    step: tuple[int, int] | None,
    direction: int,
) -> list[str]:
    """``n`` distinct values drifting in ``direction`` (0: statuses, each used once)."""
    if first is None or step is None or direction == 0:
        return rng.sample(_STATUSES, n)
    out = [rng.randint(*first)]
    for _ in range(n - 1):
        out.append(out[-1] + direction * rng.randint(*step))
    return [str(v) for v in out]


def _spread(final: float, n: int, span: float) -> tuple[float, ...]:
    """``n`` non-decreasing depths ending at ``final``, ``span`` before it at most (clipped)."""
    if n == 1:
        return (final,)
    return tuple(max(0.0, final - span * (n - 1 - j) / (n - 1)) for j in range(n))


# Held-out phrasings: written after the development templates above had been used to extend the
# statement patterns, and before anything was run on these; only drift and corrections (the
# categories the resolver acts on). (needle, question, first value range, step range, direction)
_HELDOUT_DRIFT = (
    ("Headcount at {s} Labs stands at {v}.", "How many people work at {s} Labs?",
     (40, 90), (2, 9), 1),
    ("The {s} warehouse currently holds {v} pallets.",
     "How many pallets are stored in the {s} warehouse?", (300, 600), (10, 40), -1),
    ("Status of the {s} migration: {v}.", "Where does the {s} migration stand?", None, None, 0),
    ("{s} ticket backlog: {v} open tickets.", "How large is the {s} ticket backlog?",
     (100, 300), (5, 25), -1),
)  # fmt: skip
_CITIES = ("Lisbon", "Porto", "Ghent", "Utrecht", "Bergen", "Tallinn", "Krakow", "Lyon", "Graz")


def _heldout_corrections(
    rng: random.Random, n: int, companies: list[str], people: list[tuple[str, str]]
) -> list[tuple[str, str, str, str, str, str]]:
    """(subject, question, first needle, correcting needle, stale value, current value)."""
    out = []
    for i in range(n):
        s, style = companies[i], i % 5
        if style == 0:
            old, new = (f"{rng.randint(1, 28)} {rng.choice(_MONTH_NAMES)} 2026" for _ in "ab")
            out.append(
                (
                    s,
                    f"When does {s} launch?",
                    f"The {s} launch date is {old}.",
                    f"Correction: the {s} launch date is {new}, not {old}.",
                    old,
                    new,
                )
            )
        elif style == 1:
            old, new = rng.sample(range(20, 90), 2)
            out.append(
                (
                    s,
                    f"How many employees does {s} have?",
                    f"{s} has {old} employees.",
                    f"Update: {s} now has {new} employees.",
                    str(old),
                    str(new),
                )
            )
        elif style == 2:
            p, _ = people[i]
            old, new = rng.sample(_CITIES, 2)
            out.append(
                (
                    p,
                    f"Which city is {p} based in?",
                    f"{p} lives in {old}.",
                    f"{p} moved to {new} last spring.",
                    old,
                    new,
                )
            )
        elif style == 3:
            old, new = (f"${rng.randint(2, 9)}.{rng.randint(0, 9)} million" for _ in "ab")
            out.append(
                (
                    s,
                    f"What is the value of the {s} contract?",
                    f"The {s} contract is worth {old}.",
                    f"To correct an earlier report, the {s} contract is worth {new}.",
                    old,
                    new,
                )
            )
        else:
            (p, _), (q, _) = people[i], people[(i + 1) % len(people)]
            out.append(
                (
                    s,
                    f"Who leads sales at {s}?",
                    f"{p} is the head of sales at {s}.",
                    f"{q} replaced {p} as head of sales at {s}.",
                    p,
                    q,
                )
            )
    return out


def _drift_cases(
    rng: random.Random, n: int, templates: Sequence[tuple[Any, ...]]
) -> list[NeedleCase]:
    """``n`` drifting series, one subject each, cycling through ``templates``."""
    cases = []
    for i, s in enumerate(rng.sample(_DRIFT_SUBJECTS, n)):
        needle, q, first, step, direction = templates[i % len(templates)]
        values = _series(rng, rng.randint(5, 8), first, step, direction)
        d = DEPTHS[i % len(DEPTHS)]
        cases.append(
            NeedleCase("gradual drift", s, q.format(s=s), values[-1], stale=tuple(values[:-1]),
                       needles=tuple(needle.format(s=s, v=v) for v in values),
                       depths=_spread(d, len(values), 0.5), depth=d)
        )  # fmt: skip
    return cases


def make_heldout_cases(per_category: int = 12, seed: int = 1007) -> list[NeedleCase]:
    """Drift and correction needles in the held-out phrasings (see :data:`_HELDOUT_DRIFT`)."""
    rng = random.Random(seed)
    n = per_category
    cases: list[NeedleCase] = []
    cases += _drift_cases(rng, n, _HELDOUT_DRIFT)
    fixes = _heldout_corrections(
        rng, n, rng.sample(_CORRECTED_COMPANIES, n), rng.sample(_PEOPLE, n)
    )
    for i, (s, q, first, fix, old, new) in enumerate(fixes):
        d = DEPTHS[i % len(DEPTHS)]
        if old == new:
            continue
        cases.append(NeedleCase("corrections", s, q, new, stale=(old,), needles=(first, fix),
                                depths=_spread(d, 2, 0.25), depth=d))  # fmt: skip
    for c in cases:
        assert not contains_value(c.question, c.answer), c
    return cases


def make_cases(per_category: int = 12, seed: int = 7) -> list[NeedleCase]:
    """Generate the needle suite: ``per_category`` cases of each category, depths cycling
    through :data:`DEPTHS`, subjects and values drawn with a fixed seed."""
    rng = random.Random(seed)
    n = per_category
    cases: list[NeedleCase] = []
    for i, s in enumerate(rng.sample(_EVENT_SUBJECTS, n)):
        needle, q = _EVENTS[i % len(_EVENTS)]
        v = f"{rng.randint(1, 28)} {rng.choice(_MONTH_NAMES)} {rng.randint(2025, 2027)}"
        d = DEPTHS[i % len(DEPTHS)]
        cases.append(NeedleCase("critical events", s, q.format(s=s), v,
                                needles=(needle.format(s=s, v=v),), depths=(d,), depth=d))  # fmt: skip
    for i, s in enumerate(rng.sample(_ID_SUBJECTS, n)):
        needle, q, pattern = _IDS[i % len(_IDS)]
        v = _code(rng, pattern)
        d = DEPTHS[i % len(DEPTHS)]
        cases.append(NeedleCase("identifiers", s, q.format(s=s), v,
                                needles=(needle.format(s=s, v=v),), depths=(d,), depth=d))  # fmt: skip
    cases += _drift_cases(rng, n, _DRIFT)
    companies = rng.sample(_CORRECTED_COMPANIES, n)
    people = rng.sample(_PEOPLE, n)
    for i in range(n):
        d, style = DEPTHS[i % len(DEPTHS)], i % 6
        if style in (0, 1, 2):  # a figure restated three ways
            s = companies[i]
            old = f"${rng.randint(20, 69) / 10:.1f} million"
            new = old
            while new == old:
                new = f"${rng.randint(20, 69) / 10:.1f} million"
            first = f"{s}'s Q3 2020 revenue was {old}."
            fix = (f"Correction: {s}'s Q3 2020 revenue was {new}, not {old}.",
                   f"Update: {s} restated its Q3 2020 revenue to {new}.",
                   f"Actually, {s}'s Q3 2020 revenue came to {new}.")[style]  # fmt: skip
            # a quarter before the haystack's first date: every statement comes after the fact
            q = f"How much revenue did {s} make in the third quarter of 2020?"
        elif style == 3:  # someone moved on
            (s, pronoun), (old, new) = people[i], rng.sample(_ORGS, 2)
            first = f"{s} works at {old}."
            fix = f"{s} no longer works at {old}; {pronoun} joined {new}."
            q = f"Which company employs {s}?"
        elif style == 4:
            s = companies[i]
            old, new = rng.sample(_ROOMS, 2)
            first = f"The {s} offsite will be held in the {old} room."
            fix = f"Erratum: the {s} offsite moved from the {old} room to the {new} room."
            q = f"Where is the {s} offsite taking place?"
        else:
            s = companies[i]
            old = f"${rng.randint(12, 49)}"
            new = old
            while new == old:
                new = f"${rng.randint(12, 49)}"
            first = f"The {s} plan costs {old} per month."
            fix = f"Update: the {s} plan now costs {new} per month."
            q = f"What is the monthly price of the {s} plan?"
        cases.append(NeedleCase("corrections", s, q, new, stale=(old,), needles=(first, fix),
                                depths=_spread(d, 2, 0.25), depth=d))  # fmt: skip
    for c in cases:
        assert not contains_value(c.question, c.answer), c
    return cases


def contains_value(text: str, value: str) -> bool:
    """``value`` occurs in ``text`` as whole words (``"41"`` is not in ``"412"``, ``"$4.8"`` is
    not in ``"$4.85"``), case-insensitively."""
    pattern = r"(?<![A-Za-z0-9])" + re.escape(value) + r"(?![A-Za-z0-9]|\.\d)"
    return re.search(pattern, text, re.IGNORECASE) is not None


def answers(case: NeedleCase, text: str) -> bool:
    """A passage answers a case when it names the case's subject and holds the current value."""
    return contains_value(text, case.subject) and contains_value(text, case.answer)


def stale_only(case: NeedleCase, text: str) -> bool:
    """A passage about the subject that holds an out-of-date value and not the current one."""
    return (
        contains_value(text, case.subject)
        and not contains_value(text, case.answer)
        and any(contains_value(text, v) for v in case.stale)
    )


def place(cases: Sequence[NeedleCase], n_docs: int) -> list[NeedleCase]:
    """Choose a distinct host document for every needle: the free one nearest its target depth,
    and for a series each after the previous (so later statements carry later timestamps).

    Raises:
        ValueError: When the haystack has too few documents for the needles.
    """
    used: set[int] = set()
    # by the depth of the answering needle; single needles first, so they sit at their depth
    # and a series, whose earlier statements must come before, takes the next free places
    order = sorted(range(len(cases)), key=lambda i: (cases[i].depth, len(cases[i].needles), i))
    hosts_of: dict[int, tuple[int, ...]] = {}
    for ci in order:
        case, prev, hosts = cases[ci], -1, []
        for depth in case.depths:
            target = max(round(depth * (n_docs - 1)), prev + 1)
            free = [i for i in range(prev + 1, n_docs) if i not in used]
            if not free:
                raise ValueError(
                    f"haystack of {n_docs} documents too small for the needles; "
                    "raise --haystack-tokens or lower --needles-per-category"
                )
            prev = min(free, key=lambda i: (abs(i - target), i))
            used.add(prev)
            hosts.append(prev)
        hosts_of[ci] = tuple(hosts)
    return [NeedleCase(**{**c.__dict__, "hosts": hosts_of[ci]}) for ci, c in enumerate(cases)]


def splice(text: str, sentence: str, at: float = 0.5) -> str:
    """Insert ``sentence`` at the sentence boundary of ``text`` nearest ``at`` (0..1) of it."""
    cuts = [0, len(text)] + [m.end() for m in re.finditer(r"[.!?][\"')\]]?\s+", text)]
    pos = min(cuts, key=lambda c: (abs(c - at * len(text)), c))
    if pos == len(text):
        return f"{text.rstrip()} {sentence}"
    return f"{text[:pos]}{sentence} {text[pos:]}"


def cut_documents(text: str, target: int = 2000) -> list[str]:
    """Cut text into documents of at most ~``target`` characters at paragraph breaks (a break
    lost upstream, ``"accelerating.We"``, counts as one), long paragraphs at sentence ends."""
    text = re.sub(r"(?<=[a-z][.!?])(?=[A-Z])", "\n\n", text)
    units: list[tuple[str, bool]] = []  # (text, starts a paragraph)
    for para in re.split(r"\n\s*\n", text):
        para = " ".join(para.split())
        if not para:
            continue
        if len(para) <= target:
            units.append((para, True))
            continue
        for j, sent in enumerate(re.split(r"(?<=[.!?])\s+(?=[\"'A-Z])", para)):
            units.append((sent, j == 0))
    docs: list[str] = []
    cur = ""
    for unit, new_para in units:
        if cur and len(cur) + 2 + len(unit) > target:
            docs.append(cur)
            cur = ""
        cur = unit if not cur else cur + ("\n\n" if new_para else " ") + unit
    if cur:
        docs.append(cur)
    return docs


def spaced_times(n: int, start: datetime = HAYSTACK_START, end: datetime = HAYSTACK_END):
    """``n`` times evenly spaced from ``start`` to ``end`` inclusive."""
    if n == 1:
        return [start]
    step = (end - start) / (n - 1)
    return [start + step * i for i in range(n)]


def load_haystack(data: Path, tokens: int) -> list[str]:
    """Haystack documents adding up to about ``tokens`` tokens: the Paul Graham essays in file
    order, then War and Peace (without the Gutenberg header and licence)."""
    folder = data / "niah_haystack"
    essays = sorted((folder / "paul_graham_essays").glob("*.txt"))
    if not essays:
        raise SystemExit(f"error: haystack not found under {folder}; pass --data DIR")
    budget = tokens * CHARS_PER_TOKEN
    sources = [f.read_text(encoding="utf-8", errors="replace") for f in essays]
    book = folder / "books" / "war_and_peace_gutenberg2600.txt"
    if book.is_file():
        body = book.read_text(encoding="utf-8", errors="replace")
        start = body.find("*** START OF")
        end = body.find("*** END OF")
        body = body[body.find("\n", start) + 1 if start >= 0 else 0 : end if end > 0 else None]
        sources.append(body)
    docs: list[str] = []
    total = 0
    for src in sources:
        for doc in cut_documents(src):
            if total >= budget:
                return docs
            docs.append(doc)
            total += len(doc)
    return docs


def build_needle_corpus(
    haystack: list[str], cases: Sequence[NeedleCase]
) -> tuple[list[Document], list[NeedleCase]]:
    """The haystack with every needle spliced into its host, as timestamped documents."""
    placed = place(cases, len(haystack))
    texts = list(haystack)
    for c in placed:
        for k, (needle, host) in enumerate(zip(c.needles, c.hosts)):
            texts[host] = splice(texts[host], needle, at=(0.3, 0.5, 0.7)[(host + k) % 3])
    times = spaced_times(len(texts))
    docs = [
        Document(id=f"hay-{i:05d}", text=t, metadata={"haystack": True}, timestamp=ts)
        for i, (t, ts) in enumerate(zip(texts, times))
    ]
    return docs, placed


def eval_needles(p: Pensive, cases: Sequence[NeedleCase]) -> dict[str, Any]:
    """Recall@1/@5 (and stale@1) per category and per depth of the answering needle."""
    rows, ms = [], []
    for c in cases:
        res, took = timed_query(p, c.question, 5)
        ms.append(took)
        texts = [h.text for h in res.hits]
        row = {
            "category": c.category,
            "depth": f"{round(c.depth * 100)}%",
            "recall@1": bool(texts) and answers(c, texts[0]),
            "recall@5": any(answers(c, t) for t in texts[:5]),
        }
        if c.stale:
            row["stale@1"] = bool(texts) and stale_only(c, texts[0])
        rows.append(row)
    out: dict[str, Any] = {"all": summarize([{k: v for k, v in r.items() if k != "stale@1"}
                                             for r in rows])["all"]}  # fmt: skip
    for cat in CATEGORIES:
        part = [{**r, "split": r["category"]} for r in rows if r["category"] == cat]
        out[cat] = summarize(part, (cat,)).get(cat, {})
    out["by depth"] = {}
    for d in DEPTHS:
        key = f"{round(d * 100)}%"
        part = [{"split": key, "recall@1": r["recall@1"], "recall@5": r["recall@5"]}
                for r in rows if r["depth"] == key]  # fmt: skip
        out["by depth"][key] = summarize(part, (key,)).get(key, {})
    out["failures@1"] = [c.question for c, r in zip(cases, rows) if not r["recall@1"]]
    return {**out, **percentiles(ms)}


# -- running ------------------------------------------------------------------------------------
def timed_query(p: Pensive, text: str, k: int, **kw: Any) -> tuple[Any, float]:
    """One query and its wall time in ms."""
    t = time.perf_counter()
    res = p.query(text, k=k, **kw)
    return res, (time.perf_counter() - t) * 1000


def build(store: Path, docs: list[Document]) -> dict[str, Any]:
    """Ingest under the defaults (temporal on); a no-op for a store built before."""
    t = time.perf_counter()
    step = max(1, len(docs) // 10)

    def progress(n: int) -> None:
        if n % step < 64 or n == len(docs):
            print(f"    ingested {n}/{len(docs)} ({time.perf_counter() - t:.0f} s)", flush=True)

    with Pensive(store, config=BASE) as p:
        report = p.ingest(docs, progress=progress)
    return {
        "documents": len(docs),
        "seconds": round(time.perf_counter() - t, 1),
        "chunks_embedded": report.chunks_embedded,
        "unchanged": report.unchanged,
    }


def run_systems(
    store: Path,
    evaluate: Callable[[Pensive], dict[str, Any]],
    variants: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Every system (and variant) on one store, reopened under its config (closed between)."""
    runs: dict[str, Any] = {}
    for name, over in {**SYSTEMS, **(variants or {})}.items():
        with Pensive(store, config=merged(over)) as p:
            p.query("warm up", k=10)
            t = time.perf_counter()
            runs[name] = evaluate(p)
            runs[name]["seconds"] = round(time.perf_counter() - t, 1)
        short = {k: v for k, v in runs[name].items() if k != "failures@1"}
        print(f"  {name}: {json.dumps(short)[:600]}", flush=True)
    return runs


# -- report -------------------------------------------------------------------------------------
def _cell(d: dict[str, Any], *keys: str) -> str:
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return "-"
        d = d[k]
    return str(d)


NEEDLES_HELDOUT_TITLE = (
    "Needles, held-out phrasings (drift and corrections worded in ways not used while the "
    "statement patterns were written)"
)


def render(payload: dict[str, Any]) -> str:
    lines = [
        "# Temporal retrieval",
        "",
        "MiniLM, FAISS, hybrid (dense 0.7 / BM25 1.0, weighted), graph defaults, L1 off. One "
        "store per part, built with the defaults (temporal on); *hybrid* reopens it with "
        "`temporal.enabled = false`. Definitions are in `benchmarks/temporal.py`'s docstring.",
        "",
        f"    {payload['command']}",
        "",
    ]
    src = payload.get("source", {})
    if src.get("pensive_core_uncommitted"):
        lines += [
            f"Measured on commit {str(src.get('commit'))[:10]} **plus uncommitted changes** to "
            + ", ".join(f"`{f}`" for f in src["pensive_core_uncommitted"])
            + ": these numbers are of work in progress.",
            "",
        ]
    lat = "| query p50 / p95 ms |"
    if "timeqa" in payload:
        t = payload["timeqa"]
        lines += [
            f"## TimeQA ({t['data']['paragraphs']} paragraphs of {t['data']['documents']} "
            f"documents pooled; {t['data']['answerable']} answerable and "
            f"{t['data']['unanswerable']} unanswerable questions; ingest {t['ingest']['seconds']} s)",
            "",
            "Gold-paragraph recall (any gold paragraph in the top k):",
            "",
            "| system | heldout @1 | heldout @5 | tune @1 | tune @5 | all @1 | all @5 " + lat,
            "|---" * 8 + "|",
        ]
        for name, r in t["runs"].items():
            cells = [_cell(r, "recall", s, f"recall@{k}") for s in ("heldout", "tune", "all")
                     for k in (1, 5)]  # fmt: skip
            lines.append(f"| {name} | " + " | ".join(cells)
                         + f" | {r.get('query_ms_p50')} / {r.get('query_ms_p95')} |")  # fmt: skip
        lines += [
            "",
            "Abstention (`time_scope` bounded and `supported == 0`), fraction of questions, all "
            "splits (n in brackets):",
            "",
            "| system | unanswerable in the file: abstained | years -300: abstained | "
            "answerable: wrongly abstained |",
            "|---|---|---|---|",
        ]
        for name, r in t["runs"].items():
            a = r["abstention"]
            cells = [f"{_cell(a, k, 'all', 'abstained')} ({_cell(a, k, 'all', 'n')})" for k in
                     ("unanswerable (file)", "unanswerable (years -300)",
                      "answerable (wrongly abstained)")]  # fmt: skip
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    for key, label in (("situatedqa", "dev"), ("situatedqa_train", "train, for tuning only")):
        if key not in payload:
            continue
        s = payload[key]
        st = s["data"]
        lines += [
            f"## SituatedQA ({label}: {st['statements']} dated statements from "
            f"{st['timelines_used']} timelines; {st['dated_used']} dated questions, "
            f"{st['valid_is_cur']} whose valid answer is the latest, {st['valid_is_prev']} an "
            "earlier one)",
            "",
            "Accuracy = the valid statement ranked above its rival in the top 20; R@1 = the valid "
            "statement first. *latest-wins*: undated question, one per timeline. `as_of=` also "
            "keeps out documents timestamped after it (the engine's filter, on in both systems), "
            "so a rival that starts later is removed and *as-of explicit* is right by "
            "elimination whenever the earlier statement is the valid one.",
            "",
            "| system | latest-wins | R@1 | as-of in words | R@1 | (latest valid / earlier "
            "valid) | as-of explicit | R@1 | (latest valid / earlier valid) " + lat,
            "|---" * 10 + "|",
        ]
        for name, r in s["runs"].items():
            lw, w, e = r["latest-wins"], r["as-of in words"], r["as-of explicit"]
            lines.append(
                f"| {name} | {_cell(lw, 'valid_above_rival')} | {_cell(lw, 'recall@1')} | "
                f"{_cell(w, 'all', 'valid_above_rival')} | {_cell(w, 'all', 'recall@1')} | "
                f"{_cell(w, 'cur', 'valid_above_rival')} / {_cell(w, 'prev', 'valid_above_rival')}"
                f" | {_cell(e, 'all', 'valid_above_rival')} | {_cell(e, 'all', 'recall@1')} | "
                f"{_cell(e, 'cur', 'valid_above_rival')} / {_cell(e, 'prev', 'valid_above_rival')}"
                f" | {r.get('query_ms_p50')} / {r.get('query_ms_p95')} |"
            )
        lines.append("")
    if "locomo" in payload:
        lc = payload["locomo"]
        lines += [
            f"## LoCoMo temporal ({lc['data']['questions']} category-2 questions over "
            f"{lc['data']['turns']} timestamped turns; each filtered to its conversation)",
            "",
            "| system | evidence recall@5 | @10 | all-evidence@5 | @10 " + lat,
            "|---" * 6 + "|",
        ]
        for name, r in lc["runs"].items():
            lines.append(
                f"| {name} | {r['recall@5']} | {r['recall@10']} | {r['all@5']} | {r['all@10']} "
                f"| {r.get('query_ms_p50')} / {r.get('query_ms_p95')} |"
            )
        lines.append("")
    for key, title in (("needles", "Needles"), ("needles_heldout", NEEDLES_HELDOUT_TITLE)):
        if key not in payload:
            continue
        nd = payload[key]
        d = nd["data"]
        lines += [
            f"## {title} ({d['haystack_documents']} haystack documents, ~{d['haystack_tokens']} "
            f"tokens; {d['needles']} needles, {d['questions']} questions)",
            "",
            "Recall@1 / recall@5 (a hit names the subject and holds the current value); stale@1 "
            "= top hit holds only an out-of-date value.",
            "",
            "| system | " + " | ".join(CATEGORIES) + " | all | stale@1 drift / corrections "
            + lat,
            "|---" * (len(CATEGORIES) + 4) + "|",
        ]  # fmt: skip
        for name, r in nd["runs"].items():
            cells = [f"{_cell(r, c, 'recall@1')} / {_cell(r, c, 'recall@5')}" for c in CATEGORIES]
            cells.append(f"{_cell(r, 'all', 'recall@1')} / {_cell(r, 'all', 'recall@5')}")
            cells.append(
                f"{_cell(r, 'gradual drift', 'stale@1')} / {_cell(r, 'corrections', 'stale@1')}"
            )
            lines.append(f"| {name} | " + " | ".join(cells)
                         + f" | {r.get('query_ms_p50')} / {r.get('query_ms_p95')} |")  # fmt: skip
        lines += ["", "By depth of the answering needle (recall@1 / @5, all categories):", ""]
        keys = [f"{round(x * 100)}%" for x in DEPTHS]
        lines += ["| system | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
        for name, r in nd["runs"].items():
            cells = [f"{_cell(r, 'by depth', k, 'recall@1')} / {_cell(r, 'by depth', k, 'recall@5')}"
                     for k in keys]  # fmt: skip
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    if "scifact" in payload:
        sf = payload["scifact"]
        lines += [
            f"## SciFact (single-hop control: {sf['data']['claims']} judged claims, "
            f"{sf['data']['abstracts']} abstracts, no timestamps)",
            "",
            "| system | nDCG@10 | query p50 / p95 ms |",
            "|---|---|---|",
        ]
        for name, r in sf["runs"].items():
            lines.append(
                f"| {name} | {r['nDCG@10']} | {r.get('query_ms_p50')} / {r.get('query_ms_p95')} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Build (or reuse) the stores, run both systems, write ``temporal.json``/``.md``."""
    ap = base_parser(__doc__ or "")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma list of {', '.join(PARTS)}")
    ap.add_argument("--timeqa-docs", type=int, default=None, help="first N TimeQA documents")
    ap.add_argument("--situatedqa-rows", type=int, default=None,
                    help="first N dated (and undated) SituatedQA questions")  # fmt: skip
    ap.add_argument("--situatedqa-train", action="store_true",
                    help="also report the train split (labelled; for tuning)")  # fmt: skip
    ap.add_argument("--haystack-tokens", type=int, default=200_000)
    ap.add_argument("--scifact-store", type=Path, default=None,
                    help="a SciFact store built by benchmarks.scifact, copied (no re-embedding)")  # fmt: skip
    ap.add_argument("--needles-per-category", type=int, default=12)
    ap.add_argument("--seed", type=int, default=7, help="needle generation seed")
    ap.add_argument("--name", default="temporal", help="results file name (NAME.json/.md)")
    ap.add_argument("--rebuild", action="store_true",
                    help="delete the parts' stores under --store first (after ingest changes)")  # fmt: skip
    args = ap.parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        ap.error(f"unknown part(s) {unknown}; choose from {', '.join(PARTS)}")
    temps: list[Path] = []

    def folder(sub: str) -> Path:
        if args.store is not None:
            if args.rebuild:
                shutil.rmtree(args.store / sub, ignore_errors=True)
            return args.store / sub
        temps.append(Path(tempfile.mkdtemp(prefix=f"pensive-{sub}-")))
        return temps[-1]

    command = "python -m benchmarks.temporal" + "".join(
        f" {a}" for a in (argv if argv is not None else __import__("sys").argv[1:])
    )
    payload: dict[str, Any] = {
        "command": command,
        "config": {
            "base": BASE,
            "systems": SYSTEMS,
            "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        },
        "environment": environment(),
        "source": source_state(),
    }

    def timeqa() -> None:
        docs, questions = load_timeqa(args.data, args.timeqa_docs)
        sub = "timeqa" if args.timeqa_docs is None else f"timeqa-{args.timeqa_docs}"
        store = folder(sub)
        ans = [q for q in questions if q["answerable"]]
        payload["timeqa"] = {
            "data": {
                "documents": args.timeqa_docs or 320,
                "paragraphs": len(docs),
                "answerable": len(ans),
                "unanswerable": len(questions) - len(ans),
                "shifted_variants": sum(shift_years(q["text"]) is not None for q in ans),
                "splits": "tune = even document number, heldout = odd (file order from 0)",
            },
            "ingest": build(store, docs),
        }
        payload["timeqa"]["runs"] = run_systems(
            store, lambda p: eval_timeqa(p, questions), TIMEQA_VARIANTS
        )

    def situated(split: str, key: str) -> None:
        docs, undated, dated, stats = load_situatedqa(args.data, split, args.situatedqa_rows)
        stats |= {"statements": len(docs),
                  "valid_is_cur": sum(q["valid_is"] == "cur" for q in dated),
                  "valid_is_prev": sum(q["valid_is"] == "prev" for q in dated)}  # fmt: skip
        store = folder(f"situatedqa-{split}")
        payload[key] = {"data": stats, "ingest": build(store, docs)}
        payload[key]["runs"] = run_systems(store, lambda p: eval_situatedqa(p, undated, dated))

    def locomo() -> None:
        docs, questions = load_locomo_dated(args.data)
        store = folder("locomo")
        payload["locomo"] = {
            "data": {"turns": len(docs), "questions": len(questions)},
            "ingest": build(store, docs),
        }
        payload["locomo"]["runs"] = run_systems(store, lambda p: eval_locomo(p, questions))

    def needles(key: str = "needles", heldout: bool = False) -> None:
        haystack = load_haystack(args.data, args.haystack_tokens)
        if heldout:
            cases = make_heldout_cases(args.needles_per_category, args.seed + 1000)
        else:
            cases = make_cases(args.needles_per_category, args.seed)
        docs, placed = build_needle_corpus(haystack, cases)
        n, seed = args.needles_per_category, args.seed
        store = folder(f"{key}-{args.haystack_tokens}-{n}-{seed}")
        payload[key] = {
            "data": {
                "haystack_documents": len(docs),
                "haystack_tokens": sum(len(h) for h in haystack) // CHARS_PER_TOKEN,
                "needles": sum(len(c.needles) for c in placed),
                "questions": len(placed),
                "cases": [
                    {"category": c.category, "question": c.question, "answer": c.answer,
                     "stale": list(c.stale), "needles": list(c.needles),
                     "hosts": [f"hay-{h:05d}" for h in c.hosts], "depth": c.depth,
                     "actual_depth": round(c.hosts[-1] / max(1, len(docs) - 1), 3)}
                    for c in placed
                ],
            },
            "ingest": build(store, docs),
        }  # fmt: skip
        payload[key]["runs"] = run_systems(
            store, lambda p: eval_needles(p, placed), NEEDLE_VARIANTS
        )

    def scifact() -> None:
        from benchmarks.metrics import evaluate as ir_evaluate
        from benchmarks.metrics import ranking_to_run
        from benchmarks.scifact_data import load

        docs, queries, qrels = load(args.data)
        store = folder("scifact")
        if args.scifact_store is not None and not (store / "pensive.sqlite").exists():
            shutil.copytree(args.scifact_store, store)  # built by benchmarks.scifact: no embedding
        payload["scifact"] = {"data": {"claims": len(qrels), "abstracts": len(docs)},
                              "ingest": build(store, docs)}  # fmt: skip

        def ndcg(p: Pensive) -> dict[str, Any]:
            ranks, ms = {}, []
            for qid in qrels:
                res, took = timed_query(p, queries[qid], 100)
                ms.append(took)
                ranks[qid] = list(dict.fromkeys(h.doc_id for h in retrieved(res)))
            run = ranking_to_run(ranks)
            return {"nDCG@10": round(ir_evaluate(run, qrels, ("nDCG@10",))["nDCG@10"], 4),
                    **percentiles(ms)}  # fmt: skip

        payload["scifact"]["runs"] = run_systems(store, ndcg)

    steps: dict[str, Callable[[], None]] = {
        "scifact": scifact,
        "timeqa": timeqa,
        "situatedqa": lambda: situated("dev", "situatedqa"),
        "locomo": locomo,
        "needles": needles,
        "needles_heldout": lambda: needles("needles_heldout", heldout=True),
    }
    t0 = time.perf_counter()
    for name in parts:
        print(f"{name} ...", flush=True)
        t = time.perf_counter()
        steps[name]()
        payload[name]["seconds"] = round(time.perf_counter() - t, 1)
        # written after every part: a failure later keeps what was measured
        write_results(args.name, args.out, payload, render(payload))
    if args.situatedqa_train:
        print("situatedqa (train) ...", flush=True)
        situated("train", "situatedqa_train")
    payload["seconds"] = round(time.perf_counter() - t0, 1)
    write_results(args.name, args.out, payload, render(payload))
    for t in temps:
        shutil.rmtree(t, ignore_errors=True)


if __name__ == "__main__":
    main()
