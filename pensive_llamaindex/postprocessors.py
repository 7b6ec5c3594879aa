"""LlamaIndex node postprocessors backed by Pensive's core steps.

They work on nodes from any retriever: each converts ``NodeWithScore`` to the core's
``(text, score, metadata)`` items, calls a pure function of :mod:`pensive_core.postprocess` or
:mod:`pensive_core.rerank`, and maps the result back onto copies of the nodes (inputs are
never mutated). A node without a score counts as 0.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from pensive_core.errors import MissingDependencyError
from pensive_core.postprocess import TIME_KEYS, Item, entity_boost, fit_budget, temporal_rescore
from pensive_core.rerank import CrossEncoderReranker, Reranker, rerank_or_keep
from pensive_core.timeutil import ensure_utc, to_iso

try:
    from llama_index.core.bridge.pydantic import Field, PrivateAttr
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("llama_index.core", "llamaindex", "pensive_llamaindex") from exc

__all__ = [
    "GraphBoostPostprocessor",
    "RerankPostprocessor",
    "TemporalPostprocessor",
    "TokenBudgetPostprocessor",
]


def _items(nodes: Sequence[NodeWithScore]) -> list[Item]:
    return [
        (n.node.get_content(metadata_mode=MetadataMode.NONE), n.score or 0.0, n.node.metadata)
        for n in nodes
    ]


def _query(query_bundle: QueryBundle | None) -> str:
    return query_bundle.query_str if query_bundle is not None else ""


def _rescored(node: NodeWithScore, score: float | None, **meta: Any) -> NodeWithScore:
    """A copy of ``node`` with a new score (and metadata added), the input left as it was."""
    inner = node.node
    if meta:
        inner = inner.model_copy(deep=False)
        inner.metadata = {**node.node.metadata, **meta}
    return NodeWithScore(node=inner, score=score)


class TemporalPostprocessor(BaseNodePostprocessor):
    """Demote nodes a newer node in the same list supersedes; drop nodes dated after ``as_of``.

    Statements ("The CEO of Acme is Jane Doe", "Caroline moved to Lisbon") are read from each
    node's text; its time comes from the first of ``time_keys`` in its metadata (undated nodes
    are never dropped). A superseded node's score is multiplied by ``demote`` and its metadata
    gains ``superseded_by`` (the newer node's id) and ``valid_to``.

    Args:
        as_of: Keep only nodes dated at or before this time (None: every node).
        demote: Factor in [0, 1] for a superseded node's score.
        time_keys: Metadata keys read for a node's time.
    """

    as_of: datetime | None = Field(default=None, description="Drop nodes dated after this.")
    demote: float = Field(default=0.5, ge=0.0, le=1.0, description="Superseded score factor.")
    time_keys: tuple[str, ...] = Field(default=TIME_KEYS, description="Metadata time keys.")

    @classmethod
    def class_name(cls) -> str:
        return "PensiveTemporalPostprocessor"

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        out = []
        for r in temporal_rescore(
            _items(nodes),
            as_of=ensure_utc(self.as_of),
            demote=self.demote,
            time_keys=self.time_keys,
        ):
            node = nodes[r.index]
            if r.superseded_by is None:
                out.append(_rescored(node, node.score))
                continue
            out.append(
                _rescored(
                    node,
                    r.score,
                    superseded_by=nodes[r.superseded_by].node.node_id,
                    valid_to=to_iso(r.valid_to),
                )
            )
        return out


class GraphBoostPostprocessor(BaseNodePostprocessor):
    """Raise nodes that name the query's entities or share entities with the other nodes.

    Entities are found by Pensive's rule extractor (names, identifiers, quantities, dates,
    titles). The factor is ``1 + boost * (q + o)`` (see
    :func:`pensive_core.postprocess.entity_boost`); no score is lowered. Nodes come back
    re-sorted by their new scores.

    Args:
        boost: The most each signal (query, other nodes) adds, as a fraction of the score.
    """

    boost: float = Field(default=0.1, ge=0.0, description="Largest boost per signal.")

    @classmethod
    def class_name(cls) -> str:
        return "PensiveGraphBoostPostprocessor"

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        scores = entity_boost(_query(query_bundle), _items(nodes), boost=self.boost)
        order = sorted(range(len(nodes)), key=lambda i: (-scores[i], i))
        return [
            _rescored(nodes[i], scores[i] if nodes[i].score is not None else None) for i in order
        ]


class TokenBudgetPostprocessor(BaseNodePostprocessor):
    """Keep the best nodes whose texts fit a token budget, clipping the last one.

    The node that no longer fits whole is clipped around the sentence sharing the most words
    with the query (cuts marked ``[…]``), never cut to its head; its metadata gains
    ``clipped = True``. Only node texts are counted, not metadata or separators.

    Args:
        token_budget: Tokens the kept texts may take together.
        tokenizer: What counts tokens: None (tiktoken cl100k_base, offline), an encoding name,
            a callable ``str -> int``, or an object with ``.encode()``.
        min_tokens: The smallest clipped node worth keeping.
    """

    token_budget: int = Field(gt=0, description="Tokens the kept node texts may take.")
    tokenizer: str | Callable[[str], int] | Any | None = Field(
        default=None, description="Token counter (default tiktoken cl100k_base).", exclude=True
    )
    min_tokens: int = Field(default=16, gt=0, description="Smallest clipped node kept.")

    def __init__(
        self,
        token_budget: int,
        tokenizer: str | Callable[[str], int] | Any | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(token_budget=token_budget, tokenizer=tokenizer, **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "PensiveTokenBudgetPostprocessor"

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        kept = fit_budget(
            _query(query_bundle),
            _items(nodes),
            self.token_budget,
            tokenizer=self.tokenizer,
            min_tokens=self.min_tokens,
        )
        out = []
        for b in kept:
            node = nodes[b.index]
            if not b.clipped:
                out.append(_rescored(node, node.score))
                continue
            inner = node.node
            if isinstance(inner, TextNode):
                copy = inner.model_copy(deep=False)
                copy.text = b.text
            else:  # another node kind: carry the clipped text as a plain text node
                copy = TextNode(id_=inner.node_id, text=b.text, relationships=inner.relationships)
            copy.metadata = {**inner.metadata, "clipped": True}
            out.append(NodeWithScore(node=copy, score=node.score))
        return out


class RerankPostprocessor(BaseNodePostprocessor):
    """Reorder nodes by a reranker and keep the best ``top_n``; a reranker that fails leaves
    the order as given (logged), as the core's rerank stage does.

    Args:
        model: A :class:`~pensive_core.rerank.Reranker`, the path of a local cross-encoder
            folder (loaded on first use), or None for no reranking (the first ``top_n`` nodes
            as given).
        top_n: How many nodes to keep.

    Raises:
        ConfigError: If a path is not a cross-encoder folder.
    """

    top_n: int = Field(default=5, gt=0, description="Nodes kept.")
    _reranker: Reranker | None = PrivateAttr(default=None)

    def __init__(
        self,
        model: Reranker | str | os.PathLike[str] | None = None,
        top_n: int = 5,
        **kwargs: Any,
    ) -> None:
        super().__init__(top_n=top_n, **kwargs)
        if model is None or isinstance(model, Reranker):
            self._reranker = model
        else:
            self._reranker = CrossEncoderReranker(model)

    @property
    def reranker(self) -> Reranker | None:
        """The reranker in use (None: no reranking)."""
        return self._reranker

    @classmethod
    def class_name(cls) -> str:
        return "PensiveRerankPostprocessor"

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if self._reranker is None or not nodes:
            return [_rescored(n, n.score) for n in nodes[: self.top_n]]
        texts = [text for text, _, _ in _items(nodes)]
        # the core's fail-soft rerank: a reranker that fails leaves the order as given
        ranked = rerank_or_keep(self._reranker, _query(query_bundle), texts, self.top_n)
        if ranked is None:
            return [_rescored(n, n.score) for n in nodes[: self.top_n]]
        return [_rescored(nodes[i], score) for i, score in ranked]
