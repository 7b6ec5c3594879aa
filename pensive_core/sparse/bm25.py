"""BM25 on bm25s, in segments, so ingest never rebuilds the whole index per batch.

Each ingest call that adds passages builds one small bm25s segment over just those passages.
Scores stay exact across segments: every segment's per-term scores are rescaled from its own
IDF to the global IDF (document frequencies are kept for the whole live collection). Deletes
zero a row through bm25s's ``weight_mask``. Once the small segments hold more than
``merge_ratio`` of the documents (or there are too many), all segments are merged into one,
dropping deleted rows. Persistence is numpy ``.npy`` arrays and JSON, never pickle: a new
generation of files is written and a manifest swapped by rename. The manifest records every
file's size and checksum, and loading checks them (and the arrays' shapes against each
other): a damaged file is a :class:`~pensive_core.errors.CorruptStoreError` naming it.

The one approximation: a segment's length normalisation uses its own average passage length
until the next merge.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Container, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import BM25Config
from ..files import (
    atomic_write_bytes,
    corrupt,
    damaged,
    file_sum,
    last_generation,
    load_npy_checked,
    npy_bytes,
    read_checked,
    read_manifest,
    remove_stale,
    write_manifest,
)
from ..tokenize import Tokenizer

__all__ = ["BM25Index"]

log = logging.getLogger(__name__)
_MAX_SEGMENTS = 8
_MAX_VOCAB_PARTS = 16  # vocabulary files before they are written again as one
_ARRAYS = ("data", "indices", "indptr", "tokens", "offsets", "df")  # a segment's .npy files


def _idf(method: str, df: np.ndarray, n: int) -> np.ndarray:
    df = df.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        if method == "lucene":
            out = np.log1p((n - df + 0.5) / (df + 0.5))
        elif method == "robertson":
            out = np.log(np.maximum((n - df + 0.5) / (df + 0.5), 1.0))
        else:  # atire
            out = np.log(n / df)
    out[df <= 0] = 0.0
    return out


@dataclass
class _Segment:
    name: str
    model: Any  # bm25s.BM25
    rows: list[str]  # chunk id per row
    tokens: np.ndarray  # flat int32 token ids of every row
    offsets: np.ndarray  # int64, len(rows)+1
    df: np.ndarray  # document frequency per token id within this segment (at build)
    n_vocab: int
    alive: np.ndarray  # float32 1/0 per row
    # the file holding ``alive`` as last written or read (None: never written); a commit
    # writes a new one only for a segment whose rows were deleted since
    alive_file: str | None = None

    @property
    def n_docs(self) -> int:
        return len(self.rows)

    def check(self, where: Path) -> None:
        """Refuse arrays whose shapes contradict each other (a damaged segment)."""
        scores = self.model.scores
        problems = [
            (len(self.offsets) != self.n_docs + 1, "offsets"),
            (len(self.alive) != self.n_docs, "alive rows"),
            (int(scores["num_docs"]) != self.n_docs, "num_docs"),
            (len(scores["indptr"]) != self.n_vocab + 1, "indptr"),
            (len(scores["indices"]) != len(scores["data"]), "indices"),
            (len(self.df) != self.n_vocab, "df"),
            (bool(len(self.offsets)) and int(self.offsets[-1]) != len(self.tokens), "tokens"),
        ]
        bad = [name for wrong, name in problems if wrong]
        if bad:
            raise corrupt(where, f"segment {self.name}: {', '.join(bad)} do not fit its rows")

    def row_tokens(self, row: int) -> np.ndarray:
        return self.tokens[self.offsets[row] : self.offsets[row + 1]]


class BM25Index:
    """Segmented, persistent BM25 index.

    Args:
        folder: Where segment files live; None keeps the index in memory.
        cfg: The ``[bm25]`` config section.
        load: Load what ``folder`` holds (False: start empty there, as a rebuild does; its
            files are written under numbers above those already in the folder).
        previous: An index this process loaded from the same folder earlier (a reader
            following a writer's commits): what the new manifest names unchanged (segments,
            vocabulary parts, each checked by its recorded checksum) is taken from it instead
            of read again, so a reload after a commit reads only what the commit wrote.

    Raises:
        CorruptStoreError: If the manifest or a file it names is damaged or missing.
    """

    def __init__(
        self,
        folder: Path | None,
        cfg: BM25Config | None = None,
        *,
        load: bool = True,
        previous: BM25Index | None = None,
    ) -> None:
        import bm25s  # core dependency; imported here so importing pensive_core stays light

        self._bm25s = bm25s
        self.folder = folder
        self.cfg = cfg or BM25Config()
        self.tokenizer = Tokenizer(self.cfg.stemmer, self.cfg.stopwords)
        self.vocab: dict[str, int] = {}
        self.df = np.zeros(0, dtype=np.int64)  # live document frequency per token id
        self.n_live = 0
        self.segments: list[_Segment] = []
        self._where: dict[str, tuple[int, int]] = {}  # chunk id -> (segment index, row)
        self._pending: dict[str, np.ndarray] = {}
        self._gen = 0
        self._seq = 0
        # segments whose immutable files this object wrote or loaded: a segment built anew is
        # always written, even over files of the same name an interrupted commit left behind
        self._on_disk: set[str] = set()
        self.rebuilt = False  # whether the last commit rebuilt segments that already existed
        self._sums: dict[str, dict[str, Any]] = {}  # file name -> size and checksum
        # the vocabulary on disk: files each holding the terms after the last one's (the
        # vocabulary only grows), so a commit writes the new terms only
        self._vocab_parts: list[tuple[str, int]] = []  # (file, terms written up to)
        self._previous = previous if previous is not None and previous.folder == folder else None
        self._manifest_sums: dict[str, Any] = {}
        # whether the files on disk lag what this object holds: a commit with nothing new
        # writes nothing (a clean close on a full disk succeeds)
        self._dirty = True
        if folder is not None and load:
            manifest = read_manifest(folder, "bm25.json")
            if manifest:
                with damaged(folder / "bm25.json"):
                    self._load(folder, manifest)
                # an index written before checksums gets them at its next commit
                self._dirty = "files" not in manifest
        elif folder is not None:
            self._gen = last_generation(folder, r"bm25-(?:vocab|df)-(\d+)\.(?:json|npy)")
            self._gen = max(self._gen, last_generation(folder, r"bm25-seg\d+\.alive-(\d+)\.npy"))
            self._seq = last_generation(folder, r"bm25-seg(\d+)\..*")
        # document frequencies at the last commit and the one before, for idf_shift()
        self._last_df, self._last_n = self.df.copy(), self.n_live
        self._prev_df, self._prev_n = self._last_df, self._last_n

    # -- writing ------------------------------------------------------------------------------
    def _ids_for(self, terms: list[str], grow: bool) -> np.ndarray:
        out = []
        for t in terms:
            i = self.vocab.get(t)
            if i is None:
                if not grow:
                    continue
                i = self.vocab[t] = len(self.vocab)
            out.append(i)
        return np.asarray(out, dtype=np.int32)

    def _df_add(self, ids: np.ndarray, sign: int) -> None:
        if len(self.vocab) > len(self.df):
            self.df = np.concatenate([self.df, np.zeros(len(self.vocab) - len(self.df), np.int64)])
        if len(ids):
            np.add.at(self.df, np.unique(ids), sign)

    def add(self, chunk_id: str, text: str) -> None:
        """Index ``text`` under ``chunk_id`` (replacing what the id held)."""
        if chunk_id in self._where or chunk_id in self._pending:
            self.delete([chunk_id])
        ids = self._ids_for(self.tokenizer.tokenize(text), grow=True)
        self._dirty = True
        self._pending[chunk_id] = ids
        self._df_add(ids, +1)
        self.n_live += 1

    def delete(self, chunk_ids: Sequence[str]) -> None:
        """Remove passages; unknown ids are ignored."""
        for cid in chunk_ids:
            ids = self._pending.pop(cid, None)
            if ids is None:
                where = self._where.pop(cid, None)
                if where is None:
                    continue
                seg = self.segments[where[0]]
                seg.alive[where[1]] = 0.0
                seg.alive_file = None  # changed: the next commit writes it anew
                ids = seg.row_tokens(where[1])
            self._dirty = True
            self._df_add(ids, -1)
            self.n_live -= 1

    def commit(self) -> None:
        """Turn pending additions into a segment, merge if due, and persist."""
        self._prev_df, self._prev_n = self._last_df, self._last_n
        self.rebuilt = False
        if not self._dirty:  # nothing new since the files were written: nothing to write
            return
        if self._pending:
            self._add_segment(list(self._pending), list(self._pending.values()))
            self._pending = {}
        main = self.segments[0].n_docs if self.segments else 0
        small = sum(s.n_docs for s in self.segments[1:])
        dead = sum(int((s.alive == 0).sum()) for s in self.segments)
        limit = self.cfg.merge_ratio * max(1, main)
        self.rebuilt = False
        if dead > limit or (len(self.segments) > 1 and small > limit):
            self._merge(0)  # rebuild everything: exact length norms, deleted rows dropped
            self.rebuilt = True  # old passages' length norms changed: their scores moved
        elif len(self.segments) > _MAX_SEGMENTS:
            self._merge(1)  # tiered: fold the small segments together, leave the main one alone
            self.rebuilt = True
        self._persist()
        self._last_df, self._last_n = self.df.copy(), self.n_live

    def _build(self, rows: list[str], token_lists: list[np.ndarray]) -> _Segment:
        n_vocab = len(self.vocab)
        model = self._bm25s.BM25(method=self.cfg.method, k1=self.cfg.k1, b=self.cfg.b)
        vocab_ids = {i: i for i in range(n_vocab)}
        model.index(
            ([t.tolist() for t in token_lists], vocab_ids),
            create_empty_token=False,
            show_progress=False,
        )
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([len(t) for t in token_lists])
        flat = (np.concatenate(token_lists) if token_lists else np.zeros(0, np.int32)).astype(
            np.int32
        )
        df = np.zeros(n_vocab, dtype=np.int64)
        for t in token_lists:
            if len(t):
                df[np.unique(t)] += 1
        self._seq += 1
        return _Segment(
            f"seg{self._seq}",
            model,
            rows,
            flat,
            offsets,
            df,
            n_vocab,
            np.ones(len(rows), dtype=np.float32),
        )

    def _add_segment(self, rows: list[str], token_lists: list[np.ndarray]) -> None:
        seg = self._build(rows, token_lists)
        self.segments.append(seg)
        si = len(self.segments) - 1
        for r, cid in enumerate(rows):
            self._where[cid] = (si, r)

    def _merge(self, start: int) -> None:
        """Rebuild ``segments[start:]`` as one segment, dropping deleted rows."""
        rows: list[str] = []
        toks: list[np.ndarray] = []
        for seg in self.segments[start:]:
            for r, cid in enumerate(seg.rows):
                if seg.alive[r]:
                    rows.append(cid)
                    toks.append(seg.row_tokens(r))
        log.info(
            "merging %d BM25 segments into one of %d passages",
            len(self.segments) - start,
            len(rows),
        )
        self.segments = self.segments[:start]
        self._where = {cid: w for cid, w in self._where.items() if w[0] < start}
        if rows:
            self._add_segment(rows, toks)

    # -- reading ------------------------------------------------------------------------------
    def search(
        self, query: str, k: int, allowed: Container[str] | None = None
    ) -> list[tuple[str, float]]:
        """Top-k passages for ``query`` by BM25, best first (pending additions excluded).

        Args:
            query: The question.
            k: How many passages.
            allowed: If given, only passages whose ids it contains (a metadata filter).
        """
        terms = self._ids_for(self.tokenizer.tokenize(query), grow=False)
        if not len(terms) or not self.segments or k <= 0:
            return []
        counts = Counter(terms.tolist())
        glob_idf = _idf(self.cfg.method, self.df[list(counts)], max(1, self.n_live))
        results: list[tuple[float, str]] = []
        for seg in self.segments:
            scores = self._segment_scores(seg, counts, glob_idf)
            if scores is None:
                continue
            nz = np.flatnonzero(scores > 0)
            if allowed is not None and len(nz):
                rows = seg.rows
                nz = nz[np.fromiter((rows[r] in allowed for r in nz.tolist()), bool, len(nz))]
            if not len(nz):
                continue
            kk = min(k, len(nz))
            top = nz[np.argpartition(-scores[nz], kk - 1)[:kk]]
            results.extend((float(scores[r]), seg.rows[r]) for r in top)
        results.sort(key=lambda x: -x[0])
        return [(cid, s) for s, cid in results[:k]]

    def scores_for(self, query: str, chunk_ids: Sequence[str]) -> dict[str, float]:
        """BM25 scores of ``query`` for the given committed passages (absent ids are left out)."""
        terms = self._ids_for(self.tokenizer.tokenize(query), grow=False)
        if not len(terms):
            return {}
        counts = Counter(terms.tolist())
        glob_idf = _idf(self.cfg.method, self.df[list(counts)], max(1, self.n_live))
        by_seg: dict[int, list[tuple[int, str]]] = {}
        for cid in chunk_ids:
            where = self._where.get(cid)
            if where is not None:
                by_seg.setdefault(where[0], []).append((where[1], cid))
        out: dict[str, float] = {}
        for si, rows in by_seg.items():
            scores = self._segment_scores(self.segments[si], counts, glob_idf)
            for row, cid in rows:
                out[cid] = 0.0 if scores is None else float(scores[row])
        return out

    def doc_freq(self, terms: Sequence[str]) -> dict[str, int]:
        """How many live passages hold each term (terms never indexed are left out)."""
        out = {}
        for t in terms:
            i = self.vocab.get(t)
            if i is not None and i < len(self.df):
                out[t] = int(self.df[i])
        return out

    def idf_shift(self, query: str) -> float:
        """How far the last commit can have moved any passage's score for ``query``.

        A passage's score is a sum over query terms of ``count * idf * tf_part`` with
        ``tf_part < 1``, so no score moved by more than ``sum(count * |idf change|)`` over the
        terms passages already held before the commit.
        """
        terms = self._ids_for(self.tokenizer.tokenize(query), grow=False)
        if not len(terms):
            return 0.0
        counts = Counter(terms.tolist())
        ids = np.fromiter(counts, dtype=np.int64)
        mult = np.fromiter(counts.values(), dtype=np.float64)
        prev = np.zeros(len(ids), dtype=np.int64)
        known = ids < len(self._prev_df)
        prev[known] = self._prev_df[ids[known]]
        now = _idf(self.cfg.method, self.df[ids], max(1, self.n_live))
        before = _idf(self.cfg.method, prev, max(1, self._prev_n))
        return float(np.sum(mult * np.abs(now - before) * (prev > 0)))

    def _segment_scores(self, seg: _Segment, counts: Counter, glob_idf: np.ndarray):  # type: ignore[no-untyped-def]
        ids = np.fromiter(counts, dtype=np.int64)
        in_seg = ids < seg.n_vocab
        if not in_seg.any():
            return None
        seg_idf = _idf(self.cfg.method, seg.df[ids[in_seg]], seg.n_docs)
        total = np.zeros(seg.n_docs, dtype=np.float32)
        for tid, g, s in zip(ids[in_seg].tolist(), glob_idf[in_seg].tolist(), seg_idf.tolist()):
            if s <= 0:
                continue
            factor = counts[tid] * g / s  # rescale the segment's IDF to the global one
            total += np.float32(factor) * seg.model.get_scores_from_ids([tid])
        return total * seg.alive

    def __len__(self) -> int:
        return self.n_live

    @property
    def n_terms(self) -> int:
        """Distinct terms indexed (the vocabulary, deleted passages' terms included until a
        merge)."""
        return len(self.vocab)

    @property
    def n_segments(self) -> int:
        """Segments on disk."""
        return len(self.segments)

    def __contains__(self, chunk_id: str) -> bool:
        return chunk_id in self._where or chunk_id in self._pending

    def ids(self) -> set[str]:
        """Every live passage id (committed or pending)."""
        return set(self._where) | set(self._pending)

    # -- persistence --------------------------------------------------------------------------
    def _persist(self) -> None:
        if self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        self._gen += 1
        keep: set[str] = set()
        sums: dict[str, dict[str, Any]] = {}
        segs_meta = []
        for seg in self.segments:
            base = f"bm25-{seg.name}"
            arrays = {
                "data": seg.model.scores["data"],
                "indices": seg.model.scores["indices"],
                "indptr": seg.model.scores["indptr"],
                "tokens": seg.tokens,
                "offsets": seg.offsets,
                "df": seg.df,
            }
            # every file is written whole under a temporary name, synced and renamed: a kill
            # mid-write leaves a stray temporary file, never a torn one under a real name
            fresh = seg.name not in self._on_disk  # segments are immutable once written
            for key, arr in arrays.items():
                fname = f"{base}.{key}.npy"
                keep.add(fname)
                if fresh:
                    sums[fname] = atomic_write_bytes(self.folder / fname, npy_bytes(arr))
            if fresh or seg.alive_file is None:
                seg.alive_file = f"{base}.alive-{self._gen}.npy"
                sums[seg.alive_file] = atomic_write_bytes(
                    self.folder / seg.alive_file, npy_bytes(seg.alive)
                )
            alive_name = seg.alive_file
            keep.add(alive_name)
            rows_name = f"{base}.rows.json"
            if fresh:
                sums[rows_name] = atomic_write_bytes(
                    self.folder / rows_name, json.dumps(seg.rows).encode()
                )
            keep.add(rows_name)
            segs_meta.append(
                {
                    "name": seg.name,
                    "n_vocab": seg.n_vocab,
                    "alive": alive_name,
                    "num_docs": int(seg.model.scores["num_docs"]),
                }
            )
        sums.update(self._write_vocab())
        keep.update(name for name, _ in self._vocab_parts)
        df_name = f"bm25-df-{self._gen}.npy"
        sums[df_name] = atomic_write_bytes(self.folder / df_name, npy_bytes(self.df))
        keep.add(df_name)
        for name in keep - sums.keys():  # immutable files written by an earlier commit
            known = self._sums.get(name)
            if known is None:  # written before checksums: recorded as they are now
                known = _sum_of(self.folder / name)
            sums[name] = known
        write_manifest(
            self.folder,
            "bm25.json",
            {
                "generation": self._gen,
                "seq": self._seq,
                "n_live": self.n_live,
                "method": self.cfg.method,
                "k1": self.cfg.k1,
                "b": self.cfg.b,
                "vocab_parts": [name for name, _ in self._vocab_parts],
                "df": df_name,
                "segments": segs_meta,
                "files": sums,
            },
        )
        self._sums = sums
        self._dirty = False
        self._on_disk = {seg.name for seg in self.segments}
        remove_stale(self.folder, "bm25-", keep)

    def _write_vocab(self) -> dict[str, dict[str, Any]]:
        """Write the terms added since the last commit as a new part (every part again as
        one when they have grown many); the checksums of the files written."""
        assert self.folder is not None
        written = self._vocab_parts[-1][1] if self._vocab_parts else 0
        if len(self.vocab) == written and self._vocab_parts:
            return {}
        start = 0 if len(self._vocab_parts) >= _MAX_VOCAB_PARTS else written
        terms = list(self.vocab)[start:]  # insertion order is id order
        name = f"bm25-vocab-{self._gen}.json"
        out = {name: atomic_write_bytes(self.folder / name, json.dumps(terms).encode())}
        if start == 0:
            self._vocab_parts = []
        self._vocab_parts.append((name, len(self.vocab)))
        return out

    def _read_vocab(self, folder: Path, parts: list[str], text: Any) -> dict[str, int]:
        """The vocabulary from its parts, starting from the previous load's where its parts
        are the first of these, unchanged (a reader reloading after a commit)."""
        prev = self._previous
        vocab: dict[str, int] = {}
        done = 0
        if prev is not None and prev._vocab_parts:
            names = [name for name, _ in prev._vocab_parts]
            same = names == parts[: len(names)] and all(
                prev._sums.get(n) is not None and prev._sums.get(n) == self._manifest_sums.get(n)
                for n in names
            )
            if same and len(prev.vocab) == prev._vocab_parts[-1][1]:
                vocab = dict(prev.vocab)
                self._vocab_parts = list(prev._vocab_parts)
                done = len(names)
        for name in parts[done:]:
            terms = text(name)
            if not isinstance(terms, list) or not all(isinstance(t, str) for t in terms):
                raise corrupt(folder / name, "it is not a list of terms")
            for t in terms:
                vocab[t] = len(vocab)
            self._vocab_parts.append((name, len(vocab)))
        return vocab

    def _reusable(self, meta: dict[str, Any]) -> _Segment | None:
        """The previous load's segment of this name, when its files are the same ones."""
        prev = self._previous
        if prev is None:
            return None
        seg = next((s for s in prev.segments if s.name == meta["name"]), None)
        if seg is None or seg.n_vocab != meta["n_vocab"]:
            return None
        base = f"bm25-{seg.name}"
        names = [f"{base}.{key}.npy" for key in _ARRAYS] + [f"{base}.rows.json"]
        if all(
            prev._sums.get(n) is not None and prev._sums.get(n) == self._manifest_sums.get(n)
            for n in names
        ):
            return seg
        return None

    def _load(self, folder: Path, manifest: dict) -> None:  # type: ignore[type-arg]
        sums: dict[str, Any] = manifest.get("files") or {}

        def npy(name: str) -> np.ndarray:
            return load_npy_checked(folder / name, sums.get(name))

        def text(name: str) -> Any:
            path = folder / name
            data = read_checked(path, sums.get(name))
            with damaged(path):
                return json.loads(data)

        self._manifest_sums = sums
        self._gen = manifest["generation"]
        self._seq = manifest["seq"]
        self.n_live = manifest["n_live"]
        if "vocab" in manifest:  # written before vocabulary parts: one {term: id} file
            self.vocab = text(manifest["vocab"])
            if not isinstance(self.vocab, dict):
                raise corrupt(folder / manifest["vocab"], "it is not a vocabulary")
        else:
            self.vocab = self._read_vocab(folder, manifest["vocab_parts"], text)
        self.df = npy(manifest["df"])
        if len(self.df) != len(self.vocab):
            raise corrupt(folder / manifest["df"], "its length does not fit the vocabulary")
        for meta in manifest["segments"]:
            base = f"bm25-{meta['name']}"
            old = self._reusable(meta)
            if old is not None:  # segments are immutable: only its deletions may be new
                alive = old.alive if old.alive_file == meta["alive"] else npy(meta["alive"])
                seg = _Segment(
                    old.name,
                    old.model,
                    old.rows,
                    old.tokens,
                    old.offsets,
                    old.df,
                    old.n_vocab,
                    alive,
                    meta["alive"],
                )
                if len(alive) != seg.n_docs:
                    raise corrupt(folder / meta["alive"], "it does not fit its segment's rows")
                self._add_loaded(seg)
                continue
            model = self._bm25s.BM25(method=manifest["method"], k1=manifest["k1"], b=manifest["b"])
            model.scores = {
                "data": npy(f"{base}.data.npy"),
                "indices": npy(f"{base}.indices.npy"),
                "indptr": npy(f"{base}.indptr.npy"),
                "num_docs": meta["num_docs"],
            }
            model.vocab_dict = {}
            model.nonoccurrence_array = None
            rows = text(f"{base}.rows.json")
            seg = _Segment(
                meta["name"],
                model,
                list(rows),
                npy(f"{base}.tokens.npy"),
                npy(f"{base}.offsets.npy"),
                npy(f"{base}.df.npy"),
                meta["n_vocab"],
                npy(meta["alive"]),
                meta["alive"],
            )
            seg.check(folder / f"{base}.rows.json")
            self._add_loaded(seg)
        self._sums = dict(sums)
        self._previous = None  # not kept alive past the load

    def _add_loaded(self, seg: _Segment) -> None:
        self.segments.append(seg)
        self._on_disk.add(seg.name)
        si = len(self.segments) - 1
        alive = seg.alive
        for r in np.flatnonzero(alive).tolist():
            self._where[seg.rows[r]] = (si, r)


def _sum_of(path: Path) -> dict[str, Any]:
    """Size and checksum of a file already on disk (recorded for an index that had none)."""
    return file_sum(path.read_bytes())
