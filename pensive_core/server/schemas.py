"""Request and response bodies of the HTTP API.

Request bodies are strict: unknown fields are refused, and nothing is coerced (``"5"`` is not
a number, ``"yes"`` not a flag, ``1`` not ``true``, a number not a time): a body of the wrong
shape is 422 ``validation_error``. Times are ISO-8601 strings. What the engine checks beyond the
shape (UTF-8, finite numbers, times that exist in UTC, metadata, filters) is 400
``invalid_input``, from :mod:`pensive_core.validate`, the same checks as the Python API's.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from ..errors import InputError
from ..timeutil import parse_iso

__all__ = [
    "ErrorBody",
    "DocumentIn",
    "IngestIn",
    "QueryIn",
    "ExplainIn",
    "ReembedIn",
    "HitOut",
    "QueryOut",
    "TurnIn",
    "RecallIn",
    "ContextIn",
]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _iso_only(value: Any) -> Any:
    """A time must come as an ISO-8601 string: a number is refused, not read as POSIX seconds,
    and a string is read by the same parser as the Python API's (offset kept: the range in
    UTC is checked by the engine, a 400 rather than a 422)."""
    if value is None or isinstance(value, datetime):
        return value
    if not isinstance(value, str):
        raise ValueError(f"a time must be an ISO-8601 string, got {type(value).__name__}")
    try:
        return parse_iso(value)
    except InputError as exc:
        raise ValueError(str(exc)) from None


IsoTime = Annotated[datetime, BeforeValidator(_iso_only)]


class ErrorDetail(BaseModel):
    code: str = Field(description="Stable machine-readable code, e.g. invalid_input, timeout.")
    message: str = Field(description="What was wrong and what to do.")
    request_id: str = ""
    details: list[dict[str, Any]] = []


class ErrorBody(BaseModel):
    """Every error the API returns has this shape."""

    error: ErrorDetail


class DocumentIn(_In):
    id: StrictStr = Field(
        min_length=1, max_length=1024, description="Your id; the same id replaces."
    )
    text: StrictStr = Field(min_length=1)
    metadata: dict[StrictStr, Any] = {}
    timestamp: IsoTime | None = Field(None, description="When the document was true (ISO-8601).")


class IngestIn(_In):
    documents: list[DocumentIn] = Field(min_length=1)
    archive_only: StrictBool = Field(
        False, description="Keep in the L3 archive only (not embedded)."
    )
    wait: StrictBool = Field(True, description="Answer when committed (202 with a job if slower).")


# a hit's match floor (``query(..., min_score=...)``): a number in [0, 1], no coercion
MinScore = Annotated[float, Field(ge=0, le=1, strict=True, allow_inf_nan=False)]
# pinned document ids (``query(..., pins=...)``): at most 20, each as long as a document id
PinIds = Annotated[
    list[Annotated[StrictStr, Field(min_length=1, max_length=1024)]], Field(max_length=20)
]


class ReembedIn(_In):
    embedder: StrictStr | None = Field(
        None, min_length=1, description="The new model: minilm, hash, or a model folder."
    )
    rollback: StrictBool = Field(False, description="Back to the index the last run replaced.")
    discard_old: StrictBool = Field(False, description="Drop the replaced index (no rollback).")
    batch_size: StrictInt = Field(256, ge=1, le=65536, description="Passages per checkpoint.")
    wait: StrictBool = Field(False, description="Answer when finished (else 202 with a job).")


class QueryIn(_In):
    text: StrictStr = Field(min_length=1)
    k: StrictInt = Field(5, ge=1, le=1000)
    as_of: IsoTime | None = None
    filters: dict[StrictStr, Any] | None = Field(None, description="Mongo-style metadata filter.")
    min_score: MinScore | None = Field(
        None, description="Drop hits whose match is below this (0 to 1); null keeps every hit."
    )
    pins: PinIds | None = Field(
        None,
        description="Document ids forced into the result (each its best passage, marked "
        'pinned, ahead of the k retrieved hits); @id and @"Title" in text pin too.',
    )


class ExplainIn(_In):
    text: StrictStr = Field(min_length=1)
    expect: list[StrictStr] = Field(
        min_length=1,
        max_length=100,
        description="Document ids or passage ids the answer should hold.",
    )
    k: StrictInt = Field(5, ge=1, le=1000)
    token_budget: StrictInt | None = Field(
        None, ge=1, le=1_000_000, description="Also check the prompt built within this budget."
    )
    as_of: IsoTime | None = None
    filters: dict[StrictStr, Any] | None = Field(None, description="Mongo-style metadata filter.")


class HitOut(BaseModel):
    doc_id: str
    chunk_id: str
    text: str
    score: float
    metadata: dict[str, Any]
    timestamp: str | None
    sources: dict[str, int] = Field(description="Retriever -> 1-based rank that found it.")
    valid_from: str | None = None
    valid_to: str | None = None
    superseded_by: str | None = None
    match: float | None = Field(
        None, description="How likely this passage answers the question (0 to 1), if measured."
    )
    pinned: bool = Field(False, description="Pinned by the caller, not retrieved.")


class QueryOut(BaseModel):
    text: str
    tier: Literal["L1", "L2", "L3"]
    confidence: float
    match: float | None = Field(
        None, description="How likely the best hit answers the question (0 to 1), if measured."
    )
    weak: bool = Field(False, description="No hit is a likely answer: abstain.")
    latency_ms: float
    cached_from: str | None = None
    card: str | None = Field(None, description="The entity whose L1 card answered.")
    hits: list[HitOut]
    time_scope: dict[str, Any] | None = Field(None, description="The time the question asks about.")
    aggregation: dict[str, Any] | None = Field(None, description="A count from the entity graph.")


class TurnIn(_In):
    role: StrictStr = Field(min_length=1, max_length=64)
    text: StrictStr = Field(min_length=1)
    timestamp: IsoTime | None = None
    metadata: dict[StrictStr, Any] = {}
    user: StrictStr | None = Field(None, min_length=1, max_length=256)


class RecallIn(_In):
    query: StrictStr = Field(min_length=1)
    k: StrictInt = Field(5, ge=1, le=1000)
    scope: Literal["session", "user"] | None = None
    as_of: IsoTime | None = None
    user: StrictStr | None = Field(None, min_length=1, max_length=256)


class ContextIn(_In):
    query: StrictStr = Field(min_length=1)
    token_budget: StrictInt = Field(2000, ge=1, le=1_000_000)
    user: StrictStr | None = Field(None, min_length=1, max_length=256)
    # a strategy name or a line template, a template name or template text: never a class path
    # or a file path (a request imports no module and reads no file of the server's)
    strategy: StrictStr | None = Field(None, min_length=1, max_length=2000)
    template: StrictStr | None = Field(None, min_length=1, max_length=20_000)
