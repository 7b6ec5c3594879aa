"""API keys, each mapped to one namespace.

Keys come from a file (``--keys FILE``: a TOML table ``[keys]`` of ``"KEY" = "namespace"``) or
the environment (``PENSIVE_API_KEYS="KEY1=ns1,KEY2=ns2"``), never from ``pensive.toml``. Only
their SHA-256 digests are kept in memory, compared in constant time; a key is never logged.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Mapping
from pathlib import Path

import tomllib

from ..errors import ConfigError, InputError
from ..namespaces import validate_namespace

__all__ = ["KeyRing", "load_keys", "presented_key"]

_MIN_KEY = 16


class KeyRing:
    """Which namespace each API key may read and write.

    Args:
        keys: ``{key: namespace}``.

    Raises:
        ConfigError: On a key shorter than 16 characters or a bad namespace name.
    """

    def __init__(self, keys: Mapping[str, str]) -> None:
        self._digests: list[tuple[bytes, str]] = []
        for n, (key, ns) in enumerate(keys.items(), 1):
            if not isinstance(key, str) or len(key) < _MIN_KEY:
                raise ConfigError(
                    f"API key #{n} is shorter than {_MIN_KEY} characters; use a long random "
                    "key (python -c 'import secrets; print(secrets.token_urlsafe(32))')"
                )
            try:
                validate_namespace(ns)
            except InputError as exc:
                raise ConfigError(f"API key #{n}: {exc}") from None
            self._digests.append((_digest(key), ns))
        if not self._digests:
            raise ConfigError("no API keys given")

    def namespace(self, key: str) -> str | None:
        """The namespace of ``key``, or None for an unknown key (every entry is compared)."""
        digest = _digest(key)
        found = None
        for known, ns in self._digests:
            if hmac.compare_digest(known, digest):
                found = ns
        return found

    @property
    def namespaces(self) -> list[str]:
        """The namespaces some key maps to."""
        return sorted({ns for _, ns in self._digests})

    def __len__(self) -> int:
        return len(self._digests)

    def __repr__(self) -> str:  # never the keys
        return f"KeyRing({len(self)} keys, namespaces={self.namespaces})"


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def load_keys(
    path: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Read ``{key: namespace}`` from a keys file and/or ``PENSIVE_API_KEYS``.

    Raises:
        ConfigError: On an unreadable or malformed file or variable (the message never
            contains a key).
    """
    keys: dict[str, str] = {}
    if path is not None:
        p = Path(path).expanduser()
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read the keys file {p}: {type(exc).__name__}") from None
        table = data.get("keys")
        if not isinstance(table, dict) or set(data) != {"keys"}:
            raise ConfigError(
                f'the keys file {p} must hold one table [keys] of "KEY" = "namespace"'
            )
        for key, ns in table.items():
            if not isinstance(ns, str):
                raise ConfigError(f"the keys file {p}: every namespace must be a string")
            keys[key] = ns
    env = os.environ if environ is None else environ
    raw = env.get("PENSIVE_API_KEYS", "").strip()
    if raw:
        for n, item in enumerate(raw.split(","), 1):
            key, sep, ns = item.strip().rpartition("=")
            if not sep or not key or not ns:
                raise ConfigError(f"PENSIVE_API_KEYS entry #{n} is not KEY=namespace")
            keys[key] = ns.strip()
    return keys


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The API key a request presents: ``X-API-Key: KEY``, else ``Authorization: Bearer KEY``.

    Args:
        headers: The request's headers, either case-insensitive (Starlette's ``Headers``) or
            a plain mapping with lower-case names.

    Returns:
        The key, or None when the request presents none.
    """
    key = headers.get("x-api-key")
    if key:
        return key
    scheme, _, credentials = (headers.get("authorization") or "").partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return None
