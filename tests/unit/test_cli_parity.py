"""CLI parity (issue 10): everything ``pensive serve`` does over HTTP, the CLI does locally.

``ROUTES`` maps each route of the HTTP service to the command that does the same on the local
store. The tests hold both sides to it: every command named exists in the typer app and takes
``--namespace`` (a route's namespace comes from its API key); and, when the server package is
there, every route the app serves is in the table and every route in the table is served, so a
route added, renamed or removed on either side fails here until the table is brought along.
"""

from __future__ import annotations

import importlib.util
import re
from typing import Any

import pytest
import typer

from pensive_core.cli import app
from tests.conftest import HASH_CONFIG

# (method, path) -> the command doing it locally. Path parameters are compared by position
# only ("{id}" matches the server's "{doc_id:path}").
ROUTES: dict[tuple[str, str], str] = {
    ("POST", "/v1/query"): "query",  # --as-of, --filter, --json
    ("POST", "/v1/explain"): "explain",  # --expect, --budget, --json
    ("POST", "/v1/documents"): "ingest",  # JSON documents: a .jsonl file, one a line
    ("POST", "/v1/documents/upload"): "ingest",  # files and folders
    ("GET", "/v1/documents/{id}"): "get",
    ("DELETE", "/v1/documents/{id}"): "delete",
    ("POST", "/v1/reembed"): "reembed",  # a job on the server; a progress bar here
    ("GET", "/v1/jobs"): "ingest",  # the CLI's ingest is synchronous, with a progress bar
    ("GET", "/v1/jobs/{id}"): "ingest",
    ("GET", "/v1/stats"): "stats",  # --json
    ("GET", "/v1/config"): "config",
    ("GET", "/health/live"): "health",
    ("GET", "/health/ready"): "health",
    ("GET", "/v1/dashboard"): "stats",  # the tier table
    ("GET", "/dashboard"): "stats",
    ("GET", "/v1/conversations"): "chat list",
    ("POST", "/v1/conversations/{sid}/turns"): "chat add",
    ("GET", "/v1/conversations/{sid}/turns"): "chat turns",
    ("POST", "/v1/conversations/{sid}/recall"): "chat recall",
    ("POST", "/v1/conversations/{sid}/context"): "chat context",
    ("DELETE", "/v1/conversations/{sid}"): "chat clear",
}

_SERVED = ("/v1/", "/health", "/dashboard")  # the service's own routes (not /docs, /openapi)


def _command(path: str) -> Any:
    """The click command of a ``"chat add"``-style path, through the typer app.

    Groups are found by their ``commands`` mapping, not by class: typer 0.29 builds them from
    its own copy of click, whose classes are not ``click.Group``.
    """
    cmd = typer.main.get_command(app)
    for name in path.split():
        commands = getattr(cmd, "commands", None)
        assert commands is not None, f"{cmd.name!r} has no subcommands ({path!r})"
        assert name in commands, f"no command {path!r}: {name!r} is missing"
        cmd = commands[name]
    return cmd


def _shape(path: str) -> str:
    return re.sub(r"\{[^}]*\}", "{}", path)


@pytest.mark.parametrize("command", sorted(set(ROUTES.values())))
def test_every_command_of_the_table_exists_and_takes_a_namespace(command):
    cmd = _command(command)
    options = {opt for param in cmd.params for opt in getattr(param, "opts", [])}
    assert {"--namespace", "-n"} <= options, f"{command!r} has no --namespace/-n"
    assert {"--store", "-s", "--config", "-c"} <= options


def test_serve_exists_with_the_servers_options():
    options = {opt for param in _command("serve").params for opt in getattr(param, "opts", [])}
    assert {"--store", "--config", "--host", "--port", "--keys", "--no-auth"} <= options


def _served_routes(tmp_path) -> set[tuple[str, str]]:
    """(method, path shape) of every route the server's app serves (skip: no server yet)."""
    if importlib.util.find_spec("pensive_core.server") is None:
        pytest.skip("pensive_core.server does not exist yet")
    pytest.importorskip("fastapi")
    from pensive_core.server import create_app

    api = create_app(tmp_path / "store", HASH_CONFIG, no_auth=True)  # starts nothing
    served = set()
    for route in api.routes:
        path = getattr(route, "path", "")
        if not path.startswith(_SERVED):
            continue
        methods = getattr(route, "methods", None) or {"GET"}  # a mount: pages, GET
        served |= {(m, _shape(path)) for m in methods if m != "HEAD"}
    return served


def test_every_route_of_the_server_has_a_command(tmp_path):
    table = {(m, _shape(p)) for m, p in ROUTES}
    missing = sorted(_served_routes(tmp_path) - table)
    assert not missing, f"routes with no CLI counterpart in ROUTES: {missing}"


def test_every_route_of_the_table_is_served(tmp_path):
    stale = sorted({(m, _shape(p)) for m, p in ROUTES} - _served_routes(tmp_path))
    assert not stale, f"ROUTES names routes the server does not have: {stale}"
