"""IR metrics, BEIR loading and latency helpers for the Pensive benchmarks.

Metrics are computed with `ir-measures <https://ir-measur.es>`_ (pytrec_eval
backend).  Every query that has relevance judgements counts towards the mean:
a query that the run does not contain (or for which it retrieved nothing)
scores 0 on every measure, so a system cannot look better by skipping hard
queries.  Run entries for queries without judgements are ignored.

``ir_measures`` is imported lazily so that importing this module is cheap and
``load_beir`` / ``percentiles`` work without the benchmark requirements.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

__all__ = ["DEFAULT_MEASURES", "evaluate", "load_beir", "percentiles", "ranking_to_run"]

DEFAULT_MEASURES: tuple[str, ...] = ("nDCG@10", "R@10", "R@100")


def evaluate(
    run: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, int]],
    measures: Sequence[str] = DEFAULT_MEASURES,
) -> dict[str, float]:
    """Mean of each measure over all judged queries.

    Args:
        run: ``{query_id: {doc_id: score}}``; higher score means ranked higher.
            Use :func:`ranking_to_run` to turn ranked id lists into this form.
        qrels: ``{query_id: {doc_id: relevance}}``.
        measures: Measure names in ir-measures syntax, e.g. ``"nDCG@10"``.

    Returns:
        ``{measure_name: mean}`` with the names exactly as passed in. The mean is
        taken over the queries in ``qrels``; queries missing from ``run`` or with
        an empty ranking count as 0. Returns 0.0 for every measure when ``qrels``
        is empty.
    """
    import ir_measures

    names = list(measures)
    parsed = [ir_measures.parse_measure(m) for m in names]
    by_str = {str(p): name for p, name in zip(parsed, names, strict=True)}

    qrels_clean = {str(q): {str(d): int(r) for d, r in docs.items()} for q, docs in qrels.items()}
    if not qrels_clean:
        return {name: 0.0 for name in names}
    # Keep only judged queries with at least one retrieved doc: pytrec_eval can
    # mis-handle empty rankings, and unjudged queries must not affect the mean.
    run_clean = {
        str(q): {str(d): float(s) for d, s in docs.items()}
        for q, docs in run.items()
        if str(q) in qrels_clean and docs
    }

    totals = {name: 0.0 for name in names}
    if run_clean:
        for metric in ir_measures.iter_calc(parsed, qrels_clean, run_clean):
            # Providers may or may not emit zero rows for queries absent from the
            # run; only queries we passed in are summed, so either way is fine.
            if metric.query_id in run_clean:
                totals[by_str[str(metric.measure)]] += float(metric.value)
    n = len(qrels_clean)
    return {name: totals[name] / n for name in names}


def ranking_to_run(rankings: Mapping[str, Sequence[str]]) -> dict[str, dict[str, float]]:
    """Turn ranked id lists into an ir-measures run with strictly decreasing scores.

    Args:
        rankings: ``{query_id: [doc_id, ...]}`` best first. Duplicate ids keep
            their first (best) position.

    Returns:
        ``{query_id: {doc_id: score}}`` where the first doc scores ``len(list)``
        and each next one scores 1 less, so ties never reorder the ranking.
    """
    run: dict[str, dict[str, float]] = {}
    for qid, ids in rankings.items():
        scores: dict[str, float] = {}
        n = len(ids)
        for rank, doc_id in enumerate(ids):
            scores.setdefault(str(doc_id), float(n - rank))
        run[str(qid)] = scores
    return run


def load_beir(
    folder: str | Path, split: str = "train"
) -> tuple[dict[str, dict[str, str]], dict[str, str], dict[str, dict[str, int]]]:
    """Load a BEIR-layout dataset (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``).

    Args:
        folder: Dataset folder.
        split: Qrels file name without ``.tsv``.

    Returns:
        ``(corpus, queries, qrels)`` where ``corpus`` is
        ``{doc_id: {"title": str, "text": str}}``, ``queries`` is
        ``{query_id: text}`` restricted to queries that appear in the qrels, and
        ``qrels`` is ``{query_id: {doc_id: relevance}}``.
    """
    folder = Path(folder)
    corpus: dict[str, dict[str, str]] = {}
    for row in _read_jsonl(folder / "corpus.jsonl"):
        corpus[str(row["_id"])] = {
            "title": row.get("title") or "",
            "text": row.get("text") or "",
        }

    qrels: dict[str, dict[str, int]] = {}
    with open(folder / "qrels" / f"{split}.tsv", encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh, delimiter="\t")
        for i, fields in enumerate(reader):
            if not fields or (i == 0 and fields[0].strip().lower() == "query-id"):
                continue
            qid, did, score = fields[0].strip(), fields[1].strip(), fields[2].strip()
            qrels.setdefault(qid, {})[did] = int(float(score))

    queries: dict[str, str] = {}
    for row in _read_jsonl(folder / "queries.jsonl"):
        qid = str(row["_id"])
        if qid in qrels:
            queries[qid] = row.get("text") or ""
    return corpus, queries, qrels


def percentiles(ms_list: Iterable[float]) -> dict[str, float]:
    """Latency percentiles.

    Args:
        ms_list: Per-call latencies in milliseconds.

    Returns:
        ``{"p50": ..., "p95": ...}`` (linear interpolation, as numpy's default);
        NaN for both when the list is empty.
    """
    arr = np.asarray(list(ms_list), dtype=np.float64)
    if arr.size == 0:
        return {"p50": float("nan"), "p95": float("nan")}
    p50, p95 = np.percentile(arr, [50, 95])
    return {"p50": float(p50), "p95": float(p95)}


def _read_jsonl(path: Path) -> Iterable[dict]:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if line:
                yield json.loads(line)
