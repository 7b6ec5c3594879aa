"""The HTTP service: ``pensive serve`` (needs ``pip install "pensive[server]"``).

Importing this package loads nothing heavy; :func:`create_app` and :func:`run` import FastAPI
and uvicorn when called.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, MissingDependencyError

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = ["create_app", "run"]


def create_app(store: str | os.PathLike[str], config: Any = None, **options: Any) -> FastAPI:
    """The FastAPI app serving the stores under ``store`` (see :mod:`pensive_core.server.app`)."""
    from .app import create_app as make

    return make(Path(store), config, **options)


def run(
    store: str | os.PathLike[str] | None = None,
    config: Any = None,
    *,
    host: str | None = None,
    port: int | None = None,
    keys_file: str | os.PathLike[str] | None = None,
    no_auth: bool = False,
    log_level: str = "info",
) -> None:
    """Serve until interrupted.

    Args:
        store: The root folder (default ``./pensive-data`` or ``$PENSIVE_HOME``).
        config: A ``pensive.toml`` path or dict; ``[server]`` sets host, port and limits.
        host: Overrides ``[server] host``.
        port: Overrides ``[server] port``.
        keys_file: A TOML file ``[keys] "KEY" = "namespace"``; ``PENSIVE_API_KEYS`` adds more.
        no_auth: Serve the default namespace without keys (loopback addresses only).
        log_level: uvicorn's log level.

    Raises:
        ConfigError: Without keys (unless ``no_auth``), or ``no_auth`` on a public address.
        MissingDependencyError: If the ``server`` extra is not installed.
    """
    from ..config import load_config, read_config_source
    from .keys import load_keys

    try:
        import uvicorn
    except ImportError as exc:
        raise MissingDependencyError("uvicorn", "server", "the HTTP service") from exc
    settings = load_config(read_config_source(config)).server
    host = host or settings.host
    port = settings.port if port is None else port
    keys = load_keys(keys_file)
    if no_auth and not _loopback(host):
        raise ConfigError(
            f"--no-auth serves every request to anyone who reaches {host}; without keys the "
            "server listens on loopback only (127.0.0.1, ::1, localhost)"
        )
    root = Path(store or os.environ.get("PENSIVE_HOME") or "pensive-data")
    app = create_app(root, config, keys=keys or None, no_auth=no_auth)
    uvicorn.run(app, host=host, port=port, log_level=log_level, server_header=False)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
