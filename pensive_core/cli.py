"""The ``pensive`` command: everything ``pensive serve`` offers over HTTP, done locally.

Documents: ``ingest``, ``query``, ``get``, ``delete``; the store: ``stats``, ``config``,
``health``, ``reindex``; conversation memory: ``chat list|add|turns|recall|context|clear``;
the HTTP service itself: ``serve``; MCP hosts: ``mcp``; and ``bench``. Every store command
takes ``--namespace/-n`` (the store folder of that namespace under ``--store``), as the
server's API keys do. ``--json`` prints the fields the matching HTTP route returns (a few more at times).

Errors are printed as one line (``error: ...``) with exit code 1, never as a traceback.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .errors import InputError, NotFoundError, PensiveError, StorageError
from .mcp_cli import mcp_command
from .namespaces import DEFAULT_NAMESPACE, namespace_path
from .wire import document_json, hit_json, result_json, turn_json

if TYPE_CHECKING:
    from .engine import Pensive
    from .memory.conversation import Conversation

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Pensive: hybrid retrieval and memory for LLM applications.",
)
console = Console()
err_console = Console(stderr=True)

StoreOpt = typer.Option(
    None,
    "--store",
    "-s",
    envvar="PENSIVE_HOME",
    help="Store folder (default ./pensive-data, or $PENSIVE_HOME).",
)
ConfigOpt = typer.Option(None, "--config", "-c", help="A pensive.toml to apply.")
NamespaceOpt = typer.Option(
    DEFAULT_NAMESPACE,
    "--namespace",
    "-n",
    help="Namespace: its own store, under STORE/namespaces/NAME (default: the store itself).",
)
JsonOpt = typer.Option(False, "--json", help="Print JSON (what the HTTP route returns).")


def _folder(store: Path | None, namespace: str = DEFAULT_NAMESPACE) -> Path:
    """The store folder of ``namespace`` under ``store`` (checks the name before any I/O)."""
    return namespace_path(store or Path("pensive-data"), namespace)


def _config_path(config: Path | None) -> Path | None:
    """The config file to apply: the one given, else ``./pensive.toml`` if there is one."""
    if config is None and Path("pensive.toml").exists():
        return Path("pensive.toml")
    return config


def _open(
    store: Path | None,
    config: Path | None,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    read_only: bool = False,
    must_exist: bool = False,
) -> Pensive:
    """Open a namespace's store.

    Args:
        store: The root store folder (default ``./pensive-data``).
        config: A pensive.toml to apply (default ``./pensive.toml`` when present).
        namespace: Which namespace's store under ``store``.
        read_only: Open to read beside a writer; needs an existing store.
        must_exist: Open for writing, but never create a store (delete, clear).

    Raises:
        NotFoundError: If ``read_only`` or ``must_exist`` and there is no store there.
    """
    from .engine import Pensive

    folder = _folder(store, namespace)
    missing = NotFoundError(f"no Pensive store at {folder} (create one with pensive ingest)")
    config = _config_path(config)
    if must_exist and not _exists(folder, config):
        raise missing
    try:
        return Pensive(folder, config=str(config) if config else None, read_only=read_only)
    except NotFoundError:
        if not read_only:
            raise
        raise missing from None


def _exists(folder: Path, config: Path | None) -> bool:
    """Whether a store exists for ``folder`` on the engine the config names (for Postgres,
    in its schema: the folder itself may be empty)."""
    from .config import load_config
    from .storage import store_exists

    return store_exists(load_config(str(config) if config else None).storage, folder)


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


def _print_json(value: Any) -> None:
    """Print ``value`` as JSON on stdout, untouched by rich (no wrapping, no markup)."""
    typer.echo(json.dumps(value, default=_json_default, ensure_ascii=False, indent=2))


def _json_object(text: str | None, option: str) -> dict[str, Any] | None:
    """Parse an option's JSON object (None when not given).

    Raises:
        InputError: If ``text`` is not valid JSON or not an object.
    """
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{option} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InputError(f"{option} must be a JSON object, got {type(value).__name__}")
    return value


def _time(text: str | None, option: str) -> datetime | None:
    """Parse an option's ISO-8601 time (None when not given); naive means UTC.

    Raises:
        InputError: If ``text`` is not an ISO-8601 date or datetime.
    """
    from .timeutil import ensure_utc

    if text is None:
        return None
    try:
        return ensure_utc(text)
    except InputError as exc:
        raise InputError(f"{option}: {exc}") from None


@app.command()
def ingest(
    paths: list[Path] = typer.Argument(
        ..., help="Files or folders (.txt .md .html; .jsonl: one JSON document a line)."
    ),
    store: Path | None = StoreOpt,
    config: Path | None = ConfigOpt,
    namespace: str = NamespaceOpt,
    archive_only: bool = typer.Option(
        False,
        "--archive-only",
        help="Keep the documents in the L3 archive only: not embedded, found by exact search.",
    ),
) -> None:
    """Ingest files and folders into the store, with a progress bar.

    The local form of ``POST /v1/documents`` (JSON documents: put them in a ``.jsonl`` file,
    one ``{"id", "text", "metadata", "timestamp"}`` a line) and ``/v1/documents/upload``. It
    returns when the documents are searchable, so the server's ``/v1/jobs`` has no counterpart.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .loaders import iter_files

    _folder(store, namespace)  # a bad name fails before any file is read
    total = sum(1 for p in paths if p.exists() for _ in iter_files(p))
    with (
        _open(store, config, namespace=namespace) as p,
        Progress(
            TextColumn("[bold]ingesting"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("docs"),
            TimeElapsedColumn(),
            console=err_console,
            transient=False,
        ) as bar,
    ):
        task = bar.add_task("ingest", total=None)  # documents per file vary (JSONL): unknown

        def progress(n: int) -> None:
            bar.update(task, completed=n)

        report = p.ingest_path(*paths, progress=progress, archive_only=archive_only)
        bar.update(
            task,
            total=report.added + report.updated + report.unchanged,
            completed=report.added + report.updated + report.unchanged,
        )
    console.print(
        f"{report.added} added, {report.updated} updated, {report.unchanged} unchanged; "
        f"{report.chunks_embedded} passages embedded, {report.chunks_reused} reused, "
        f"{report.chunks_deleted} removed in {report.seconds:.1f}s ({total} files)"
    )
    for source, message in report.errors:
        detail = message if message.startswith(source) else f"{source}: {message}"
        err_console.print(f"[yellow]skipped[/] {escape(detail)}", highlight=False)


@app.command()
def query(
    text: str = typer.Argument(..., help="The question."),
    k: int = typer.Option(5, "--k", "-k", help="How many passages."),
    store: Path | None = StoreOpt,
    config: Path | None = ConfigOpt,
    namespace: str = NamespaceOpt,
    as_of: str | None = typer.Option(
        None, "--as-of", help="Only documents timestamped at or before this ISO-8601 time."
    ),
    filters: str | None = typer.Option(
        None,
        "--filter",
        help='Metadata filter as a JSON object, e.g. \'{"year": {"$gte": 2020}}\'.',
    ),
    as_json: bool = JsonOpt,
    width: int = typer.Option(100, help="Snippet length in characters."),
) -> None:
    """Answer a question from the store: a table of rank, score, tier, doc, snippet.

    The local form of ``POST /v1/query``; ``--json`` prints the tier, confidence, latency and
    every hit whole (text, score, metadata, timestamp, which retrievers found it).
    """
    cutoff = _time(as_of, "--as-of")
    where = _json_object(filters, "--filter")
    with _open(store, config, namespace=namespace, read_only=True) as p:
        res = p.query(text, k=k, as_of=cutoff, filters=where)
    if as_json:
        _print_json(result_json(res))
        return
    table = Table(
        title=f"{len(res.hits)} hits · tier {res.tier} · confidence {res.confidence:.2f}"
        f" · {res.latency_ms:.1f} ms"
    )
    for col in ("rank", "score", "tier", "doc", "sources", "snippet"):
        table.add_column(
            col, overflow="fold" if col == "snippet" else "ellipsis", no_wrap=col != "snippet"
        )
    from .snippets import snippet as make_snippet

    for i, hit in enumerate(res.hits, start=1):
        snippet = make_snippet(hit.text, text, width)
        sources = " ".join(f"{name}#{rank}" for name, rank in hit.sources.items())
        if hit.superseded_by is not None:  # kept, demoted: say so beside the stale text
            when = f" on {hit.valid_to.date()}" if hit.valid_to is not None else ""
            snippet = f"(superseded{when} by {hit.superseded_by.split('#')[0]}) {snippet}"
        table.add_row(
            str(i), f"{hit.score:.4f}", res.tier, escape(hit.doc_id), sources, escape(snippet)
        )
    console.print(table)
    scope = res.time_scope
    if scope is not None:
        span = " to ".join(str(t.date()) for t in (scope.start, scope.end) if t is not None)
        console.print(
            f"time asked about: {scope.kind}{' ' + span if span else ''}"
            f" ({scope.supported} of {len(res.hits)} hits fit it)",
            highlight=False,
        )
    agg = res.aggregation
    if agg is not None:
        named = " + ".join(agg.entities + agg.terms)
        more = f" (the first {len(res.hits)} shown)" if agg.truncated else ""
        console.print(
            f"count: {agg.count} passages in {agg.documents} documents name {named}{more}",
            highlight=False,
        )


@app.command()
def stats(
    store: Path | None = StoreOpt,
    config: Path | None = ConfigOpt,
    namespace: str = NamespaceOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Show what the store holds and how its queries were answered (works beside a writer).

    The local form of ``GET /v1/stats`` (``--json``) and of the dashboard (the tier table).
    """
    with _open(store, config, namespace=namespace, read_only=True) as p:
        info = p.stats()
    if as_json:
        _print_json(info)
        return
    table = Table(show_header=False)
    for key, value in info.items():
        if key not in ("queries", "l1", "l3", "graph"):
            table.add_row(key, escape(str(value)))
    console.print(table)
    queries = info["queries"]
    if queries["total"]:
        console.print(_tier_table(queries))
    else:
        console.print("queries: none yet")
    console.print(_l1_line(info["l1"], queries), highlight=False)
    if info["graph"] is not None:
        g = info["graph"]
        console.print(
            f"entity graph: {g['entities']} entities, {g['mentions']} mentions in "
            f"{g['chunks']} passages",
            highlight=False,
        )
    l3 = info["l3"]
    console.print(
        f"L3 escalations (this process): {l3['exact']} for exact strings, "
        f"{l3['low_confidence']} for low confidence, {l3['found']} answered",
        highlight=False,
    )


_TIERS = ("L1", "L2", "L3")
_BARS = "▁▂▃▄▅▆▇█"


def _tier_table(queries: dict[str, Any]) -> Table:
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


def _l1_line(l1: dict[str, Any] | None, queries: dict[str, Any]) -> str:
    """The L1 cache in two lines; the hit rate is lifetime (the L1 tier's share of queries)."""
    if l1 is None:
        return "L1 cache: off"
    total, hits = queries["total"], queries.get("L1", {}).get("count", 0)
    rate = f"{hits / total:.0%} ({hits} of {total} queries)" if total else "n/a (no queries yet)"
    m = l1["matches"]
    return (
        f"L1 cache: {l1['entries']} / {l1['capacity']} entries, {l1['hot']} hot; "
        f"hit rate {rate}\n  this process: matches exact {m['exact']}, bag {m['bag']}, "
        f"fuzzy {m['fuzzy']}; {l1['evictions']} evicted, {l1['invalidated']} invalidated"
    )


def _ms(value: float) -> str:
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def _median_bin(counts: list[int]) -> str:
    """The tenth of [0, 1] holding the median confidence, e.g. ``0.7-0.8``."""
    total, seen = sum(counts), 0
    for i, n in enumerate(counts):
        seen += n
        if total and seen * 2 >= total:
            return f"{i / 10:.1f}-{(i + 1) / 10:.1f}"
    return "-"


def _spark(counts: list[int]) -> str:
    """One character per bin: a bar scaled to the fullest bin, a dot for an empty one."""
    top = max(counts, default=0)
    return "".join(_BARS[max(0, -(-n * len(_BARS) // top) - 1)] if n else "·" for n in counts)


@app.command()
def get(
    doc_id: str = typer.Argument(..., help="The document's id."),
    store: Path | None = StoreOpt,
    config: Path | None = ConfigOpt,
    namespace: str = NamespaceOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Print a stored document whole: its id, time, metadata and text.

    The local form of ``GET /v1/documents/{id}``.
    """
    with _open(store, config, namespace=namespace, read_only=True) as p:
        doc = p.get(doc_id)
    if as_json:
        _print_json(document_json(doc))
        return
    table = Table(show_header=False)
    table.add_row("id", escape(doc.id))
    table.add_row("timestamp", str(doc.timestamp.isoformat() if doc.timestamp else "-"))
    for key, value in doc.metadata.items():
        table.add_row(escape(f"metadata.{key}"), escape(json.dumps(value, default=str)))
    console.print(table)
    console.print(doc.text, markup=False, highlight=False)


@app.command()
def delete(
    doc_id: str = typer.Argument(..., help="The document's id."),
    store: Path | None = StoreOpt,
    config: Path | None = ConfigOpt,
    namespace: str = NamespaceOpt,
) -> None:
    """Delete a document and all its passages (an error if there is no such document).

    The local form of ``DELETE /v1/documents/{id}``.
    """
    with _open(store, config, namespace=namespace, must_exist=True) as p:
        removed = p.delete(doc_id)
    console.print(f"deleted {escape(doc_id)} ({removed} passages)", highlight=False)


@app.command("config")
def show_config(
    store: Path | None = StoreOpt,
    config: Path | None = ConfigOpt,
    namespace: str = NamespaceOpt,
) -> None:
    """Print the store's effective config as JSON, secrets masked.

    The saved config with ``--config`` (or ``./pensive.toml``) and ``PENSIVE_*`` variables
    applied, as the store opens with it. The local form of ``GET /v1/config``.
    """
    from .config import redacted

    with _open(store, config, namespace=namespace, read_only=True) as p:
        _print_json(redacted(p.config))


@app.command()
def health(
    store: Path | None = StoreOpt,
    config: Path | None = ConfigOpt,
    namespace: str = NamespaceOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Check that the store opens (read-only, beside a writer) and print what it holds.

    Exit code 0 and ``ok ...`` when it opens, 1 with the reason when it does not. The local
    form of ``GET /health/live`` and ``GET /health/ready``.
    """
    folder = _folder(store, namespace)
    try:
        with _open(store, config, namespace=namespace, read_only=True) as p:
            info = p.stats()
            sessions = len(p.conversations())
    except StorageError as exc:  # damaged or unreadable: which store, then why
        raise PensiveError(f"cannot open the store at {folder}: {exc}") from None
    except PensiveError:
        raise
    except Exception as exc:  # a damaged file, a permission: the reason, not a traceback
        raise PensiveError(
            f"cannot open the store at {folder}: {type(exc).__name__}: {exc}"
        ) from None
    report = {
        "status": "ok",
        "store": str(folder),
        "namespace": namespace,
        "documents": info["documents"],
        "chunks": info["chunks"],
        "vectors": info["vectors"],
        "sessions": sessions,
        "commit": info["commit"],
    }
    if as_json:
        _print_json(report)
        return
    console.print(
        f"ok: {folder} (namespace {namespace}): {report['documents']} documents, "
        f"{report['chunks']} passages, {report['vectors']} vectors, {sessions} sessions",
        markup=False,
        highlight=False,
    )


@app.command()
def reindex(
    to: str = typer.Option(
        ..., "--to", help="The backend to move to: faiss, chroma, pinecone, ..."
    ),
    store: Path | None = StoreOpt,
    config: Path | None = typer.Option(
        None, "--config", "-c", help="A pensive.toml whose backend.NAME section to use."
    ),
    namespace: str | None = typer.Option(None, help="Namespace in the new backend."),
    settings: list[str] = typer.Option(
        [], "--set", help="KEY=VALUE for the new backend's section, e.g. --set port=8000."
    ),
) -> None:
    """Move the dense index to another backend from the stored vectors (no re-embedding)."""
    from .config import load_config
    from .engine import Pensive

    options: dict[str, Any] = {}
    if config is not None:
        section = load_config(str(config)).backend.model_dump().get(to)
        if isinstance(section, dict):
            options.update(section)
    for item in settings:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise PensiveError(f"--set takes KEY=VALUE, got {item!r}")
        options[key.strip()] = value.strip()
    folder = store or Path("pensive-data")
    if not (folder / "pensive.sqlite").is_file():
        raise NotFoundError(f"no Pensive store at {folder}")
    with Pensive(folder) as p:  # the saved config: the store's own backend is the source
        before = p.stats()["vectors"]
        report = p.reindex(to, options or None, namespace=namespace)
        after = p.stats()["vectors"]
    console.print(
        f"moved {report['vectors']} vectors from {report['from']} to {report['to']} "
        f"in {report['seconds']:.1f}s ({before} before, {after} after"
        + (f", {report['embedded']} embedded" if report["embedded"] else "")
        + ")"
    )


@app.command()
def migrate(
    to: str = typer.Option(
        ..., "--to", help="The storage engine to move to: postgres or embedded."
    ),
    store: Path | None = StoreOpt,
    config: Path | None = ConfigOpt,
    namespace: str = NamespaceOpt,
    dsn: str | None = typer.Option(
        None,
        "--dsn",
        help="The Postgres connection string (--to postgres); without a password "
        "(PGPASSWORD or ~/.pgpass). Default: [storage] dsn or PENSIVE_STORAGE__DSN.",
    ),
    schema: str | None = typer.Option(
        None, "--schema", help="The Postgres schema of the store (default: pensive)."
    ),
) -> None:
    """Copy the store to another storage engine (no re-embedding), compare the copy's
    counts and answers with the original's, then mark the original as moved."""
    from .storage.migrate import migrate_store

    folder = _folder(store, namespace)
    config = _config_path(config)
    options = {"dsn": dsn, "schema_name": schema} if to == "postgres" else {}
    options = {k: v for k, v in options.items() if v}  # (else PENSIVE_STORAGE__DSN, the default)
    if not _exists(folder, config):
        raise NotFoundError(f"no Pensive store at {folder} to migrate")
    report = migrate_store(folder, to, config=str(config) if config else None, storage=options)
    console.print(
        f"moved {report['documents']} documents, {report['passages']} passages and "
        f"{report['vectors']} vectors to the {to} engine in {report['seconds']:.1f}s "
        f"({report['embedded']} embedded again); {report['questions']} questions answered "
        "alike; the old copy now opens read-only",
        markup=False,
        highlight=False,
    )


@app.command()
def verify(
    store: Path | None = StoreOpt,
    config: Path | None = ConfigOpt,
    namespace: str = NamespaceOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Check every file of the store (checksums, SQLite quick_check, counts); writes nothing.

    Exit code 0 and ``ok`` when nothing is damaged; 2 and one line per damaged file when
    something is (``pensive repair`` rebuilds the indexes from the archive).
    """
    from .integrity import verify_store

    folder = _folder(store, namespace)
    config = _config_path(config)
    report = verify_store(folder, str(config) if config else None)
    if as_json:
        _print_json(report)
    elif report["ok"]:
        c = report["counts"]
        console.print(
            f"ok {folder}: {', '.join(report['checked'])} checked; {c['archive']} passages "
            f"indexed, BM25 {c['bm25']}, vectors {c['vectors']} ({report['seconds']:.2f}s)",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    else:
        for d in report["damaged"]:
            err_console.print(
                f"damaged {d['part']}: {d['problem']}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        err_console.print(
            f"run: pensive repair --store {folder}", markup=False, highlight=False, soft_wrap=True
        )
    if not report["ok"]:
        raise typer.Exit(2)


@app.command()
def repair(
    store: Path | None = StoreOpt,
    config: Path | None = ConfigOpt,
    namespace: str = NamespaceOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Rebuild the store's damaged indexes from its archive and say what was done.

    BM25 from the archived passages; the vectors from what the damaged index holds intact,
    embedding again only the documents that lost any; a damaged cache is moved aside. Exit
    code 0 when the store verifies clean afterwards, 2 when something is still damaged.
    """
    from .integrity import repair_store

    folder = _folder(store, namespace)
    config = _config_path(config)
    out = repair_store(folder, str(config) if config else None)
    if as_json:
        _print_json(out)
    elif not out["rebuilt"] and not out["moved_aside"] and out["before"]["ok"]:
        console.print(f"nothing to repair: {folder} verifies clean", markup=False, soft_wrap=True)
    else:
        console.print(
            f"repaired {folder}: rebuilt {', '.join(out['rebuilt']) or 'nothing'}; "
            f"{out['vectors_kept']} vectors kept, {out['reindexed']} document(s) indexed "
            f"again; moved aside: {', '.join(out['moved_aside']) or 'nothing'} "
            f"({out['seconds']:.1f}s)",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        removed = set(out.get("removed", ()))
        for doc in out["documents_damaged"]:
            what = "removed from the store" if doc in removed else "kept (its passages answer)"
            err_console.print(
                f"document {doc!r}: its archived text is damaged, {what}; ingest it again",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
    if not out["after"]["ok"]:
        for d in out["after"]["damaged"]:
            err_console.print(
                f"still damaged {d['part']}: {d['problem']}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        raise typer.Exit(2)


@app.command(
    context_settings={
        "allow_extra_args": True,
        "ignore_unknown_options": True,
        "help_option_names": [],
    }
)
def bench(
    name: str = typer.Argument(..., help="A module in benchmarks/, e.g. scifact."),
    args: list[str] | None = typer.Argument(None, help="Arguments passed to the benchmark."),
) -> None:
    """Run a benchmark module from a source checkout (``python -m benchmarks.NAME``)."""
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(f"benchmarks.{name}")
    except ModuleNotFoundError as exc:
        raise PensiveError(
            f"no benchmark {name!r} (run from the repository root, where benchmarks/ is)"
        ) from exc
    module.main(list(args or []))


chat = typer.Typer(
    no_args_is_help=True,
    help="Conversation memory: the sessions of a store, their turns, recall and context.",
)
app.add_typer(chat, name="chat")


def _session(p: Pensive, session_id: str, user: str | None = None) -> Conversation:
    """An existing session of the store (reading never registers one).

    Args:
        p: The open store.
        session_id: The session.
        user: The user it belongs to: a session without one is given it (``p`` must be
            writable); a session of another user is an error.

    Raises:
        NotFoundError: If the store has no session ``session_id``.
        InputError: If the session belongs to another user.
    """
    return p.conversation(session_id, user=user, create=False)


UserOpt = typer.Option(
    None,
    "--user",
    "-u",
    help="The session's user: given to a session without one (opens the store for writing).",
)


@chat.command("list")
def chat_list(
    user: str | None = typer.Option(None, "--user", "-u", help="Only this user's sessions."),
    store: Path | None = StoreOpt,
    config: Path | None = ConfigOpt,
    namespace: str = NamespaceOpt,
    as_json: bool = JsonOpt,
) -> None:
    """List the sessions, oldest first: id, user, turns (``--json``: the ids).

    The local form of ``GET /v1/conversations``.
    """
    with _open(store, config, namespace=namespace, read_only=True) as p:
        ids = p.conversations(user=user)
        if as_json:
            _print_json({"sessions": ids})
            return
        rows = []
        for sid in ids:
            conv = p.conversation(sid)
            rows.append({"session_id": sid, "user": conv.user, "turns": len(conv)})
    table = Table(title=f"{len(rows)} sessions")
    for col in ("session", "user", "turns"):
        table.add_column(col, justify="right" if col == "turns" else "left")
    for row in rows:
        table.add_row(
            escape(str(row["session_id"])), escape(str(row["user"] or "-")), str(row["turns"])
        )
    console.print(table)


@chat.command("add")
def chat_add(
    session_id: str = typer.Argument(..., help="The session (created on its first turn)."),
    text: str = typer.Argument(..., help="What was said."),
    role: str = typer.Option(
        "user", "--role", "-r", help="Who spoke: user, assistant, system (or a speaker's name)."
    ),
    user: str | None = typer.Option(
        None, "--user", "-u", help="The user the session belongs to (for --scope user)."
    ),
    timestamp: str | None = typer.Option(
        None, "--timestamp", help="When, as ISO-8601 (default: now; naive means UTC)."
    ),
    metadata: str | None = typer.Option(
        None, "--metadata", help="Fields returned with the turn, a JSON object: '{\"mood\": 3}'."
    ),
    store: Path | None = StoreOpt,
    config: Path | None = ConfigOpt,
    namespace: str = NamespaceOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Remember one turn of a session.

    The local form of ``POST /v1/conversations/{sid}/turns``.
    """
    when = _time(timestamp, "--timestamp")
    meta = _json_object(metadata, "--metadata")
    with _open(store, config, namespace=namespace) as p:
        turn = p.conversation(session_id, user=user).add(role, text, timestamp=when, metadata=meta)
    if as_json:
        _print_json({"session_id": session_id, "turn": turn_json(turn)})
        return
    shift = ", a new topic" if turn.shift else ""
    console.print(
        f"added turn {turn.id} (#{turn.seq}, {turn.role}) to session {session_id}{shift}",
        markup=False,
        highlight=False,
    )


@chat.command("turns")
def chat_turns(
    session_id: str = typer.Argument(..., help="The session."),
    limit: int | None = typer.Option(None, "--limit", "-l", min=0, help="Only the last N turns."),
    store: Path | None = StoreOpt,
    config: Path | None = ConfigOpt,
    namespace: str = NamespaceOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Print a session's turns in order.

    The local form of ``GET /v1/conversations/{sid}/turns``.
    """
    with _open(store, config, namespace=namespace, read_only=True) as p:
        conv = _session(p, session_id)
        turns, owner = conv.turns(limit), conv.user
    if as_json:
        _print_json(
            {"session_id": session_id, "user": owner, "turns": [turn_json(t) for t in turns]}
        )
        return
    table = Table(title=f"session {escape(session_id)}: {len(turns)} turns")
    for col in ("seq", "time", "role", "text"):
        table.add_column(col, overflow="fold" if col == "text" else "ellipsis")
    for t in turns:
        when = t.timestamp.isoformat(timespec="seconds")
        table.add_row(str(t.seq), when, escape(t.role), escape(t.text))
    console.print(table)


@chat.command("recall")
def chat_recall(
    session_id: str = typer.Argument(..., help="The session."),
    query: str = typer.Argument(..., help="The question (or the user's new message)."),
    k: int = typer.Option(5, "--k", "-k", help="How many turns."),
    scope: str | None = typer.Option(
        None,
        "--scope",
        help="session (this session) or user (all of its user's sessions). Default: session, "
        "widened after a topic shift.",
    ),
    as_of: str | None = typer.Option(None, "--as-of", help="Only turns at or before this time."),
    user: str | None = UserOpt,
    store: Path | None = StoreOpt,
    config: Path | None = ConfigOpt,
    namespace: str = NamespaceOpt,
    as_json: bool = JsonOpt,
) -> None:
    """The turns that bear on a question, best first.

    The local form of ``POST /v1/conversations/{sid}/recall``.
    """
    cutoff = _time(as_of, "--as-of")
    with _open(store, config, namespace=namespace, read_only=user is None, must_exist=True) as p:
        conv = _session(p, session_id, user)
        hits = conv.recall(query, k=k, scope=scope, as_of=cutoff)  # type: ignore[arg-type]
    if as_json:
        _print_json({"session_id": session_id, "query": query, "hits": [hit_json(h) for h in hits]})
        return
    table = Table(title=f"{len(hits)} turns recalled")
    for col in ("rank", "score", "session", "seq", "role", "time", "text"):
        table.add_column(col, overflow="fold" if col == "text" else "ellipsis")
    for i, h in enumerate(hits, start=1):
        m = h.metadata
        when = h.timestamp.isoformat(timespec="seconds") if h.timestamp else "-"
        table.add_row(
            str(i),
            f"{h.score:.4f}",
            escape(str(m.get("session_id", session_id))),
            str(m.get("seq", "")),
            escape(str(m.get("role", ""))),
            when,
            escape(h.text),
        )
    console.print(table)


@chat.command("context")
def chat_context(
    session_id: str = typer.Argument(..., help="The session."),
    query: str = typer.Argument(..., help="The question the context is for."),
    budget: int = typer.Option(2000, "--budget", "-b", min=1, help="Token budget."),
    user: str | None = UserOpt,
    store: Path | None = StoreOpt,
    config: Path | None = ConfigOpt,
    namespace: str = NamespaceOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Print the prompt-ready context for a question, within a token budget.

    The local form of ``POST /v1/conversations/{sid}/context``; ``--json`` adds the tokens it
    takes and the budget.
    """
    with _open(store, config, namespace=namespace, read_only=user is None, must_exist=True) as p:
        built = _session(p, session_id, user).build(query, budget)
    if as_json:
        _print_json({"text": built.text, "tokens": built.tokens, "budget": built.budget})
        return
    typer.echo(built.text)


@chat.command("clear")
def chat_clear(
    session_id: str = typer.Argument(..., help="The session."),
    store: Path | None = StoreOpt,
    config: Path | None = ConfigOpt,
    namespace: str = NamespaceOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Forget a whole session: its turns, index and summaries (the session stays, empty).

    The local form of ``DELETE /v1/conversations/{sid}``.
    """
    with _open(store, config, namespace=namespace, must_exist=True) as p:
        n = _session(p, session_id).clear()
    if as_json:
        _print_json({"cleared": n})
        return
    console.print(f"cleared session {session_id}: {n} turns forgotten", markup=False)


@app.command()
def serve(
    store: Path | None = StoreOpt,
    config: Path | None = ConfigOpt,
    host: str | None = typer.Option(
        None, "--host", help="Address to listen on (default: the config's server.host)."
    ),
    port: int | None = typer.Option(
        None, "--port", "-p", min=0, max=65535, help="Port (default: the config's server.port)."
    ),
    keys: Path | None = typer.Option(
        None, "--keys", help="API keys file (else $PENSIVE_API_KEYS)."
    ),
    no_auth: bool = typer.Option(
        False, "--no-auth", help="Accept requests without an API key (the default namespace)."
    ),
) -> None:
    """Run the HTTP service on the store: the API, health checks and the dashboard.

    Needs the server extra (FastAPI and uvicorn).
    """
    try:
        from .server import run
    except ModuleNotFoundError as exc:
        if (exc.name or "").startswith("pensive_core"):
            raise
        raise PensiveError(
            f"pensive serve needs the {exc.name!r} package, which is not installed. "
            'Install it with: pip install "pensive[server]"'
        ) from None
    config = _config_path(config)
    run(
        store=store or Path("pensive-data"),
        config=config,
        host=host,
        port=port,
        keys_file=keys,
        no_auth=no_auth,
    )


app.command("mcp")(mcp_command)  # in its own module: this file is near its size limit


def main(args: list[str] | None = None) -> None:
    """Console-script entry point: run the app, turning Pensive errors into one line.

    Args:
        args: The arguments (default: ``sys.argv[1:]``).
    """
    try:
        code = app(args=args, standalone_mode=False)
    except PensiveError as exc:
        err_console.print("[red]error:[/]", escape(str(exc)), highlight=False, soft_wrap=True)
        raise SystemExit(1) from None
    except (typer.Abort, KeyboardInterrupt):
        err_console.print("aborted")
        raise SystemExit(130) from None
    except Exception as exc:
        # click's usage errors (a missing argument, an unknown option, no arguments: the help).
        # Matched by shape, not class: typer 0.29 raises those of its own copy of click.
        exit_code, show = getattr(exc, "exit_code", None), getattr(exc, "show", None)
        if isinstance(exit_code, int) and callable(show):
            show()
            raise SystemExit(exit_code) from None
        raise
    if isinstance(code, int) and code:  # typer.Exit(code), returned when not standalone
        raise SystemExit(code)


if __name__ == "__main__":
    main()
