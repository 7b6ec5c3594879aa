"""Namespaces: one Pensive store per tenant, in folders under one root.

The ``default`` namespace is the root store itself, so ``pensive ingest --store X`` and
``pensive serve --store X`` without API keys work on the same data. Every other namespace is
the store ``X/namespaces/NAME``. Names are checked against a strict pattern before they touch
the file system, so no name can reach outside the root.
"""

from __future__ import annotations

import re
from pathlib import Path

from .errors import InputError

__all__ = [
    "DEFAULT_NAMESPACE",
    "validate_namespace",
    "namespace_path",
    "list_namespaces",
    "hide_root",
]

DEFAULT_NAMESPACE = "default"
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
_FOLDER = "namespaces"


def validate_namespace(name: object) -> str:
    """Return ``name`` if it is a valid namespace name, else raise.

    Raises:
        InputError: Unless ``name`` is 1-63 lower-case letters, digits, ``_`` or ``-``, starting
            with a letter or digit.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InputError(
            f"namespace {name!r} is not valid: use 1-63 lower-case letters, digits, '_' or '-', "
            "starting with a letter or digit"
        )
    return name


def namespace_path(root: str | Path, name: str) -> Path:
    """The store folder of namespace ``name`` under ``root`` (``root`` itself for default)."""
    name = validate_namespace(name)
    root = Path(root).expanduser()
    return root if name == DEFAULT_NAMESPACE else root / _FOLDER / name


def list_namespaces(root: str | Path) -> list[str]:
    """The namespaces that have a store under ``root``, sorted (default first when present)."""
    root = Path(root).expanduser()
    out = [DEFAULT_NAMESPACE] if (root / "pensive.sqlite").is_file() else []
    folder = root / _FOLDER
    if folder.is_dir():
        out += sorted(
            p.name
            for p in folder.iterdir()
            if _NAME.fullmatch(p.name) and (p / "pensive.sqlite").is_file()
        )
    return out


def hide_root(message: str, root: str | Path) -> str:
    """``message`` with every path under ``root`` cut out, for a remote client: where a
    server keeps its files is no client's business.

    ``"no document with id 'a' in /srv/data/namespaces/x"`` becomes ``"no document with id
    'a'"``; a path elsewhere in a message becomes ``<store>``.
    """
    root = Path(root)
    for where in {str(root), str(root.resolve())}:
        # the whole path under the root goes (a namespace's store is root/namespaces/NAME)
        path = re.escape(where) + r"""[^\s'"]*"""
        message = re.sub(" in " + path, "", message)
        message = re.sub(path, "<store>", message)
    return message
