"""The input boundary: the checks every way in (the Python API, the HTTP service, the file
loaders) puts input through, so each refuses the same input with the same message, before
anything is written.

What passes:

- **Strings** encode as UTF-8: a lone surrogate (``"\\udc80"``, which JSON can carry as an
  escape and Python as a code point) is refused wherever a string is taken, since no store, index
  or response could hold it. U+0000 (NUL) is refused in identifiers (document ids, metadata keys;
  session ids, namespaces, users and turn roles refuse every control character): the tools and
  services an id passes through (URLs, terminals, remote vector stores, C string APIs) cut a
  string at NUL. In free text (document and turn text, metadata string values, queries) NUL is
  data and kept byte for byte. Right-to-left marks, zero-width characters and every other
  code point are valid and come back exactly as given.
- **Numbers** are finite: NaN, infinities (``1e400`` reads as one) and integers beyond the
  range of a float are refused in metadata and filters, since no filter could compare them.
- **Metadata** is a JSON object: string keys, and values that are strings, finite numbers,
  booleans, None, datetimes (stored as ISO-8601 UTC), lists or objects of the same, nested at
  most :data:`MAX_METADATA_DEPTH` deep.
- **Times** convert to UTC inside the range of a datetime (see :func:`~.timeutil.ensure_utc`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from .errors import InputError
from .timeutil import ensure_utc

__all__ = [
    "MAX_K",
    "MAX_METADATA_DEPTH",
    "MAX_QUERY_CHARS",
    "check_finite",
    "check_id",
    "check_metadata",
    "check_text",
    "validate_k",
    "validate_min_score",
    "validate_query",
]

MAX_QUERY_CHARS = 20_000  # the longest question (and context piece) a query takes
MAX_K = 1_000  # the most hits a query returns
MAX_METADATA_DEPTH = 32  # metadata nested deeper is refused: every serialiser can render it
_SURROGATE = re.compile("[\ud800-\udfff]")


def check_text(value: Any, what: str) -> str:
    """A string that encodes as UTF-8 (no lone surrogates); NUL is allowed.

    Args:
        value: The string to check.
        what: What it is, for the message ("Document 'a': text").

    Returns:
        ``value`` unchanged.

    Raises:
        InputError: If ``value`` is not a str or holds a surrogate code point.
    """
    if not isinstance(value, str):
        raise InputError(f"{what} must be a str, got {type(value).__name__}")
    bad = _SURROGATE.search(value)
    if bad is not None:
        raise InputError(
            f"{what} holds a lone surrogate {bad.group()!r} at character {bad.start()}, which "
            "is not Unicode text (it cannot be encoded as UTF-8); decode the source with "
            "errors='replace' or fix it"
        )
    return value


def check_id(value: Any, what: str) -> str:
    """An identifier: a string that encodes as UTF-8 and holds no NUL character.

    Raises:
        InputError: If ``value`` is not a str, holds a surrogate or a NUL.
    """
    value = check_text(value, what)
    at = value.find("\x00")
    if at >= 0:
        raise InputError(
            f"{what} {value!r} holds a NUL character at {at}; ids and keys cannot hold one"
        )
    return value


def check_finite(value: Any, what: str) -> None:
    """Refuse a number no comparison can use: NaN, an infinity, or an int beyond a float.

    Raises:
        InputError: If ``value`` is such a number (bools and other types pass).
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if isinstance(value, float):
        finite = math.isfinite(value)
    else:
        try:
            finite = math.isfinite(float(value))
        except OverflowError:
            finite = False
    if not finite:
        shown = f"{value!r}" if isinstance(value, float) else f"an int of {len(str(value))} digits"
        raise InputError(
            f"{what} is {shown}; numbers must be finite and within the range of a float"
        )


def check_metadata(value: Any, what: str) -> dict[str, Any]:
    """Metadata as a store keeps it: a JSON object of finite, UTF-8-encodable values.

    Args:
        value: The mapping to check (nested lists and mappings are checked too).
        what: Whose metadata it is, for the message ("Document 'a': metadata").

    Returns:
        A shallow copy of ``value`` as a dict.

    Raises:
        InputError: If it is not a mapping, a key is not a str (or holds a surrogate or NUL),
            a value is of another type, not finite or not UTF-8, or it nests deeper than
            :data:`MAX_METADATA_DEPTH`.
    """
    if not isinstance(value, Mapping):
        raise InputError(f"{what} must be a mapping, got {type(value).__name__}")
    _check_value(value, what, 1)
    return dict(value)


def _check_value(value: Any, where: str, depth: int) -> None:
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        check_text(value, where)
    elif isinstance(value, (int, float)):
        check_finite(value, where)
    elif isinstance(value, datetime):
        ensure_utc(value)  # refuses one outside the range of a datetime once in UTC
    elif isinstance(value, (Mapping, list, tuple)):
        if depth > MAX_METADATA_DEPTH:
            raise InputError(f"{where} nests deeper than {MAX_METADATA_DEPTH} levels")
        if isinstance(value, Mapping):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise InputError(
                        f"{where}: keys must be str, got {key!r} ({type(key).__name__})"
                    )
                check_id(key, f"{where}: key")
                _check_value(item, f"{where}[{key!r}]", depth + 1)
        else:
            for i, item in enumerate(value):
                _check_value(item, f"{where}[{i}]", depth + 1)
    else:
        raise InputError(
            f"{where} is a {type(value).__name__}, which JSON cannot hold; use a str, number, "
            "bool, None, datetime, list or dict"
        )


def validate_query(text: Any) -> str:
    """A query's text, checked.

    Args:
        text: What the caller passed as the question.

    Returns:
        ``text`` unchanged.

    Raises:
        InputError: If it is not a str, is blank, is longer than :data:`MAX_QUERY_CHARS` or
            does not encode as UTF-8.
    """
    if not isinstance(text, str):
        raise InputError(f"query must be a str, got {type(text).__name__}")
    if not text.strip():
        raise InputError("query is empty")
    if len(text) > MAX_QUERY_CHARS:
        raise InputError(f"query is {len(text)} characters; the limit is {MAX_QUERY_CHARS}")
    return check_text(text, "query")


def validate_k(k: Any) -> int:
    """A query's ``k``, checked.

    Args:
        k: What the caller passed as the number of hits.

    Returns:
        ``k`` unchanged.

    Raises:
        InputError: If it is not an int (a bool is not) between 1 and :data:`MAX_K`.
    """
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise InputError(f"k must be an int between 1 and {MAX_K}, got {k!r}")
    return k


def validate_min_score(min_score: Any) -> float | None:
    """A query's ``min_score`` (the lowest ``Hit.match`` kept), checked.

    Args:
        min_score: None (keep every hit) or a number between 0 and 1.

    Returns:
        It as a float, or None.

    Raises:
        InputError: If it is not None or a real number (a bool is not) between 0 and 1.
    """
    if min_score is None:
        return None
    if (
        isinstance(min_score, bool)
        or not isinstance(min_score, (int, float))
        or not math.isfinite(min_score)
        or not 0.0 <= min_score <= 1.0
    ):
        raise InputError(
            f"min_score must be None or a number between 0 and 1, got {min_score!r} "
            "(it is compared with Hit.match)"
        )
    return float(min_score)
