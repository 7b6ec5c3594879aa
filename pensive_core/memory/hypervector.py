"""A numpy-only hypervector first-stage selector for conversation turns.

In the style of "hv-context": every word is mapped to a row of a random bipolar (+1/-1) codebook
of ``dim`` components, a turn is the sign of the IDF-weighted sum of its words' rows (a bundle),
and a query is scored against every turn by cosine. It needs nothing but numpy and holds
``dim / 8`` bytes per turn plus the turn's token ids, so it serves as a tiny selector on its own
and as a cheap pre-filter in front of a heavier retriever (``search(..., candidates=...)``).

Design:

* **Open vocabulary.** A word is hashed to a codebook row (blake2b of its UTF-8 bytes, so the
  mapping is the same in every process, unlike the salted built-in ``hash``); unknown words are
  never dropped. Distinct words that share a row (a collision, about ``V / codebook_rows`` of
  them for a vocabulary of ``V``) are treated as one word.
* **Deterministic codebook.** Row ``r`` under ``seed`` is 64 bits at a time of SplitMix64 over
  ``(seed, r, index of the 64-bit block)``: the same seed gives the same vectors in every process, numpy version
  and platform; another seed gives other vectors. Rows are made lazily, the first time a word
  that hashes to them is seen, and kept bit-packed (``dim / 8`` bytes a row); nothing of size
  ``codebook_rows x dim`` is ever allocated. (``np.random.default_rng([seed, r])`` would do too,
  but its ``integers`` stream is not promised stable across numpy versions, and SplitMix64 makes
  all the rows a batch needs in one vectorised pass.)
* **Weights.** A word weighs ``idf * (1 + ln tf)`` with the bank's own document frequencies,
  ``idf = ln((N + 1) / (df + 0.5))`` (Lucene's BM25 IDF; positive for every word the bank holds,
  largest for a word it has never seen). Each weight is nudged by a deterministic factor within
  one part in a million so that equal weights never cancel exactly: the sign of a bundle is then
  never a tie, and no tie-breaking vector (which would make unrelated turns alike) is needed.
* **IDF drift, an approximation.** A turn is encoded with the IDF of the moment it is added
  (its own batch counted); the query is encoded with the current IDF. As the bank grows the
  stored turns' weights go stale, so every turn is re-encoded from its kept token ids when the
  bank has doubled (or halved) since the last full encode, and on ``rebuild()``. Between those
  points a turn's weights are those of a bank at least half the current size; only the ratios
  of the weights within one turn matter for its sign, and those change slowly.
* **Bank and scoring.** A turn is stored as its sign bits, packed into ``dim / 64`` uint64 words
  and laid out word-major (``(dim / 64, capacity)``) so every numpy pass runs along the turns.
  For bipolar vectors ``cosine = 1 - 2 * hamming / dim``; the Hamming distance is XOR plus
  ``np.bitwise_count`` (numpy >= 2; a byte lookup table otherwise). Top-k: ``np.partition``
  finds the k-th smallest distance (faster than ``argpartition`` over a tie-breaking key at
  10,000 turns), then a stable sort of the turns within it, so ties go by insertion order.
  A text with no words is kept with a neutral score of exactly 0.0; a turn sharing a weighty
  word with the query scores well above that, unrelated turns scatter around it (about
  +-0.02 at dim 2048).

Measured on this project's 2-core machine (AMD EPYC, numpy 2.4, dim 2048), time of the
scoring pass alone per query on random banks: packed bits, word-major: 10 us at 60 turns, 60 us
at 1,000, 280-400 us at 10,000; packed bits, turn-major (``(n, dim / 64)``, short inner loops):
13 / 89 / 680 us; a float32 mirror with BLAS ``sgemv``: 13 / 92 / 3,900 us at 8 KB a turn (32x
the packed bank); int8 matmul (not BLAS): 101 / 1,700 / 11,700 us. Packed word-major bits are
the fastest at every size and the smallest, so they are what the bank holds. A reused scratch
buffer for the XOR was no faster at 1,000 turns, so none is held. End to end on real turns
(``benchmarks/memory_hv.py``, median, with other jobs sharing the machine): search(q, k=10)
about 140 us at 60 turns, 200 us at 1,000 and 580 us at 10,000, of which tokenising the query
is 35-55 us; the bank holds 256 bytes of vector plus about 100-150 bytes of token ids a turn.

Thread safety is the caller's: one lock around every call.
"""

from __future__ import annotations

import hashlib
import logging
import sys
from collections.abc import Collection, Sequence

import numpy as np

from pensive_core.errors import InputError
from pensive_core.tokenize import Tokenizer

__all__ = ["HypervectorSelector"]

log = logging.getLogger(__name__)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_JITTER = 1e-6  # relative weight nudge; far below anything that changes a ranking
_WORD_CACHE_MAX = 200_000
_HAS_BITWISE_COUNT = hasattr(np, "bitwise_count")
_U64LE = np.dtype("<u8")  # codebook words: fixed byte order, so the bits are the same anywhere


def _mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on a uint64 array (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def _popcount_rows(x: np.ndarray) -> np.ndarray:
    """Set bits per column of a ``(words, n)`` uint64 array, as uint16 of length ``n``."""
    if _HAS_BITWISE_COUNT:
        return np.add.reduce(np.bitwise_count(x), axis=0, dtype=np.uint16)
    table = _byte_popcounts()
    per_byte = table[x.view(np.uint8).reshape(x.shape[0], x.shape[1], 8)]
    return per_byte.sum(axis=(0, 2), dtype=np.uint16)


def _byte_popcounts() -> np.ndarray:
    return np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).sum(
        axis=1, dtype=np.uint8
    )


class HypervectorSelector:
    """Ranks stored turns against a query by cosine of bit-packed bipolar hypervectors.

    Args:
        dim: Hypervector dimension; a multiple of 64, at least 64.
        seed: Codebook seed. The same seed gives identical vectors and results everywhere.
        codebook_rows: Number of codebook rows words are hashed onto.
        tokenizer: Turns text into words; default ``Tokenizer()`` (stemmed, English stop words
            dropped).

    Raises:
        InputError: If ``dim`` or ``codebook_rows`` is out of range or not an integer.
    """

    def __init__(
        self,
        dim: int = 2048,
        *,
        seed: int = 0,
        codebook_rows: int = 65536,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        if not _is_int(dim) or dim < 64 or dim % 64:
            raise InputError(f"dim must be a multiple of 64 and at least 64, got {dim!r}")
        if not _is_int(codebook_rows) or codebook_rows < 1:
            raise InputError(f"codebook_rows must be an integer >= 1, got {codebook_rows!r}")
        if not _is_int(seed):
            raise InputError(f"seed must be an integer, got {seed!r}")
        if tokenizer is None:
            tokenizer = Tokenizer()
        self.dim = int(dim)
        self.seed = int(seed)
        self.codebook_rows = int(codebook_rows)
        self._tokenizer = tokenizer
        self._words = self.dim // 64
        self._seed_key = _mix64(np.array([self.seed % 2**64], dtype=np.uint64) + _GOLDEN)[0]
        # the codebook cache: row id -> slot in a bit-packed (slots, words) matrix
        self._cb_slot: dict[int, int] = {}
        self._cb = np.zeros((0, self._words), dtype=_U64LE)
        self._cb_jit = np.zeros(0, dtype=np.float64)
        self._cb_used = 0
        self._word_row: dict[str, int] = {}
        # the bank
        self._ids: list[str] = []
        self._pos: dict[str, int] = {}
        # per turn: the bytes of a (2, t) int32 array, distinct codebook rows then their counts
        # (bytes: a 33-byte header where an ndarray's is 128)
        self._tokens: list[bytes] = []
        self._bank = np.zeros((self._words, 0), dtype=np.uint64)
        self._empty = np.zeros(0, dtype=bool)
        self._df = np.zeros(self.codebook_rows, dtype=np.int32)
        self._encoded_at = 0  # bank size at the last full encode

    # -- public API ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def ids(self) -> list[str]:
        """The stored ids, in insertion order."""
        return list(self._ids)

    def add(self, texts: Sequence[str], ids: Sequence[str] | None = None) -> None:
        """Add turns to the bank.

        Args:
            texts: The turns' texts. A text without words is kept with a neutral vector.
            ids: One id per text; default the text's position in the bank (``str(len(self) + i)``).

        Raises:
            InputError: If a text or id is not a string, the lengths differ, or an id is
                already stored or given twice.
        """
        if isinstance(texts, str):
            raise InputError("texts must be a sequence of strings, got a single string")
        texts = list(texts)
        for t in texts:
            if not isinstance(t, str):
                raise InputError(f"every text must be a string, got {type(t).__name__}")
        if ids is None:
            start = len(self._ids)
            new_ids = [str(start + i) for i in range(len(texts))]
        else:
            if isinstance(ids, str):
                raise InputError("ids must be a sequence of strings, got a single string")
            new_ids = list(ids)
            if len(new_ids) != len(texts):
                raise InputError(
                    f"got {len(texts)} texts but {len(new_ids)} ids; pass one id per text"
                )
        seen: set[str] = set()
        for i in new_ids:
            if not isinstance(i, str):
                raise InputError(f"every id must be a string, got {type(i).__name__}: {i!r}")
            if i in self._pos or i in seen:
                raise InputError(f"duplicate id {i!r}; remove it first or pass unique ids")
            seen.add(i)
        if not texts:
            return
        tokens = [self._terms(t) for t in texts]
        for terms in tokens:
            self._df[terms[0]] += 1
        start = len(self._ids)
        self._ids.extend(new_ids)
        self._pos.update((i, start + j) for j, i in enumerate(new_ids))
        self._tokens.extend(terms.tobytes() for terms in tokens)
        self._reserve(len(self._ids))
        self._empty[start : len(self._ids)] = [terms.shape[1] == 0 for terms in tokens]
        if len(self._ids) >= 2 * max(self._encoded_at, 1):
            self.rebuild()
        else:
            self._encode_into(range(start, len(self._ids)))

    def remove(self, ids: Sequence[str]) -> int:
        """Remove turns by id; unknown ids are ignored.

        Args:
            ids: The ids to remove.

        Returns:
            How many turns were removed.

        Raises:
            InputError: If ``ids`` is a single string rather than a sequence.
        """
        if isinstance(ids, str):
            raise InputError("ids must be a sequence of strings, got a single string")
        drop = sorted({self._pos[i] for i in ids if i in self._pos})
        if not drop:
            return 0
        n = len(self._ids)
        for p in drop:
            self._df[self._stored_terms(p)[0]] -= 1
        keep = np.ones(n, dtype=bool)
        keep[drop] = False
        self._bank = np.ascontiguousarray(self._bank[:, :n][:, keep])
        self._empty = self._empty[:n][keep].copy()
        self._ids = [i for i, k in zip(self._ids, keep.tolist()) if k]
        self._tokens = [t for t, k in zip(self._tokens, keep.tolist()) if k]
        self._pos = {i: j for j, i in enumerate(self._ids)}
        if self._ids and 2 * len(self._ids) <= self._encoded_at:
            self.rebuild()  # the IDF of half the bank is gone
        elif not self._ids:
            self._encoded_at = 0
        return len(drop)

    def rebuild(self) -> None:
        """Re-encode every stored turn with the current IDF."""
        self._encode_into(range(len(self._ids)))
        self._encoded_at = len(self._ids)
        log.debug("hypervector bank re-encoded: %d turns", len(self._ids))

    def encode(self, text: str) -> np.ndarray:
        """The vector of ``text`` as the bank would hold it, with the current IDF.

        Args:
            text: Any text.

        Returns:
            An int8 array of ``dim`` components, each +1 or -1; all zeros if the text has no
            words.

        Raises:
            InputError: If ``text`` is not a string.
        """
        if not isinstance(text, str):
            raise InputError(f"text must be a string, got {type(text).__name__}")
        packed = self._vector(self._terms(text))
        if packed is None:
            return np.zeros(self.dim, dtype=np.int8)
        bits = np.unpackbits(packed.view(np.uint8), bitorder="little")
        return (bits.astype(np.int8) * 2 - 1).astype(np.int8)

    def search(
        self, query: str, k: int = 10, *, candidates: Collection[str] | None = None
    ) -> list[tuple[str, float]]:
        """The ``k`` stored turns most like ``query``, best first.

        Args:
            query: The query text.
            k: How many to return, at least 1.
            candidates: If given, only these ids are ranked (ids not stored are ignored).

        Returns:
            ``(id, cosine)`` pairs, best first; equal scores in insertion order. Empty when the
            bank (or the candidate set) is empty or the query has no words.

        Raises:
            InputError: If ``query`` is not a string or ``k`` is not an integer >= 1.
        """
        if not isinstance(query, str):
            raise InputError(f"query must be a string, got {type(query).__name__}")
        if not _is_int(k) or k < 1:
            raise InputError(f"k must be an integer >= 1, got {k!r}")
        n = len(self._ids)
        if n == 0:
            return []
        if isinstance(candidates, str):
            raise InputError("candidates must be a collection of ids, got a single string")
        q = self._vector(self._terms(query))
        if q is None:
            return []
        return self._rank(q, k, candidates)

    def encode_packed(self, text: str) -> np.ndarray | None:
        """The packed bits :meth:`search` scores ``text`` by (None when it has no words):
        encoding once and ranking with :meth:`search_packed` times the two apart."""
        if not isinstance(text, str):
            raise InputError(f"text must be a string, got {type(text).__name__}")
        return self._vector(self._terms(text))

    def search_packed(
        self, packed: np.ndarray, k: int = 10, *, candidates: Collection[str] | None = None
    ) -> list[tuple[str, float]]:
        """:meth:`search` for a query already encoded by :meth:`encode_packed`."""
        if not _is_int(k) or k < 1:
            raise InputError(f"k must be an integer >= 1, got {k!r}")
        if not len(self._ids):
            return []
        return self._rank(packed, k, candidates)

    def footprint(self) -> dict[str, int]:
        """What :meth:`memory_bytes` leaves out: ``codebook_rows_made`` (distinct codebook rows
        made so far), ``codebook_cache_bytes`` (their packed bits) and ``df_table_bytes``."""
        return {
            "codebook_rows_made": int(self._cb_used),
            "codebook_cache_bytes": int(self._cb_used * self.dim // 8),
            "df_table_bytes": int(self._df.nbytes),
        }

    def memory_bytes(self) -> int:
        """Bytes held by the bank: the packed vectors and the kept token ids.

        Counts the packed vectors as allocated (spare capacity included), the empty-text flags,
        and the kept token ids with their Python object headers. The ids themselves, the
        codebook cache (``dim / 8`` bytes per distinct row seen), the word-to-row cache and
        the document-frequency table (4 bytes per codebook row) are not counted: they grow with
        the vocabulary or are fixed, not with the number of turns.

        Returns:
            The byte count.
        """
        return int(
            self._bank.nbytes
            + self._empty.nbytes
            + sys.getsizeof(self._tokens)
            + sum(sys.getsizeof(t) for t in self._tokens)
        )

    # -- internals ----------------------------------------------------------------------------

    def _rank(
        self, q: np.ndarray, k: int, candidates: Collection[str] | None = None
    ) -> list[tuple[str, float]]:
        """Score a packed query vector against the bank (or the candidates); the top k."""
        n = len(self._ids)
        if candidates is None:
            positions = None
            bank = self._bank[:, :n]
            empty = self._empty[:n]
        else:
            pos = sorted({self._pos[c] for c in candidates if c in self._pos})
            if not pos:
                return []
            positions = np.asarray(pos, dtype=np.int64)
            bank = self._bank[:, positions]
            empty = self._empty[positions]
        dist = _popcount_rows(np.bitwise_xor(bank, q[:, None]))
        if empty.any():
            dist[empty] = self.dim // 2  # cosine 0: neutral
        # top k with ties in insertion order: everything within the k-th smallest distance,
        # in position order, then a stable sort by distance
        if k < dist.size:
            kth = np.partition(dist, k - 1)[k - 1]
            near = np.flatnonzero(dist <= kth)
        else:
            near = np.arange(dist.size)
        top = near[np.argsort(dist[near], kind="stable")[:k]]
        scores = 1.0 - 2.0 * dist[top].astype(np.float64) / self.dim
        where = top if positions is None else positions[top]
        ids = self._ids
        return [(ids[p], s) for p, s in zip(where.tolist(), scores.tolist())]

    def _row_of(self, word: str) -> int:
        row = self._word_row.get(word)
        if row is None:
            digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
            row = int.from_bytes(digest, "little") % self.codebook_rows
            if len(self._word_row) < _WORD_CACHE_MAX:
                self._word_row[word] = row
        return row

    def _terms(self, text: str) -> np.ndarray:
        """A text's words as a ``(2, t)`` int32 array: distinct codebook rows, then their counts."""
        counts: dict[int, int] = {}
        for word in self._tokenizer.tokenize(text):
            row = self._row_of(word)
            counts[row] = counts.get(row, 0) + 1
        return np.array([list(counts), list(counts.values())], dtype=np.int32)

    def _stored_terms(self, position: int) -> np.ndarray:
        return np.frombuffer(self._tokens[position], dtype=np.int32).reshape(2, -1)

    def _slots(self, rows: list[int]) -> list[int]:
        """Cache slots of codebook rows, making the missing ones in one vectorised pass."""
        slot = self._cb_slot
        missing = [r for r in dict.fromkeys(rows) if r not in slot]
        if missing:
            start = self._cb_used
            need = start + len(missing)
            if need > self._cb.shape[0]:
                cap = max(need, 2 * start, 64)
                grown = np.empty((cap, self._words), dtype=_U64LE)
                grown[:start] = self._cb[:start]
                self._cb = grown
                jit = np.empty(cap, dtype=np.float64)
                jit[:start] = self._cb_jit[:start]
                self._cb_jit = jit
            fresh = np.asarray(missing, dtype=np.uint64)
            self._cb[start:need] = self._make_rows(fresh)
            self._cb_jit[start:need] = self._jitter(fresh)
            slot.update((r, start + j) for j, r in enumerate(missing))
            self._cb_used = need
        return [slot[r] for r in rows]

    def _make_rows(self, rows: np.ndarray) -> np.ndarray:
        """SplitMix64 bits for codebook rows: word j of row r is mix(state(seed, r) + (j+1)*phi)."""
        state = _mix64(self._seed_key + (rows + np.uint64(1)) * _GOLDEN)
        steps = (np.arange(1, self._words + 1, dtype=np.uint64) * _GOLDEN)[None, :]
        return _mix64(state[:, None] + steps)

    @staticmethod
    def _jitter(rows: np.ndarray) -> np.ndarray:
        """A fixed factor in [1, 1 + 1e-6) per codebook row, so equal weights never cancel."""
        bits = _mix64(rows ^ np.uint64(0x5DEECE66D)) >> np.uint64(11)
        return 1.0 + _JITTER * (bits.astype(np.float64) * 2.0**-53)

    def _vector(self, terms: np.ndarray) -> np.ndarray | None:
        """The packed sign vector (``words`` uint64) of ``_terms`` output, or None if empty."""
        if terms.shape[1] == 0:
            return None
        rows = terms[0]
        slots = self._slots(rows.tolist())
        idf = np.log((len(self._ids) + 1.0) / (self._df[rows] + 0.5))
        weights = idf * (1.0 + np.log(terms[1])) * self._cb_jit[slots]
        bits = np.unpackbits(self._cb[slots].view(np.uint8), axis=1, bitorder="little")
        # sum of w * (2b - 1) > 0  <=>  sum of w * b > sum(w) / 2
        signs = (weights @ bits) > (weights.sum() / 2.0)
        return np.packbits(signs, bitorder="little").view(np.uint64)

    def _encode_into(self, positions: range) -> None:
        for p in positions:
            packed = self._vector(self._stored_terms(p))
            self._bank[:, p] = 0 if packed is None else packed

    def _reserve(self, n: int) -> None:
        cap = self._bank.shape[1]
        if n <= cap:
            return
        new_cap = max(n, 2 * cap)
        grown = np.zeros((self._words, new_cap), dtype=np.uint64)
        grown[:, :cap] = self._bank
        self._bank = grown
        empty = np.zeros(new_cap, dtype=bool)
        empty[:cap] = self._empty
        self._empty = empty


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)
