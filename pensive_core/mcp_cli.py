"""The ``pensive mcp`` command's options (the server is :mod:`pensive_core.mcp_server`,
imported only when the command runs, so ``pensive`` starts without the server's imports)."""

from __future__ import annotations

from pathlib import Path

import typer

from .errors import ConfigError

__all__ = ["mcp_command"]


def mcp_command(
    store: Path | None = typer.Option(
        None,
        "--store",
        "-s",
        envvar="PENSIVE_HOME",
        help="Store folder (default ./pensive-data, or $PENSIVE_HOME).",
    ),
    config: Path | None = typer.Option(None, "--config", "-c", help="A pensive.toml to apply."),
    http: bool = typer.Option(
        False, "--http", help="Serve streamable HTTP at /mcp (needs API keys) instead of stdio."
    ),
    host: str | None = typer.Option(
        None, "--host", help="With --http: address (default: the config's server.host)."
    ),
    port: int | None = typer.Option(
        None, "--port", "-p", min=0, max=65535, help="With --http: port (default server.port)."
    ),
    keys: Path | None = typer.Option(
        None, "--keys", help="With --http: API keys file (else $PENSIVE_API_KEYS)."
    ),
) -> None:
    """Serve the store to MCP hosts as tools: search, get_document, ingest, delete, remember,
    recall, context, forget, stats.

    stdio by default (for a host that starts the command); --http serves streamable HTTP,
    where each API key reads and writes its own namespace. Needs the mcp extra.
    """
    from .mcp_server import run_http, run_stdio

    if config is None and Path("pensive.toml").exists():
        config = Path("pensive.toml")
    root = store or Path("pensive-data")
    source = str(config) if config else None
    if http:
        run_http(root, source, host=host, port=port, keys_file=keys)
        return
    if host is not None or port is not None or keys is not None:
        raise ConfigError("--host, --port and --keys go with --http")
    run_stdio(root, source)
