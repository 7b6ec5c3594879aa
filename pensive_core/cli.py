"""The ``pensive`` command: ingest, query, stats, bench.

Errors are printed as one line (``error: ...``) with exit code 1, never as a traceback.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from .errors import PensiveError

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


def _open(store: Path | None, config: Path | None):  # type: ignore[no-untyped-def]
    from .engine import Pensive

    folder = store or Path("pensive-data")
    if config is None and Path("pensive.toml").exists():
        config = Path("pensive.toml")
    return Pensive(folder, config=str(config) if config else None)


@app.command()
def ingest(
    paths: list[Path] = typer.Argument(..., help="Files or folders (.txt .md .jsonl .html)."),
    store: Path | None = StoreOpt,
    config: Path | None = ConfigOpt,
) -> None:
    """Ingest files and folders into the store, with a progress bar."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .loaders import iter_files

    total = sum(1 for p in paths if p.exists() for _ in iter_files(p))
    with (
        _open(store, config) as p,
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
        report = p.ingest_path(*paths, progress=lambda n: bar.update(task, completed=n))
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
        err_console.print(f"[yellow]skipped[/] {detail}", highlight=False)


@app.command()
def query(
    text: str = typer.Argument(..., help="The question."),
    k: int = typer.Option(5, "--k", "-k", help="How many passages."),
    store: Path | None = StoreOpt,
    config: Path | None = ConfigOpt,
    width: int = typer.Option(100, help="Snippet length in characters."),
) -> None:
    """Answer a question from the store: a table of rank, score, tier, doc, snippet."""
    with _open(store, config) as p:
        res = p.query(text, k=k)
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
        table.add_row(str(i), f"{hit.score:.4f}", res.tier, hit.doc_id, sources, snippet)
    console.print(table)


@app.command()
def stats(store: Path | None = StoreOpt, config: Path | None = ConfigOpt) -> None:
    """Show what the store holds."""
    with _open(store, config) as p:
        info = p.stats()
    table = Table(show_header=False)
    for key, value in info.items():
        table.add_row(key, str(value))
    console.print(table)


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


def main() -> None:
    """Console-script entry point: run the app, turning Pensive errors into one line."""
    try:
        app(standalone_mode=False)
    except PensiveError as exc:
        err_console.print(f"[red]error:[/] {exc}", highlight=False)
        raise SystemExit(1) from None
    except (typer.Abort, KeyboardInterrupt):
        err_console.print("aborted")
        raise SystemExit(130) from None
    except Exception as exc:  # click usage errors
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            raise SystemExit(exc.exit_code) from None
        if isinstance(exc, click.exceptions.Exit):
            raise SystemExit(exc.exit_code) from None
        raise


if __name__ == "__main__":
    main()
