"""The ``pensive`` command: ingest, query, stats, reindex, bench.

Errors are printed as one line (``error: ...``) with exit code 1, never as a traceback.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.table import Table

from .errors import NotFoundError, PensiveError

if TYPE_CHECKING:
    from .engine import Pensive

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


def _open(store: Path | None, config: Path | None, *, read_only: bool = False) -> Pensive:
    """Open the store; ``read_only`` needs an existing store and works beside a writer."""
    from .engine import Pensive

    folder = store or Path("pensive-data")
    if config is None and Path("pensive.toml").exists():
        config = Path("pensive.toml")
    try:
        return Pensive(folder, config=str(config) if config else None, read_only=read_only)
    except NotFoundError:
        if not read_only:
            raise
        raise NotFoundError(
            f"no Pensive store at {folder} (create one with pensive ingest)"
        ) from None


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
    with _open(store, config, read_only=True) as p:
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
        if hit.superseded_by is not None:  # kept, demoted: say so beside the stale text
            when = f" on {hit.valid_to.date()}" if hit.valid_to is not None else ""
            snippet = f"(superseded{when} by {hit.superseded_by.split('#')[0]}) {snippet}"
        table.add_row(str(i), f"{hit.score:.4f}", res.tier, hit.doc_id, sources, snippet)
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
def stats(store: Path | None = StoreOpt, config: Path | None = ConfigOpt) -> None:
    """Show what the store holds and how its queries were answered (works beside a writer)."""
    with _open(store, config, read_only=True) as p:
        info = p.stats()
    table = Table(show_header=False)
    for key, value in info.items():
        if key not in ("queries", "l1", "l3", "graph"):
            table.add_row(key, str(value))
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
def reindex(
    to: str = typer.Option(
        ..., "--to", help="The backend to move to: faiss, chroma, pinecone, ..."
    ),
    store: Path | None = StoreOpt,
    config: Path | None = typer.Option(
        None, "--config", "-c", help="A pensive.toml whose [backend.NAME] section to use."
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
        err_console.print(f"[red]error:[/] {exc}", highlight=False, soft_wrap=True)
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
