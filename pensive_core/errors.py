"""One error tree for everything Pensive raises on purpose.

``PensiveError`` is the root; each subclass names a kind of fault the caller can act on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "PensiveError",
    "ConfigError",
    "BackendError",
    "EmbedderError",
    "MissingDependencyError",
    "NotFoundError",
    "InputError",
    "SchemaVersionError",
    "StorageError",
    "CorruptStoreError",
    "IngestGroupsError",
]


class PensiveError(Exception):
    """Root of every error Pensive raises deliberately."""


class ConfigError(PensiveError, ValueError):
    """A configuration value or key is wrong; the message names it and the fix."""


class SchemaVersionError(ConfigError):
    """A store on disk was written by an incompatible version of Pensive."""


class BackendError(PensiveError):
    """A vector backend failed or is unreachable; the message names the address tried."""


class EmbedderError(PensiveError):
    """An embedding worker process died or failed; the message names its exit code and the
    tail of its stderr."""


class MissingDependencyError(PensiveError, ImportError):
    """An optional dependency is not installed; the message names the extra to install.

    Args:
        package: The import name that failed.
        extra: The ``pensive[...]`` extra that provides it.
        purpose: What the dependency is needed for.
    """

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        self.package = package
        self.extra = extra
        super().__init__(
            f"{purpose} needs the '{package}' package, which is not installed. "
            f'Install it with: pip install "pensive[{extra}]"'
        )


class NotFoundError(PensiveError, KeyError):
    """A document, chunk or session id does not exist in the store."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class InputError(PensiveError, ValueError):
    """The caller passed input Pensive cannot use (empty text, wrong type, broken file)."""


class StorageError(PensiveError, OSError):
    """The disk failed the store: it is full, read-only, or an I/O error occurred. The message
    names the store, what was being done and the fix; nothing half written is left behind.

    Args:
        message: What happened, to whom, and what to do.
        errno: The operating system's error number (``errno.ENOSPC``, ``EROFS``, ``EIO``...),
            when the failure came from one; ``except OSError as e: e.errno`` still works.
        file: The file the failure concerns, when one is known.
        stored: For a failed ingest: the documents written to the archive before the
            failure; they are indexed in full when the store is next opened for writing (or
            at its next write in this process). Every other document of the call is absent
            (a replaced document keeps its previous version).

    Attributes:
        stored: As given (a tuple).
    """

    def __init__(
        self,
        message: str,
        *,
        errno: int | None = None,
        file: str | None = None,
        stored: tuple[str, ...] | list[str] = (),
    ) -> None:
        super().__init__(message)
        self.errno = errno
        self.filename = file
        self.stored = tuple(stored)

    def __str__(self) -> str:  # OSError would print "[Errno n] None: file" once errno is set
        return str(self.args[0]) if self.args else ""


class CorruptStoreError(StorageError):
    """A store file does not hold what its manifest says (a checksum or structure mismatch):
    the message names the file; ``pensive repair`` rebuilds what the archive can rebuild."""


class IngestGroupsError(PensiveError):
    """Some groups of a :meth:`Pensive.ingest_many <pensive_core.Pensive.ingest_many>` call
    failed; each of the others was ingested (see the method for what a failure leaves).

    Args:
        outcomes: Each group's :class:`~pensive_core.types.IngestReport`, or the exception
            that group raised, in the order the groups were given.

    Attributes:
        outcomes: As given (a list).
    """

    def __init__(self, outcomes: Sequence[Any]) -> None:
        self.outcomes = list(outcomes)
        failed = [(i, o) for i, o in enumerate(self.outcomes) if isinstance(o, BaseException)]
        what = "; ".join(f"group {i}: {type(o).__name__}: {o}" for i, o in failed[:3])
        super().__init__(
            f"{len(failed)} of {len(self.outcomes)} groups of documents failed ({what}); the "
            "others were ingested, and IngestGroupsError.outcomes holds each group's report "
            "or error"
        )
