"""Rerankers: score (query, passage) pairs jointly, higher is better.

:class:`Reranker` is the plug point; :class:`CrossEncoderReranker` runs a sentence-transformers
cross-encoder from a local folder (nothing is downloaded). :func:`rerank` orders passages by a
reranker's scores.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .errors import ConfigError, InputError, MissingDependencyError

__all__ = ["Reranker", "CrossEncoderReranker", "rerank", "rerank_or_keep"]

log = logging.getLogger(__name__)


@runtime_checkable
class Reranker(Protocol):
    """Scores passages against a query, jointly (a cross-encoder, an LLM judge...)."""

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """One score per text, higher is better.

        Args:
            query: The question.
            texts: The passages.

        Returns:
            Scores in the order of ``texts``.
        """
        ...


class CrossEncoderReranker:
    """A sentence-transformers ``CrossEncoder`` loaded from a local folder on first use.

    Args:
        path: The model folder.
        num_labels: Passed to ``CrossEncoder`` (1 for a relevance head; None: the folder's).
        max_length: Longest pair in tokens (None: the model's).
        batch_size: Pairs per forward pass.

    Raises:
        ConfigError: If ``path`` is not a model folder.
        MissingDependencyError: If sentence-transformers is not installed (extra ``minilm``),
            raised on first use.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        num_labels: int | None = None,
        max_length: int | None = None,
        batch_size: int = 32,
    ) -> None:
        folder = Path(path)
        if not (folder / "config.json").exists():
            raise ConfigError(
                f"reranker {str(path)!r} is not a local cross-encoder folder (no config.json); "
                "pass the path of a downloaded sentence-transformers CrossEncoder model"
            )
        self.path = folder
        self.num_labels = num_labels
        self.max_length = max_length
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        try:
            from sentence_transformers import CrossEncoder
        except ImportError as exc:
            raise MissingDependencyError(
                "sentence_transformers", "minilm", "The cross-encoder reranker"
            ) from exc
        from .embedders.sentence_transformers import quiet_transformers

        with quiet_transformers():
            # sentence-transformers wants the path as str; offline by construction
            return CrossEncoder(
                str(self.path),
                num_labels=self.num_labels,
                max_length=self.max_length,
                device="cpu",
                local_files_only=True,
            )

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """Score each text against ``query`` (see :class:`Reranker`)."""
        if not texts:
            return []
        with self._lock:
            if self._model is None:
                self._model = self._load()
            scores = self._model.predict(
                [(query, t) for t in texts],
                batch_size=self.batch_size,
                show_progress_bar=False,
                convert_to_numpy=True,
            )
        return [float(s) for s in scores]

    def __repr__(self) -> str:
        return f"CrossEncoderReranker({str(self.path)!r})"


def _check_top_n(top_n: Any) -> None:
    if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1):
        raise InputError(f"top_n must be a positive int or None, got {top_n!r}")


def rerank(
    reranker: Reranker, query: str, texts: Sequence[str], top_n: int | None = None
) -> list[tuple[int, float]]:
    """Order passages by a reranker's scores.

    Args:
        reranker: Scores the passages.
        query: The question.
        texts: The passages.
        top_n: Keep this many (None: all).

    Returns:
        ``(input position, reranker score)`` pairs, best first (ties keep input order).

    Raises:
        InputError: If ``top_n`` is not a positive int, or the reranker returns the wrong
            number of scores.
    """
    _check_top_n(top_n)
    scores = reranker.score(query, list(texts))
    if len(scores) != len(texts):
        raise InputError(f"reranker {reranker!r} gave {len(scores)} scores for {len(texts)} texts")
    ranked = sorted(enumerate(scores), key=lambda p: (-p[1], p[0]))
    return ranked if top_n is None else ranked[:top_n]


def rerank_or_keep(
    reranker: Reranker, query: str, texts: Sequence[str], top_n: int | None = None
) -> list[tuple[int, float]] | None:
    """:func:`rerank`, fail-soft: None (and a logged warning) when the reranker fails, so the
    caller keeps the order it had. The core's rerank stage and the LlamaIndex postprocessor
    both rerank through this.

    Args:
        reranker: Scores the passages.
        query: The question.
        texts: The passages.
        top_n: Keep this many (None: all).

    Returns:
        ``(input position, reranker score)`` pairs, best first, or None on a failure.

    Raises:
        InputError: If ``top_n`` is not a positive int (a caller's mistake, not a failure).
    """
    _check_top_n(top_n)
    try:
        ranked = rerank(reranker, query, texts, top_n)
    except Exception as exc:  # noqa: BLE001 - any failure of the model leaves the order as it was
        log.warning("reranker %r failed, order kept: %s: %s", reranker, type(exc).__name__, exc)
        return None
    if any(not math.isfinite(s) for _, s in ranked):
        log.warning("reranker %r gave a non-finite score, order kept", reranker)
        return None
    return ranked
