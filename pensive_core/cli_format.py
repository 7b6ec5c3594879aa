"""How the ``pensive`` command lays out what it prints: widths, tables, summaries, help text.

Everything here is pure formatting (no store is opened), so ``cli.py`` keeps only the
commands. The output width is the terminal's (``shutil.get_terminal_size``) unless a
command's ``--width`` names one; lines of prose are broken between phrases, never inside one.
"""

from __future__ import annotations

import inspect
import json
import re
import shutil
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

if TYPE_CHECKING:
    from .types import IngestReport, QueryResult

__all__ = [
    "HelpGroup",
    "ingest_failure",
    "ingest_summary",
    "no_files_message",
    "plain_help",
    "plural",
    "print_json",
    "query_notes",
    "query_table",
    "snippet_chars",
    "stats_notes",
    "terminal_width",
    "tier_table",
    "turn_time",
    "turns_table",
    "wrap_phrases",
]

MIN_WIDTH = 40  # narrower than this, no table is readable: --width below it is refused


def terminal_width(requested: int | None = None, fallback: int = 80) -> int:
    """The width to print at: ``requested`` when given, else the terminal's.

    Args:
        requested: A command's ``--width``, or None.
        fallback: The width when there is no terminal (output to a pipe or a file); the
            ``COLUMNS`` variable still wins over it, as ``shutil.get_terminal_size`` reads it.

    Returns:
        Columns, at least ``MIN_WIDTH``.
    """
    if requested is not None:
        return max(requested, MIN_WIDTH)
    return max(shutil.get_terminal_size((fallback, 24)).columns, MIN_WIDTH)


def plural(n: int, noun: str, many: str | None = None) -> str:
    """``n`` and ``noun``, in the plural unless ``n`` is 1: ``plural(1, "file")`` is "1 file".

    Args:
        n: The count.
        noun: The singular.
        many: The plural when it is not ``noun + "s"``.
    """
    return f"{n} {noun if n == 1 else many or noun + 's'}"


def wrap_phrases(phrases: Iterable[str], width: int) -> str:
    """Join ``phrases`` with spaces into lines of at most ``width``, breaking only between them.

    A phrase longer than ``width`` gets a line of its own (the terminal folds it).
    """
    lines: list[str] = []
    line = ""
    for phrase in phrases:
        if line and len(line) + 1 + len(phrase) > width:
            lines.append(line)
            line = phrase
        else:
            line = f"{line} {phrase}" if line else phrase
    if line:
        lines.append(line)
    return "\n".join(lines)


def _json_default(value: Any) -> Any:
    """``json.dumps`` fallback: datetimes as ISO-8601, sets as lists, numpy scalars as numbers,
    anything else as ``str``."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        return value.item()
    return str(value)


def print_json(value: Any) -> None:
    """Print ``value`` as JSON on stdout, untouched by rich (no wrapping, no markup)."""
    typer.echo(json.dumps(value, default=_json_default, ensure_ascii=False, indent=2))


# -- help text ----------------------------------------------------------------------------

_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`~?([^`<]*?)(?:\s*<[^>]*>)?`")  # :class:`~a.B` -> B
_LITERAL = re.compile(r"``(.+?)``|`([^`]+)`")


def plain_help(text: str | None) -> str | None:
    """A docstring as ``--help`` should show it: RST roles and backticks dropped, each paragraph
    on one line (the terminal wraps it), blank lines between paragraphs kept.

    A role keeps its target (the last part of a dotted one written with "~"), a literal in
    single or double backticks keeps its text. A paragraph whose lines start with "-", "*" or a
    number stays a list; one starting with "\\b" (click's "do not rewrap" mark) is kept as is.

    Args:
        text: A docstring or a help string (None passes through).

    Returns:
        The text to show.
    """
    if text is None:
        return None

    def role(m: re.Match[str]) -> str:
        return m.group(1).rsplit(".", 1)[-1] if m.group(0).count("~") else m.group(1)

    text = _ROLE.sub(role, inspect.cleandoc(text))
    text = _LITERAL.sub(lambda m: m.group(1) or m.group(2), text)
    paragraphs = []
    for para in re.split(r"\n\s*\n", text):
        lines = para.splitlines()
        if para.startswith("\b") or any(re.match(r"\s*(?:[-*]|\d+[.)])\s", ln) for ln in lines):
            paragraphs.append(para)
        else:
            paragraphs.append(" ".join(ln.strip() for ln in lines))
    return "\n\n".join(paragraphs)


def _clean_command(command: Any) -> None:
    command.help = plain_help(command.help)
    command.short_help = plain_help(command.short_help)
    for param in getattr(command, "params", ()):
        if getattr(param, "help", None):
            param.help = plain_help(param.help)
    for sub in getattr(command, "commands", {}).values():  # a group's commands, built first
        _clean_command(sub)


class HelpGroup(TyperGroup):
    """The ``pensive`` command group: help texts shown without their docstrings' RST markup.

    Typer builds each command's help from its docstring, whose ````x```` and ``:class:``
    roles read as noise in a terminal; they are cleaned once, as the group is built. (Typer
    itself already adds "Did you mean ...?" to an unknown command or option.)
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _clean_command(self)


# -- query ----------------------------------------------------------------------------------

WIDE = 140  # from this width on, the query table has a column each for tier and sources


def _side_width(width: int) -> int:
    """Most columns the doc (and the sources) column may take at ``width``."""
    return width // 6 if width >= WIDE else max(14, min(30, width * 2 // 7))


def snippet_chars(width: int, lines: int = 3) -> int:
    """A snippet length filling about ``lines`` lines of the snippet column at ``width``."""
    wide = width >= WIDE
    fixed = 4 + 6 + (4 if wide else 0) + 3 * (6 if wide else 4) + 1  # cells, padding, rules
    column = max(20, width - fixed - (2 if wide else 1) * _side_width(width))
    return min(max(lines * column, 80), 400)


def query_table(res: QueryResult, question: str, width: int, chars: int) -> Table:
    """The ``pensive query`` table: rank, score, tier, doc, sources, snippet.

    The snippet column takes what the others leave; the doc and sources columns are capped
    (a path folds, the sources wrap). Below ``WIDE`` columns the tier column goes (every
    hit's tier is the title's) and the sources are shown under the doc, so at 80 columns the
    snippet still has room to be read.

    Args:
        res: The query's result.
        question: The question, for the query-biased snippets.
        width: The output width.
        chars: Most characters per snippet.
    """
    from .snippets import snippet as make_snippet

    title = (
        f"{plural(len(res.hits), 'hit')} · tier {res.tier} · confidence {res.confidence:.2f}"
        f" · {res.latency_ms:.1f} ms"
    )
    wide = width >= WIDE
    table = Table(title=title, expand=True)  # the snippet column takes what the others leave
    side = _side_width(width)
    table.add_column("rank", justify="right", no_wrap=True)
    table.add_column("score", no_wrap=True)
    if wide:
        table.add_column("tier", no_wrap=True)
        table.add_column("doc", overflow="fold", max_width=side)
        table.add_column("sources", max_width=side)
    else:
        table.add_column("doc, sources", overflow="fold", max_width=side)
    table.add_column("snippet", ratio=1, min_width=20, overflow="fold")
    for i, hit in enumerate(res.hits, start=1):
        text = make_snippet(hit.text, question, chars)
        sources = " ".join(f"{name}#{rank}" for name, rank in hit.sources.items())
        if hit.superseded_by is not None:  # kept, demoted: say so beside the stale text
            when = f" on {hit.valid_to.date()}" if hit.valid_to is not None else ""
            text = f"(superseded{when} by {hit.superseded_by.split('#')[0]}) {text}"
        doc = escape(hit.doc_id)
        if wide:
            cells = [res.tier, doc, sources]
        else:
            cells = [f"{doc}\n[dim]{sources}[/]" if sources else doc]
        table.add_row(str(i), f"{hit.score:.4f}", *cells, escape(text))
    return table


def query_notes(res: QueryResult) -> list[list[str]]:
    """The lines under the query table, as phrases: the time asked about, an aggregation."""
    notes = []
    scope = res.time_scope
    if scope is not None:
        span = " to ".join(str(t.date()) for t in (scope.start, scope.end) if t is not None)
        notes.append(
            [
                f"time asked about: {scope.kind}{' ' + span if span else ''}",
                f"({scope.supported} of {len(res.hits)} hits fit it)",
            ]
        )
    agg = res.aggregation
    if agg is not None:
        named = " + ".join(agg.entities + agg.terms)
        more = [f"(the first {len(res.hits)} shown)"] if agg.truncated else []
        notes.append(
            [
                f"count: {plural(agg.count, 'passage')} in {plural(agg.documents, 'document')}",
                f"name {named}",
                *more,
            ]
        )
    return notes


# -- ingest ---------------------------------------------------------------------------------


def ingest_summary(report: IngestReport, files: int) -> list[str]:
    """The phrases of the line ``pensive ingest`` ends with (a line breaks only between them)."""
    return [
        f"{report.added} added, {report.updated} updated, {report.unchanged} unchanged;",
        f"{plural(report.chunks_embedded, 'passage')} embedded, {report.chunks_reused} reused,"
        f" {report.chunks_deleted} removed",
        f"in {report.seconds:.1f}s ({plural(files, 'file')})",
    ]


def _reason(message: str) -> str:
    if "has no text" in message:
        return "empty"
    if "not UTF-8" in message:
        return "not UTF-8 text"
    if " line " in message:
        return "bad JSONL lines"
    return "unreadable"


def no_files_message(ignored: int) -> str:
    """Why an ingest of paths holding no loadable file took nothing in."""
    from .loaders import SUFFIXES

    what = f"{plural(ignored, 'file')} of other kinds ignored" if ignored else "no files at all"
    return f"nothing ingested: no {' '.join(SUFFIXES)} files found ({what})"


def ingest_failure(report: IngestReport, files: int, ignored: int) -> str | None:
    """Why an ingest took nothing in, or None when it took anything (new, changed or unchanged).

    Args:
        report: The ingest's report.
        files: Loadable files found under the paths given.
        ignored: Files under the paths skipped for their suffix.
    """
    if report.added + report.updated + report.unchanged:
        return None
    if not files:
        return no_files_message(ignored)
    counts: dict[str, int] = {}
    for _, message in report.errors:
        counts[_reason(message)] = counts.get(_reason(message), 0) + 1
    why = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items())) or "no documents"
    return f"nothing ingested: {plural(files, 'file')} read, every one skipped ({why})"


# -- stats ----------------------------------------------------------------------------------

_TIERS = ("L1", "L2", "L3")
_BARS = "▁▂▃▄▅▆▇█"


def tier_table(queries: dict[str, Any]) -> Table:
    """Per-tier lifetime counts, shares, latency percentiles and confidence distribution."""
    table = Table(title=f"queries by tier (lifetime, {queries['total']} in all)")
    table.add_column("tier")
    for col in ("queries", "share", "p50 ms", "p95 ms", "p99 ms", "median conf."):
        table.add_column(col, justify="right")
    table.add_column("confidence 0→1")
    for tier in _TIERS:
        row = queries.get(tier)
        if row is None:
            continue
        table.add_row(
            tier,
            str(row["count"]),
            f"{row['share']:.0%}",
            *(_ms(row[q]) for q in ("p50_ms", "p95_ms", "p99_ms")),
            _median_bin(row["confidence"]),
            _spark(row["confidence"]),
        )
    return table


def stats_notes(info: dict[str, Any]) -> list[list[str]]:
    """The lines under the stats tables, as phrases: the L1 cache, the graph, L3 escalations.

    The L1 hit rate is lifetime (the L1 tier's share of queries); the rest is this process's.
    """
    queries, l1, g, l3 = info["queries"], info["l1"], info["graph"], info["l3"]
    notes = []
    if l1 is None:
        notes.append(["L1 cache: off"])
    else:
        total, hits = queries["total"], queries.get("L1", {}).get("count", 0)
        rate = (
            f"{hits / total:.0%} ({hits} of {total} queries)" if total else "n/a (no queries yet)"
        )
        m = l1["matches"]
        notes.append(
            [
                f"L1 cache: {l1['entries']} / {l1['capacity']} entries, {l1['hot']} hot;",
                f"hit rate {rate}",
            ]
        )
        notes.append(
            [
                f"  this process: matches exact {m['exact']}, bag {m['bag']}, fuzzy {m['fuzzy']};",
                f"{l1['evictions']} evicted, {l1['invalidated']} invalidated",
            ]
        )
    if g is not None:
        notes.append(
            [
                f"entity graph: {plural(g['entities'], 'entity', 'entities')},",
                f"{plural(g['mentions'], 'mention')} in {plural(g['chunks'], 'passage')}",
            ]
        )
    notes.append(
        [
            "L3 escalations (this process):",
            f"{l3['exact']} for exact strings,",
            f"{l3['low_confidence']} for low confidence,",
            f"{l3['found']} answered",
        ]
    )
    return notes


# -- chat -----------------------------------------------------------------------------------


def turn_time(when: datetime | None) -> str:
    """A turn's time in a table, to the minute, UTC (``--json`` has it whole)."""
    return when.strftime("%Y-%m-%d %H:%M") if when is not None else "-"


def turns_table(title: str, columns: Sequence[str]) -> Table:
    """A table of turns whose last column, the text, takes what the others leave and wraps."""
    table = Table(title=title, expand=True)
    for col in columns:
        if col == "text":
            table.add_column(col, ratio=1, min_width=20, overflow="fold")
        else:
            table.add_column(col, no_wrap=True)
    return table


def _ms(value: float) -> str:
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def _median_bin(counts: Sequence[int]) -> str:
    """The tenth of [0, 1] holding the median confidence, e.g. ``0.7-0.8``."""
    total, seen = sum(counts), 0
    for i, n in enumerate(counts):
        seen += n
        if total and seen * 2 >= total:
            return f"{i / 10:.1f}-{(i + 1) / 10:.1f}"
    return "-"


def _spark(counts: Sequence[int]) -> str:
    """One character per bin: a bar scaled to the fullest bin, a dot for an empty one."""
    top = max(counts, default=0)
    return "".join(_BARS[max(0, -(-n * len(_BARS) // top) - 1)] if n else "·" for n in counts)
