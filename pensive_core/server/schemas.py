"""Request and response bodies of the HTTP API (unknown fields are refused)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ErrorBody",
    "DocumentIn",
    "IngestIn",
    "QueryIn",
    "HitOut",
    "QueryOut",
    "TurnIn",
    "RecallIn",
    "ContextIn",
]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorDetail(BaseModel):
    code: str = Field(description="Stable machine-readable code, e.g. invalid_input, timeout.")
    message: str = Field(description="What was wrong and what to do.")
    request_id: str = ""
    details: list[dict[str, Any]] = []


class ErrorBody(BaseModel):
    """Every error the API returns has this shape."""

    error: ErrorDetail


class DocumentIn(_In):
    id: str = Field(min_length=1, max_length=1024, description="Your id; the same id replaces.")
    text: str = Field(min_length=1)
    metadata: dict[str, Any] = {}
    timestamp: datetime | None = Field(None, description="When the document was true (ISO-8601).")


class IngestIn(_In):
    documents: list[DocumentIn] = Field(min_length=1)
    archive_only: bool = Field(False, description="Keep in the L3 archive only (not embedded).")
    wait: bool = Field(True, description="Answer when committed (202 with a job if slower).")


class QueryIn(_In):
    text: str = Field(min_length=1)
    k: int = Field(5, ge=1, le=1000)
    as_of: datetime | None = None
    filters: dict[str, Any] | None = Field(None, description="Mongo-style metadata filter.")


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


class QueryOut(BaseModel):
    text: str
    tier: Literal["L1", "L2", "L3"]
    confidence: float
    latency_ms: float
    cached_from: str | None = None
    hits: list[HitOut]
    time_scope: dict[str, Any] | None = Field(None, description="The time the question asks about.")
    aggregation: dict[str, Any] | None = Field(None, description="A count from the entity graph.")


class TurnIn(_In):
    role: str = Field(min_length=1, max_length=64)
    text: str = Field(min_length=1)
    timestamp: datetime | None = None
    metadata: dict[str, Any] = {}
    user: str | None = Field(None, min_length=1, max_length=256)


class RecallIn(_In):
    query: str = Field(min_length=1)
    k: int = Field(5, ge=1, le=1000)
    scope: Literal["session", "user"] | None = None
    as_of: datetime | None = None
    user: str | None = Field(None, min_length=1, max_length=256)


class ContextIn(_In):
    query: str = Field(min_length=1)
    token_budget: int = Field(2000, ge=1, le=1_000_000)
    user: str | None = Field(None, min_length=1, max_length=256)
