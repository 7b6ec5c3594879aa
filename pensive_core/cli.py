"""The ``pensive`` command: everything ``pensive serve`` offers over HTTP, done locally.

Documents: ``ingest``, ``query``, ``explain``, ``get``, ``delete``; the store: ``stats``, ``config``,
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
import sqlite3
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .cli_format import (
    HelpGroup,
    ingest_failure,
    ingest_summary,
    no_files_message,
    plural,
    print_json,
    query_notes,
    query_table,
    snippet_chars,
    stats_notes,
    terminal_width,
    tier_table,
    turn_time,
    turns_table,
    wrap_phrases,
)
from .errors import InputError, NotFoundError, PensiveError, StorageError
from .explain_cli import explain_command
from .mcp_cli import mcp_command
from .namespaces import DEFAULT_NAMESPACE, namespace_path
from .reembed_cli import reembed_command
from .wire import document_json, hit_json, result_json, turn_json

if TYPE_CHECKING:
    from .engine import Pensive
    from .memory.conversation import Conversation

app = typer.Typer(
    cls=HelpGroup,
    add_completion=False,
    no_args_is_help=True,
    help="Pensive: hybrid retrieval and memory for LLM applications.",
)
console = Console()
err_console = Console(stderr=True)


@app.callback()
def _start() -> None:
    """Pensive: hybrid retrieval and memory for LLM applications."""
    # Each run starts at the terminal's width (in process, a run's --width must not outlive it).
    console.width = err_console.width = terminal_width()


def _set_width(value: int | None) -> int | None:
    """``--width``: print at that many columns (the terminal's width when not given)."""
    if value is not None:
        console.width = err_console.width = terminal_width(value)
    return value


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
WidthOpt = typer.Option(
    None,
    "--width",
    "-w",
    min=40,
    callback=_set_width,
    help="Output width in columns (default: the terminal's, else $COLUMNS, else 80).",
)


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
    width: int | None = WidthOpt,
) -> None:
    """Ingest files and folders into the store, with a progress bar.

    The local form of ``POST /v1/documents`` (JSON documents: put them in a ``.jsonl`` file,
    one ``{"id", "text", "metadata", "timestamp"}`` a line) and ``/v1/documents/upload``. It
    returns when the documents are searchable, so the server's ``/v1/jobs`` has no counterpart.

    Exit code 0 when anything was taken in: added, updated, or found unchanged (ingesting the
    same files again is a success); files that could not be read are listed on stderr. Exit
    code 1 when nothing was: no loadable file under the paths (no store is created then), or
    every file skipped (empty, not UTF-8, unreadable, only bad JSONL lines); stderr says which.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .loaders import SUFFIXES, iter_files

    _folder(store, namespace)  # a bad name fails before any file is read
    for path in paths:
        if not path.exists():
            raise InputError(f"no such file or folder: {path}")
    total = sum(1 for p in paths for _ in iter_files(p))
    if not total:  # nothing to read: say so before a store is created for it
        ignored = sum(
            1
            for p in paths
            for _, _, names in os.walk(p)
            for n in names
            if not n.startswith(".") and Path(n).suffix.lower() not in SUFFIXES
        )
        raise InputError(no_files_message(ignored))
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
        wrap_phrases(ingest_summary(report, total), console.width),
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    for source, message in report.errors:
        detail = message if message.startswith(source) else f"{source}: {message}"
        err_console.print(f"[yellow]skipped[/] {escape(detail)}", highlight=False)
    failure = ingest_failure(report, total, 0)
    if failure is not None:
        raise InputError(failure)


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
    pins: list[str] = typer.Option([], "--pin", help="A document id to include (repeatable)."),
    as_json: bool = JsonOpt,
    width: int | None = WidthOpt,
    chars: int | None = typer.Option(
        None,
        "--snippet",
        min=20,
        help="Most characters per snippet (default: about three lines of its column).",
    ),
) -> None:
    """Answer a question from the store: a table of rank, score, tier, doc, sources, snippet.

    Each snippet is the passage's sentence sharing the most words with the question, with what
    follows it in its paragraph as far as it fits, clipped at a word ("…"). The local form of
    ``POST /v1/query``; ``--json`` prints the tier, confidence, latency and every hit whole
    (text, score, metadata, timestamp, which retrievers found it).
    """
    cutoff = _time(as_of, "--as-of")
    where = _json_object(filters, "--filter")
    with _open(store, config, namespace=namespace, read_only=True) as p:
        res = p.query(text, k=k, as_of=cutoff, filters=where, pins=pins or None)
    if as_json:
        print_json(result_json(res))
        return
    cols = console.width
    console.print(query_table(res, text, cols, chars or snippet_chars(cols)))
    for phrases in query_notes(res):
        console.print(wrap_phrases(phrases, cols), highlight=False, markup=False, soft_wrap=True)


@app.command()
def stats(
    store: Path | None = StoreOpt,
    config: Path | None = ConfigOpt,
    namespace: str = NamespaceOpt,
    as_json: bool = JsonOpt,
    width: int | None = WidthOpt,
) -> None:
    """Show what the store holds and how its queries were answered (works beside a writer).

    The local form of ``GET /v1/stats`` (``--json``) and of the dashboard (the tier table).
    """
    with _open(store, config, namespace=namespace, read_only=True) as p:
        info = p.stats()
    if as_json:
        print_json(info)
        return
    table = Table(show_header=False)
    for key, value in info.items():
        if key not in ("queries", "l1", "l3", "graph"):
            table.add_row(key, escape(str(value)))
    console.print(table)
    queries = info["queries"]
    if queries["total"]:
        console.print(tier_table(queries))
    else:
        console.print("queries: none yet")
    for phrases in stats_notes(info):
        console.print(wrap_phrases(phrases, console.width), highlight=False, soft_wrap=True)


@app.command()
def get(
    doc_id: str = typer.Argument(..., help="The document's id."),
    store: Path | None = StoreOpt,
    config: Path | None = ConfigOpt,
    namespace: str = NamespaceOpt,
    as_json: bool = JsonOpt,
    width: int | None = WidthOpt,
) -> None:
    """Print a stored document whole: its id, time, metadata and text.

    The local form of ``GET /v1/documents/{id}``.
    """
    with _open(store, config, namespace=namespace, read_only=True) as p:
        doc = p.get(doc_id)
    if as_json:
        print_json(document_json(doc))
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
    console.print(f"deleted {escape(doc_id)} ({plural(removed, 'passage')})", highlight=False)


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
        print_json(redacted(p.config))


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
        print_json(report)
        return
    console.print(
        f"ok: {folder} (namespace {namespace}): {plural(report['documents'], 'document')}, "
        f"{plural(report['chunks'], 'passage')}, {plural(report['vectors'], 'vector')}, "
        f"{plural(sessions, 'session')}",
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
    namespace: str | None = typer.Option(
        None,
        "--namespace",
        "-n",
        help="The namespace inside the new backend (the vector service's, not a store "
        "namespace; default: the current one).",
    ),
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
        print_json(report)
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
        print_json(out)
    elif not out["rebuilt"] and not out["sessions"] and out["before"]["ok"]:
        console.print(f"nothing to repair: {folder} verifies clean", markup=False, soft_wrap=True)
    else:
        rebuilt = out["rebuilt"] + [
            f"{s['store']}: {r}" for s in out["sessions"] for r in s["rebuilt"]
        ]
        console.print(
            f"repaired {folder}: rebuilt {', '.join(rebuilt) or 'nothing'}; "
            f"{out['vectors_kept']} vectors kept, {plural(out['reindexed'], 'document')} indexed "
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
    ctx: typer.Context,
    name: str = typer.Argument(..., help="A module in benchmarks/, e.g. scifact."),
    args: list[str] | None = typer.Argument(None, help="Arguments passed to the benchmark."),
) -> None:
    """Run a benchmark module from a source checkout (``python -m benchmarks.NAME``).

    Run it from the repository root, where benchmarks/ is. Every argument after NAME goes to
    the benchmark: ``pensive bench NAME --help`` prints the benchmark's own options.
    """
    import difflib

    # --help is not an option of this command (it would swallow the benchmark's own), so it
    # arrives here as the name: before a name, it is this command's help.
    known = sorted(
        f.stem
        for f in Path("benchmarks").glob("*.py")
        if not f.name.startswith("_") and "\ndef main(" in f.read_text(errors="replace")
    )
    if name in ("--help", "-h"):
        typer.echo(ctx.get_help())
        typer.echo(f"\nbenchmarks here: {', '.join(known)}" if known else _NO_BENCHMARKS)
        return
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(f"benchmarks.{name}")
    except ModuleNotFoundError as exc:
        if exc.name not in (f"benchmarks.{name}", "benchmarks"):  # the benchmark's own import
            raise PensiveError(
                f"benchmark {name!r} needs the {exc.name!r} package: "
                "pip install -r benchmarks/requirements.txt"
            ) from exc
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise PensiveError(f"no benchmark {name!r}{hint} ({_NO_BENCHMARKS})") from exc
    module.main(list(args or []))


_NO_BENCHMARKS = "run from the repository root, where benchmarks/ is"


chat = typer.Typer(
    cls=HelpGroup,
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
    width: int | None = WidthOpt,
) -> None:
    """List the sessions, oldest first: id, user, turns (``--json``: the ids).

    The local form of ``GET /v1/conversations``.
    """
    with _open(store, config, namespace=namespace, read_only=True) as p:
        ids = p.conversations(user=user)
        if as_json:
            print_json({"sessions": ids})
            return
        rows = []
        for sid in ids:
            conv = p.conversation(sid)
            rows.append({"session_id": sid, "user": conv.user, "turns": len(conv)})
    table = Table(title=plural(len(rows), "session"))
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
        print_json({"session_id": session_id, "turn": turn_json(turn)})
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
    width: int | None = WidthOpt,
) -> None:
    """Print a session's turns in order.

    The local form of ``GET /v1/conversations/{sid}/turns``.
    """
    with _open(store, config, namespace=namespace, read_only=True) as p:
        conv = _session(p, session_id)
        turns, owner = conv.turns(limit), conv.user
    if as_json:
        print_json(
            {"session_id": session_id, "user": owner, "turns": [turn_json(t) for t in turns]}
        )
        return
    title = f"session {escape(session_id)}: {plural(len(turns), 'turn')}"
    table = turns_table(title, ("seq", "time", "role", "text"))
    for t in turns:
        table.add_row(str(t.seq), turn_time(t.timestamp), escape(t.role), escape(t.text))
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
    width: int | None = WidthOpt,
) -> None:
    """The turns that bear on a question, best first.

    The local form of ``POST /v1/conversations/{sid}/recall``.
    """
    cutoff = _time(as_of, "--as-of")
    with _open(store, config, namespace=namespace, read_only=user is None, must_exist=True) as p:
        conv = _session(p, session_id, user)
        hits = conv.recall(query, k=k, scope=scope, as_of=cutoff)  # type: ignore[arg-type]
    if as_json:
        print_json({"session_id": session_id, "query": query, "hits": [hit_json(h) for h in hits]})
        return
    columns = ("rank", "score", "turn", "role", "time", "text")
    table = turns_table(f"{plural(len(hits), 'turn')} recalled", columns)
    for i, h in enumerate(hits, start=1):
        m = h.metadata
        table.add_row(
            str(i),
            f"{h.score:.4f}",
            escape(f"{m.get('session_id', session_id)} #{m.get('seq', '')}"),
            escape(str(m.get("role", ""))),
            turn_time(h.timestamp),
            escape(h.text),
        )
    console.print(table)


@chat.command("context")
def chat_context(
    session_id: str = typer.Argument(..., help="The session."),
    query: str = typer.Argument(..., help="The question the context is for."),
    budget: int = typer.Option(2000, "--budget", "-b", min=1, help="Token budget."),
    strategy: str | None = typer.Option(None, help="concatenate|weighted|recency|template|..."),
    template: str | None = typer.Option(None, help="qa|research|conversational|text|file"),
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
        built = _session(p, session_id, user).build(
            query, budget, strategy=strategy, template=template
        )
    if as_json:
        print_json({"text": built.text, "tokens": built.tokens, "budget": built.budget})
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
        print_json({"cleared": n})
        return
    console.print(f"cleared session {session_id}: {plural(n, 'turn')} forgotten", markup=False)


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
app.command("explain")(explain_command)
app.command("reembed")(reembed_command)


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
    except sqlite3.DatabaseError as exc:  # a file no layer above turned into a store error
        where = getattr(exc, "pensive_file", "") or "one of the store's SQLite files"
        why = f"{where} could not be read ({exc}); `pensive verify` lists what is damaged"
        err_console.print("[red]error:[/]", escape(why), highlight=False, soft_wrap=True)
        raise SystemExit(1) from None
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
