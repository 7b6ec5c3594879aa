"""The ``pensive explain`` command: where each expected document or passage ranked in every
stage of a question, and where it was lost (:mod:`pensive_core.explain`). In its own module,
registered from :mod:`pensive_core.cli`, which is near its size limit."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from .errors import InputError, NotFoundError
from .namespaces import DEFAULT_NAMESPACE, namespace_path

__all__ = ["explain_command"]


def explain_command(
    text: str = typer.Argument(..., help="The question."),
    expect: list[str] = typer.Option(
        ...,
        "--expect",
        "-e",
        help="A document id or passage id the answer should hold (repeat for more).",
    ),
    k: int = typer.Option(5, "--k", "-k", help="How many passages, as in pensive query."),
    budget: int | None = typer.Option(
        None,
        "--budget",
        "-b",
        min=1,
        help="Also check the prompt Conversation.build makes within this many tokens.",
    ),
    store: Path | None = typer.Option(
        None,
        "--store",
        "-s",
        envvar="PENSIVE_HOME",
        help="Store folder (default ./pensive-data, or $PENSIVE_HOME).",
    ),
    config: Path | None = typer.Option(None, "--config", "-c", help="A pensive.toml to apply."),
    namespace: str = typer.Option(
        DEFAULT_NAMESPACE,
        "--namespace",
        "-n",
        help="Namespace: its own store, under STORE/namespaces/NAME (default: the store itself).",
    ),
    as_of: str | None = typer.Option(
        None, "--as-of", help="Only documents timestamped at or before this ISO-8601 time."
    ),
    filters: str | None = typer.Option(
        None, "--filter", help="Metadata filter as a JSON object, as in pensive query."
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print JSON (what POST /v1/explain returns)."
    ),
) -> None:
    """Explain a question: each expected item's rank and score in every stage (dense, BM25,
    fusion, graph, temporal, rerank, L3, final hits, and the prompt at --budget), why a stage
    moved it, and where it was lost. Reads the store without changing it: no L1 answer is
    used or stored, nothing is learned or counted.

    The local form of ``POST /v1/explain``.
    """
    from .engine import Pensive
    from .timeutil import ensure_utc

    folder = namespace_path(store or Path("pensive-data"), namespace)
    where = None
    if filters is not None:
        try:
            where = json.loads(filters)
        except json.JSONDecodeError as exc:
            raise InputError(f"--filter is not valid JSON: {exc}") from None
        if not isinstance(where, dict):
            raise InputError(f"--filter must be a JSON object, got {type(where).__name__}")
    cutoff = ensure_utc(as_of) if as_of is not None else None
    if config is None and Path("pensive.toml").exists():
        config = Path("pensive.toml")
    try:
        p = Pensive(folder, config=str(config) if config else None, read_only=True)
    except NotFoundError:
        raise NotFoundError(
            f"no Pensive store at {folder} (create one with pensive ingest)"
        ) from None
    with p:
        ex = p.explain(text, expect, k, token_budget=budget, as_of=cutoff, filters=where)
    if as_json:
        typer.echo(json.dumps(ex.to_dict(), indent=2, ensure_ascii=False))
        return
    typer.echo(ex.render())
