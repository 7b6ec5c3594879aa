"""Time helpers: every datetime Pensive stores or compares is tz-aware UTC, inside the range
a datetime can hold once in UTC."""

from __future__ import annotations

from datetime import datetime, timezone

from .errors import InputError

__all__ = ["ensure_utc", "parse_iso", "utcnow", "to_iso", "from_iso"]


def parse_iso(value: str) -> datetime:
    """Read an ISO-8601 date or datetime (a trailing ``Z`` means UTC), keeping its offset.

    Args:
        value: The text, e.g. ``"2024-10-02"`` or ``"2024-10-02T09:30:00+02:00"``.

    Returns:
        The datetime as written (naive when the text has no offset).

    Raises:
        InputError: If ``value`` is not a str or not ISO-8601.
    """
    if not isinstance(value, str):
        raise InputError(f"timestamp must be an ISO-8601 string, got {type(value).__name__}")
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise InputError(f"timestamp {value!r:.80} is not an ISO-8601 date or datetime") from None


def ensure_utc(value: datetime | str | int | float | None) -> datetime | None:
    """Normalise a timestamp to a tz-aware UTC ``datetime``.

    Naive datetimes are taken to be UTC already; ISO-8601 strings and POSIX seconds are parsed.
    The range is checked after the conversion: ``0001-01-01T00:00:00+14:00`` is a valid
    datetime, but in UTC it falls before year 1, so it is refused.

    Args:
        value: A datetime, an ISO-8601 string, POSIX seconds, or None.

    Returns:
        The same instant as an aware UTC datetime, or None when ``value`` is None.

    Raises:
        InputError: If the value cannot be read as a time, or lies outside the years 1 to 9999
            once converted to UTC.
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, bool):
        raise InputError(f"timestamp must be a datetime, ISO string or number, got {value!r}")
    elif isinstance(value, (int, float)):
        try:
            return datetime.fromtimestamp(float(value), tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise InputError(
                f"timestamp {value!r} is not a time in the years 1 to 9999 (POSIX seconds)"
            ) from None
    elif isinstance(value, str):
        dt = parse_iso(value)
    else:
        raise InputError(
            f"timestamp must be a datetime, ISO string or number, got {type(value).__name__}"
        )
    try:
        if dt.utcoffset() is None:  # naive (or a tzinfo that knows no offset): UTC already
            return dt.replace(tzinfo=timezone.utc)
        return dt.astimezone(timezone.utc)
    except (OverflowError, ValueError):
        raise InputError(
            f"timestamp {value!s:.80} falls outside the years 1 to 9999 once converted to UTC; "
            "give a time within that range"
        ) from None


def utcnow() -> datetime:
    """Return the current time as an aware UTC datetime."""
    return datetime.now(timezone.utc)


def to_iso(value: datetime | None) -> str | None:
    """Serialise an aware datetime (or None) to ISO-8601 for storage.

    Raises:
        InputError: If ``value`` lies outside the range of a datetime once in UTC.
    """
    return None if value is None else ensure_utc(value).isoformat()  # type: ignore[union-attr]


def from_iso(value: str | None) -> datetime | None:
    """Read an ISO-8601 string written by :func:`to_iso`."""
    return None if value is None else ensure_utc(value)
