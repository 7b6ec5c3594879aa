"""Time helpers: every datetime Pensive stores or compares is tz-aware UTC."""

from __future__ import annotations

from datetime import datetime, timezone

from .errors import InputError

__all__ = ["ensure_utc", "utcnow", "to_iso", "from_iso"]


def ensure_utc(value: datetime | str | int | float | None) -> datetime | None:
    """Normalise a timestamp to a tz-aware UTC ``datetime``.

    Naive datetimes are taken to be UTC already; ISO-8601 strings and POSIX seconds are parsed.

    Args:
        value: A datetime, an ISO-8601 string, POSIX seconds, or None.

    Returns:
        The same instant as an aware UTC datetime, or None when ``value`` is None.

    Raises:
        InputError: If the value cannot be read as a time.
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, bool):
        raise InputError(f"timestamp must be a datetime, ISO string or number, got {value!r}")
    elif isinstance(value, (int, float)):
        return datetime.fromtimestamp(float(value), tz=timezone.utc)
    elif isinstance(value, str):
        text = value.strip()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        try:
            dt = datetime.fromisoformat(text)
        except ValueError as exc:
            raise InputError(f"timestamp {value!r} is not an ISO-8601 date or datetime") from exc
    else:
        raise InputError(
            f"timestamp must be a datetime, ISO string or number, got {type(value).__name__}"
        )
    if dt.tzinfo is None:
        return dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc)


def utcnow() -> datetime:
    """Return the current time as an aware UTC datetime."""
    return datetime.now(timezone.utc)


def to_iso(value: datetime | None) -> str | None:
    """Serialise an aware datetime (or None) to ISO-8601 for storage."""
    return None if value is None else ensure_utc(value).isoformat()  # type: ignore[union-attr]


def from_iso(value: str | None) -> datetime | None:
    """Read an ISO-8601 string written by :func:`to_iso`."""
    return None if value is None else ensure_utc(value)
