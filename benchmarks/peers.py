"""Peer retrievers that Pensive is benchmarked against.

Every builder takes the *same* chunks (ids and texts) and the *same*
precomputed, L2-normalised chunk embeddings that Pensive indexes, so the
corpus is embedded exactly once and all systems see identical inputs.  Query
embeddings come from a caller-supplied ``embed_query`` callable, which lets the
benchmark either look up precomputed query vectors (timing retrieval alone) or
run the real encoder (timing retrieval plus query embedding).  The framework
embedding adapters return exactly the values ``embed_query`` returns (only
converted to the ``list[float]`` the frameworks expect) and refuse to embed
documents.

Peers:

* :func:`build_langchain_ensemble` -- LangChain ``BM25Retriever`` (rank_bm25,
  default whitespace preprocessing) + ``FAISS`` vector store (inner product)
  fused by ``EnsembleRetriever`` (weighted RRF, c=60, weights 0.5/0.5).
* :func:`build_llamaindex_fusion` -- LlamaIndex ``VectorStoreIndex`` (default
  ``SimpleVectorStore``) + ``BM25Retriever`` (bm25s, English stemming and
  stopwords) fused by ``QueryFusionRetriever`` in ``reciprocal_rerank`` mode
  with a single query (no LLM query generation; a ``MockLLM`` is passed so
  nothing resolves the default OpenAI LLM).
* :func:`build_rank_bm25` -- ``rank_bm25.BM25Okapi`` over lowercased ``\\w+``
  tokens.
* :func:`build_plain_faiss` -- exact ``faiss.IndexFlatIP`` (cosine on
  normalised vectors).

The frameworks are imported inside the builders, so importing this module is
cheap and does not require the benchmark requirements.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "PeerRetriever",
    "QueryEmbed",
    "build_langchain_ensemble",
    "build_llamaindex_fusion",
    "build_plain_faiss",
    "build_rank_bm25",
    "word_tokenize",
]

QueryEmbed = Callable[[str], np.ndarray]
"""Maps a query string to a ``(d,)`` float32, L2-normalised vector."""

_DEFAULT_K = 10
_WORD_RE = re.compile(r"\w+", re.UNICODE)


@runtime_checkable
class PeerRetriever(Protocol):
    """A retriever under benchmark."""

    name: str

    def search(self, query: str, k: int) -> list[str]:
        """Return up to ``k`` chunk ids, best first."""
        ...


def word_tokenize(text: str) -> list[str]:
    """Lowercase ``\\w+`` word tokens (the tokenizer of the rank_bm25 peer).

    Args:
        text: Any text.

    Returns:
        The lowercased word tokens in order.
    """
    return _WORD_RE.findall(text.lower())


# --------------------------------------------------------------------------- #
# LangChain
# --------------------------------------------------------------------------- #


class _LangChainEnsemble:
    """LangChain BM25 + FAISS fused with ``EnsembleRetriever``."""

    name = "langchain-ensemble"

    def __init__(self, ensemble: Any, bm25: Any, vector: Any, k: int) -> None:
        self._ensemble = ensemble
        self._bm25 = bm25
        self._vector = vector
        self._k = -1
        self._set_k(k)

    def _set_k(self, k: int) -> None:
        if k != self._k:
            self._bm25.k = k
            self._vector.search_kwargs = {"k": k}
            self._k = k

    def search(self, query: str, k: int) -> list[str]:
        """Fuse the top-``k`` of each sub-retriever and return the top ``k`` ids.

        Args:
            query: Query text.
            k: Number of ids wanted; each sub-retriever also fetches ``k``.

        Returns:
            Chunk ids, best first.
        """
        k = _check_k(k)
        self._set_k(k)
        docs = self._ensemble.invoke(query)
        return [d.metadata["chunk_id"] for d in docs[:k]]


def build_langchain_ensemble(
    chunk_ids: Sequence[str],
    texts: Sequence[str],
    vectors: np.ndarray,
    embed_query: QueryEmbed,
) -> PeerRetriever:
    """Build the LangChain hybrid peer over precomputed embeddings.

    ``BM25Retriever`` keeps LangChain's default preprocessing (``str.split``).
    The ``FAISS`` store is built with ``FAISS.from_embeddings`` and
    ``DistanceStrategy.MAX_INNER_PRODUCT`` (``IndexFlatIP``), i.e. cosine
    similarity for normalised vectors. ``EnsembleRetriever`` uses its default
    weighted RRF (c=60) with weights 0.5/0.5, deduplicating by
    ``metadata["chunk_id"]`` rather than by page content so that chunks with
    identical text stay distinct.

    Args:
        chunk_ids: Unique chunk ids.
        texts: Chunk texts, aligned with ``chunk_ids``.
        vectors: ``(n, d)`` L2-normalised chunk embeddings, aligned with ``chunk_ids``.
        embed_query: Query embedder; its output is used as is.

    Returns:
        A :class:`PeerRetriever` named ``"langchain-ensemble"``.
    """
    from langchain_classic.retrievers import EnsembleRetriever
    from langchain_community.retrievers import BM25Retriever
    from langchain_community.vectorstores import FAISS
    from langchain_community.vectorstores.utils import DistanceStrategy

    ids, texts_l, mat = _validate(chunk_ids, texts, vectors)
    embeddings = langchain_query_embeddings(embed_query)
    k = min(_DEFAULT_K, len(ids))

    metadatas = [{"chunk_id": cid} for cid in ids]
    bm25 = BM25Retriever.from_texts(texts_l, metadatas=metadatas, ids=ids, k=k)
    store = FAISS.from_embeddings(
        zip(texts_l, list(mat), strict=True),
        embeddings,
        metadatas=metadatas,
        ids=ids,
        distance_strategy=DistanceStrategy.MAX_INNER_PRODUCT,
    )
    vector = store.as_retriever(search_kwargs={"k": k})
    ensemble = EnsembleRetriever(retrievers=[bm25, vector], weights=[0.5, 0.5], id_key="chunk_id")
    return _LangChainEnsemble(ensemble, bm25, vector, k)


def langchain_query_embeddings(embed_query: QueryEmbed) -> Any:
    """A ``langchain_core.embeddings.Embeddings`` that only embeds queries."""
    from langchain_core.embeddings import Embeddings

    class PrecomputedQueryEmbeddings(Embeddings):
        """Delegates queries to ``embed_query``; documents are precomputed."""

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            raise RuntimeError(
                "document vectors are precomputed; embed_documents must not be called"
            )

        def embed_query(self, text: str) -> list[float]:
            return _to_list(embed_query(text))

    return PrecomputedQueryEmbeddings()


# --------------------------------------------------------------------------- #
# LlamaIndex
# --------------------------------------------------------------------------- #


class _LlamaIndexFusion:
    """LlamaIndex vector + BM25 retrievers fused with ``QueryFusionRetriever``."""

    name = "llamaindex-fusion"

    def __init__(self, fusion: Any, vector: Any, bm25: Any, n: int, k: int) -> None:
        self._fusion = fusion
        self._vector = vector
        self._bm25 = bm25
        self._n = n
        self._k = -1
        self._set_k(k)

    def _set_k(self, k: int) -> None:
        if k != self._k:
            self._vector.similarity_top_k = k
            # bm25s refuses k larger than the corpus.
            self._bm25.similarity_top_k = min(k, self._n)
            self._fusion.similarity_top_k = k
            self._k = k

    def search(self, query: str, k: int) -> list[str]:
        """Fuse the top-``k`` of each sub-retriever and return the top ``k`` ids.

        Args:
            query: Query text.
            k: Number of ids wanted; each sub-retriever also fetches ``k``.

        Returns:
            Chunk ids, best first.
        """
        k = _check_k(k)
        self._set_k(k)
        nodes = self._fusion.retrieve(query)
        return [nws.node.node_id for nws in nodes[:k]]


def build_llamaindex_fusion(
    chunk_ids: Sequence[str],
    texts: Sequence[str],
    vectors: np.ndarray,
    embed_query: QueryEmbed,
) -> PeerRetriever:
    """Build the LlamaIndex hybrid peer over precomputed embeddings.

    Nodes are ``TextNode(id_=chunk_id, text=..., embedding=...)``; the chunk id
    is also stored as metadata (excluded from the embed/LLM views, so BM25 sees
    only the text) so that the fusion, which deduplicates by node hash
    (text + metadata), keeps identical texts apart. The vector side is a
    ``VectorStoreIndex`` on the default ``SimpleVectorStore``; the lexical side
    is ``llama_index.retrievers.bm25.BM25Retriever.from_defaults``. They are
    fused by ``QueryFusionRetriever(mode="reciprocal_rerank", num_queries=1,
    use_async=False)`` with ``llm=MockLLM()``: with ``num_queries=1`` no query
    is generated, but without an explicit LLM the constructor resolves
    ``Settings.llm``, which tries to build an OpenAI client.

    Args:
        chunk_ids: Unique chunk ids.
        texts: Chunk texts, aligned with ``chunk_ids``.
        vectors: ``(n, d)`` L2-normalised chunk embeddings, aligned with ``chunk_ids``.
        embed_query: Query embedder; its output is used as is.

    Returns:
        A :class:`PeerRetriever` named ``"llamaindex-fusion"``.
    """
    from llama_index.core import VectorStoreIndex
    from llama_index.core.llms import MockLLM
    from llama_index.core.retrievers import QueryFusionRetriever
    from llama_index.core.schema import TextNode
    from llama_index.retrievers.bm25 import BM25Retriever

    ids, texts_l, mat = _validate(chunk_ids, texts, vectors)
    embed_model = llamaindex_query_embedding(embed_query)
    n = len(ids)
    k = min(_DEFAULT_K, n)

    nodes = [
        TextNode(
            id_=cid,
            text=text,
            embedding=vec.tolist(),
            metadata={"chunk_id": cid},
            excluded_embed_metadata_keys=["chunk_id"],
            excluded_llm_metadata_keys=["chunk_id"],
        )
        for cid, text, vec in zip(ids, texts_l, mat, strict=True)
    ]
    index = VectorStoreIndex(nodes, embed_model=embed_model, show_progress=False)
    vector = index.as_retriever(similarity_top_k=k)
    bm25 = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=k, verbose=False)
    fusion = QueryFusionRetriever(
        [vector, bm25],
        llm=MockLLM(),
        mode="reciprocal_rerank",
        similarity_top_k=k,
        num_queries=1,
        use_async=False,
        verbose=False,
    )
    return _LlamaIndexFusion(fusion, vector, bm25, n, k)


def llamaindex_query_embedding(embed_query: QueryEmbed) -> Any:
    """A LlamaIndex ``BaseEmbedding`` that only embeds queries."""
    from llama_index.core.embeddings import BaseEmbedding
    from pydantic import PrivateAttr

    class PrecomputedQueryEmbedding(BaseEmbedding):
        """Delegates queries to ``embed_query``; documents are precomputed."""

        _embed_query: Any = PrivateAttr()

        def __init__(self, fn: QueryEmbed) -> None:
            super().__init__(model_name="precomputed")
            self._embed_query = fn

        def _get_query_embedding(self, query: str) -> list[float]:
            return _to_list(self._embed_query(query))

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            raise RuntimeError(
                "document vectors are precomputed; text embedding must not be called"
            )

    return PrecomputedQueryEmbedding(embed_query)


# --------------------------------------------------------------------------- #
# rank_bm25 and plain FAISS
# --------------------------------------------------------------------------- #


class _RankBM25:
    """``rank_bm25.BM25Okapi`` over lowercased word tokens."""

    name = "rank-bm25"

    def __init__(self, bm25: Any, ids: list[str]) -> None:
        self._bm25 = bm25
        self._ids = ids

    def search(self, query: str, k: int) -> list[str]:
        """Score every chunk with BM25Okapi and return the ``k`` best.

        Args:
            query: Query text.
            k: Number of ids wanted.

        Returns:
            Chunk ids, best first (ties keep corpus order).
        """
        k = _check_k(k)
        scores = np.asarray(self._bm25.get_scores(word_tokenize(query)))
        order = np.argsort(-scores, kind="stable")[:k]
        return [self._ids[i] for i in order]


def build_rank_bm25(chunk_ids: Sequence[str], texts: Sequence[str]) -> PeerRetriever:
    """Build the ``rank_bm25.BM25Okapi`` peer (default k1/b/epsilon).

    Args:
        chunk_ids: Unique chunk ids.
        texts: Chunk texts, aligned with ``chunk_ids``.

    Returns:
        A :class:`PeerRetriever` named ``"rank-bm25"``.
    """
    from rank_bm25 import BM25Okapi

    ids, texts_l, _ = _validate(chunk_ids, texts, None)
    # BM25Okapi divides by the average document length: keep it non-zero.
    corpus = [word_tokenize(t) or [""] for t in texts_l]
    return _RankBM25(BM25Okapi(corpus), ids)


class _PlainFaiss:
    """Exact inner-product search with ``faiss.IndexFlatIP``."""

    name = "faiss-flatip"

    def __init__(self, index: Any, ids: list[str], embed_query: QueryEmbed) -> None:
        self._index = index
        self._ids = ids
        self._embed_query = embed_query

    def search(self, query: str, k: int) -> list[str]:
        """Return the ``k`` chunks with the highest inner product with the query.

        Args:
            query: Query text.
            k: Number of ids wanted.

        Returns:
            Chunk ids, best first.
        """
        k = min(_check_k(k), len(self._ids))
        q = np.asarray(self._embed_query(query), dtype=np.float32).reshape(1, -1)
        _, idx = self._index.search(q, k)
        return [self._ids[i] for i in idx[0] if i >= 0]


def build_plain_faiss(
    chunk_ids: Sequence[str], vectors: np.ndarray, embed_query: QueryEmbed
) -> PeerRetriever:
    """Build the plain ``faiss.IndexFlatIP`` peer.

    Args:
        chunk_ids: Unique chunk ids.
        vectors: ``(n, d)`` L2-normalised chunk embeddings, aligned with ``chunk_ids``.
        embed_query: Query embedder; its output is used as is (cast to float32).

    Returns:
        A :class:`PeerRetriever` named ``"faiss-flatip"``.
    """
    import faiss

    ids, _, mat = _validate(chunk_ids, None, vectors)
    index = faiss.IndexFlatIP(mat.shape[1])
    index.add(mat)
    return _PlainFaiss(index, ids, embed_query)


# --------------------------------------------------------------------------- #
# helpers
# --------------------------------------------------------------------------- #


def _to_list(vec: Any) -> list[float]:
    """Flatten an embedding to ``list[float]`` without changing its values."""
    return np.asarray(vec).reshape(-1).tolist()


def _check_k(k: int) -> int:
    k = int(k)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return k


def _validate(
    chunk_ids: Sequence[str],
    texts: Sequence[str] | None,
    vectors: np.ndarray | None,
) -> tuple[list[str], list[str], np.ndarray]:
    """Check alignment and uniqueness; return ids, texts and a float32 C matrix."""
    ids = [str(c) for c in chunk_ids]
    if not ids:
        raise ValueError("need at least one chunk")
    if len(set(ids)) != len(ids):
        raise ValueError("chunk_ids must be unique")
    texts_l: list[str] = []
    if texts is not None:
        texts_l = [str(t) for t in texts]
        if len(texts_l) != len(ids):
            raise ValueError(f"{len(ids)} chunk_ids but {len(texts_l)} texts")
    mat = np.empty((0, 0), dtype=np.float32)
    if vectors is not None:
        mat = np.ascontiguousarray(vectors, dtype=np.float32)
        if mat.ndim != 2 or mat.shape[0] != len(ids):
            raise ValueError(f"vectors must have shape ({len(ids)}, d), got {tuple(mat.shape)}")
    return ids, texts_l, mat
