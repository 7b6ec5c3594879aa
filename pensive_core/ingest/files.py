"""Files and folders as documents, for :meth:`Pensive.ingest_path
<pensive_core.Pensive.ingest_path>`: unreadable files and bad lines are skipped, with the
reason noted."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..errors import InputError
from ..loaders import iter_files, load_file
from ..types import Document

__all__ = ["check_paths", "documents_from"]


def check_paths(paths: Sequence[str | os.PathLike[str]]) -> None:
    """Raise before anything is read when a path is missing.

    Raises:
        InputError: If no path is given or one does not exist.
    """
    if not paths:
        raise InputError("ingest_path() needs at least one file or folder")
    for raw in paths:
        if not Path(raw).expanduser().exists():
            raise InputError(f"no such file or folder: {raw}")


def documents_from(
    paths: Sequence[str | os.PathLike[str]], errors: list[tuple[str, str]]
) -> Iterator[Document]:
    """The documents in ``paths`` (folders walked, hidden entries skipped); each file or line
    that cannot be read is appended to ``errors`` as ``(path, reason)``."""
    for raw in paths:
        root = Path(raw).expanduser()
        for f in iter_files(root):
            try:
                for item in load_file(f, root):
                    if isinstance(item, InputError):
                        errors.append((str(f), str(item)))
                    else:
                        yield item
            except (InputError, OSError) as exc:
                errors.append((str(f), str(exc)))
