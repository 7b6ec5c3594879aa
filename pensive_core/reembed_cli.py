"""The ``pensive reembed`` command: blue/green re-embedding with a progress bar (the work is
:func:`pensive_core.ingest.run_reembed`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from .errors import InputError, NotFoundError, PensiveError
from .namespaces import DEFAULT_NAMESPACE, namespace_path

__all__ = ["reembed_command"]


def reembed_command(
    embedder: str | None = typer.Option(
        None,
        "--embedder",
        "-e",
        help="The new model: minilm, hash, a sentence-transformers folder, or module:Class.",
    ),
    rollback: bool = typer.Option(
        False, "--rollback", help="Switch back to the index the last re-embed replaced."
    ),
    discard_old: bool = typer.Option(
        False,
        "--discard-old",
        help="Drop the replaced index (with --embedder: at the switch); no rollback after.",
    ),
    status: bool = typer.Option(
        False, "--status", help="Say where re-embedding stands (a run in progress, a kept index)."
    ),
    batch_size: int = typer.Option(
        256, "--batch-size", min=1, help="Passages embedded per checkpointed batch."
    ),
    store: Path | None = typer.Option(
        None,
        "--store",
        "-s",
        envvar="PENSIVE_HOME",
        help="Store folder (default ./pensive-data, or $PENSIVE_HOME).",
    ),
    config: Path | None = typer.Option(
        None,
        "--config",
        "-c",
        help="A pensive.toml to open the store with (default: the config saved in the store; "
        "a ./pensive.toml is not read, its [embedder] names the model being replaced).",
    ),
    namespace: str = typer.Option(
        DEFAULT_NAMESPACE, "--namespace", "-n", help="Namespace (default: the store itself)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Re-embed every passage with another model, blue/green: the old index answers queries
    until one atomic switch on a clean finish. Killed or failed, run it again: it resumes.

    Exit code 1 when a document failed (nothing is published; the report names it).
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .engine import Pensive
    from .ingest.reembed import reembed_status

    console, err_console = Console(), Console(stderr=True)
    folder = namespace_path(store or Path("pensive-data"), namespace)
    if not (folder / "pensive.sqlite").is_file():
        raise NotFoundError(f"no Pensive store at {folder}")
    if status and (embedder or rollback or discard_old):
        raise InputError("--status goes alone")
    with Pensive(folder, config=str(config) if config else None) as p:
        if status:
            report = reembed_status(p.components)
        elif embedder is None:
            report = p.reembed(rollback=rollback, discard_old=discard_old)
        else:
            with Progress(
                TextColumn("[bold]re-embedding"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("docs"),
                TimeElapsedColumn(),
                console=err_console,
                transient=False,
            ) as bar:
                task = bar.add_task("reembed", total=None)

                def progress(done: int, total: int) -> None:
                    bar.update(task, completed=done, total=total)

                report = p.reembed(
                    embedder,
                    batch_size=batch_size,
                    progress=progress,
                    discard_old=discard_old,
                    rollback=rollback,
                )
    if as_json:
        console.print_json(json.dumps(report))
    else:
        console.print(summary(report), markup=False, highlight=False, soft_wrap=True)
    if report.get("failed"):
        names = ", ".join(f"{f['doc_id']} ({f['error']})" for f in report["failed"][:10])
        raise PensiveError(
            f"{len(report['failed'])} document(s) could not be embedded with {report['to']}: "
            f"{names}; nothing was published (the store still answers with {report['from']}). "
            "Fix or delete them, then run the command again: it resumes"
        )


def summary(report: dict[str, Any]) -> str:
    """One line saying what a ``reembed`` report means."""
    if "run" in report:  # --status
        run, prev = report["run"], report["previous"]
        now = f"embedder {(report['embedder'] or {}).get('name')}"
        going = f"; a run to {run['to']}: {run['done']} documents done" if run else ""
        if run and run.get("damaged"):
            going = f"; a run to {run['to']}: its checkpoint is damaged (the next run starts over)"
        kept = f"; kept for rollback: {prev['embedder']['name']} in {prev['place']}" if prev else ""
        return now + going + kept
    if "discarded" in report:
        where = report["discarded"]
        return f"discarded the old index {where}" if where else "no old index was kept"
    if "documents" not in report:  # a rollback
        return (
            f"rolled back to {report['place']} in {report['seconds']}s "
            f"({report['embedded']} passages embedded again)"
        )
    head = (
        f"re-embedded {report['documents']} documents ({report['passages']} passages) "
        f"from {report['from']} to {report['to']} in {report['seconds']}s"
    )
    if report["resumed_from"]:
        head += f", resumed after {report['resumed_from']} documents"
    if report["published"]:
        old = report.get("previous")
        return head + (f"; published, old index kept in {old}" if old else "; published")
    return head + "; not published"
