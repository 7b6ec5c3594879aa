"""SciFact in BEIR layout, read into Pensive documents, and a built store."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.metrics import load_beir
from pensive_core import Document, Pensive


def load(data: Path) -> tuple[list[Document], dict[str, str], dict[str, dict[str, int]]]:
    """SciFact documents (title + abstract), train queries with judgements, and qrels."""
    if not (data / "scifact" / "corpus.jsonl").is_file():
        raise SystemExit(f"error: SciFact not found under {data / 'scifact'}; pass --data DIR")
    corpus, queries, qrels = load_beir(data / "scifact", split="train")
    docs = [
        Document(
            id=did,
            text=f"{row['title']}\n\n{row['text']}".strip(),
            metadata={"title": row["title"]},
        )
        for did, row in corpus.items()
        if (row["title"] + row["text"]).strip()
    ]
    return docs, queries, qrels


def build_store(
    folder: Path, docs: list[Document], config: dict[str, Any] | None = None
) -> tuple[Pensive, dict[str, Any]]:
    """Open (or build) a Pensive store over ``docs``; returns it and ingest figures."""
    p = Pensive(folder, config=config)
    t = time.perf_counter()
    report = p.ingest(docs)
    seconds = time.perf_counter() - t
    info = {
        "seconds": round(seconds, 2),
        "documents": len(docs),
        "chunks_embedded": report.chunks_embedded,
        "chunks_reused": report.chunks_reused,
        "unchanged_documents": report.unchanged,
    }
    return p, info


def export_chunks(p: Pensive) -> tuple[list[str], list[str], np.ndarray]:
    """Every passage of a store, in a stable order, with its stored vector."""
    rows = p.components.archive.db.execute(
        "SELECT id, text FROM chunks ORDER BY doc_id, ordinal"
    ).fetchall()
    ids = [r[0] for r in rows]
    texts = [r[1] for r in rows]
    vecs = p.components.backend.fetch(ids)  # type: ignore[union-attr]
    return ids, texts, np.stack([vecs[i] for i in ids])
