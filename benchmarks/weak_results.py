"""Weak results: does a query's match signal tell a question the corpus can answer from one it
cannot?

The evaluation set is fixed before any signal is looked at:

- **answerable**: a corpus's own questions that have a relevant document (SciFact train claims
  with qrels, asked of the SciFact abstracts; the HotpotQA-100 questions, asked of their 994
  paragraphs);
- **unanswerable**: questions from *another* dataset asked of that corpus (HotpotQA questions
  and LoCoMo questions on SciFact; SciFact claims and LoCoMo questions on HotpotQA).

The signal and its threshold are chosen on the SciFact corpus's *choose* half
(:func:`benchmarks.common.half_of` of each question's id, salted by its dataset) and reported
on the other SciFact half (*report*) and on the HotpotQA corpus, which chooses nothing.

"Weak" is the positive class: precision = the share of questions flagged weak that were
unanswerable, recall = the share of unanswerable questions flagged weak. AUROC is that of the
signal (lower = weaker) separating unanswerable from answerable questions.

Candidate signals (each per question): the top dense cosine (MiniLM), the existing
``QueryResult.confidence``, the top BM25 score divided by the question's BM25 terms, the overlap
of the dense and BM25 top 10, and logistic fits over two of them (fitted on *choose* only, with
balanced class weights, so a probability is under an even prior). Once the product exists,
``QueryResult.match`` and ``weak`` are read from ``Pensive.query`` and reported the same way.

    python -m benchmarks.weak_results [--data DIR] [--store DIR]
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import base_parser, environment, half_of, source_state, write_results
from benchmarks.multihop import load_hotpot
from benchmarks.scifact_data import build_store
from benchmarks.scifact_data import load as load_scifact
from pensive_core import Pensive

NAME = "weak_results"
CONFIG: dict[str, Any] = {"router": {"l1": False}}  # every question answered by L2/L3
FEATURES = ("dense_top", "confidence", "bm25_per_term", "agreement")


# -- the evaluation set ---------------------------------------------------------------------
def question_sets(data: Path) -> dict[str, list[dict[str, str]]]:
    """Every question by dataset: ``{"id", "text"}`` (ids salted by dataset for the split)."""
    _docs, sf_queries, qrels = load_scifact(data)
    scifact = [{"id": f"scifact:{q}", "text": sf_queries[q]} for q in sorted(qrels)]
    _hdocs, hq = load_hotpot(data)
    hotpot = [{"id": f"hotpotqa:{q['id']}", "text": q["text"]} for q in hq]
    raw = json.loads((data / "locomo" / "locomo_dev.json").read_text())
    locomo = [
        {"id": f"locomo:{s['sample_id']}:{i}", "text": qa["question"], "category": qa["category"]}
        for s in raw
        for i, qa in enumerate(s["qa"])
    ]
    return {"scifact": scifact, "hotpotqa": hotpot, "locomo": locomo}


def split(qid: str) -> str:
    """``choose`` or ``report`` (the salted hash of the question's id)."""
    return half_of(qid)


# -- signals --------------------------------------------------------------------------------
def signals(p: Pensive, text: str) -> dict[str, Any]:
    """The candidate signals of one question, and what ``Pensive.query`` says of it."""
    comps = p.components
    qvec = p.embedder.embed_query(text)
    dense = comps.backend.search(qvec, 10, namespace=comps.config.backend.namespace)  # type: ignore[union-attr]
    bm25 = comps.sparse.search(text, 10, None)
    n_terms = max(1, len(set(comps.sparse.tokenizer.tokenize(text))))  # type: ignore[attr-defined]
    res = p.query(text, k=10)
    top_d = {i for i, _ in dense}
    top_b = {i for i, _ in bm25}
    return {
        "dense_top": float(dense[0][1]) if dense else 0.0,
        "confidence": float(res.confidence),
        "bm25_per_term": float(bm25[0][1]) / n_terms if bm25 else 0.0,
        "agreement": len(top_d & top_b) / 10.0,
        "match": getattr(res, "match", None),
        "weak": getattr(res, "weak", None),
        "tier": res.tier,
        "hits": len(res.hits),
    }


def measure(
    p: Pensive, questions: Sequence[dict[str, str]], answerable: bool, label: str
) -> list[dict[str, Any]]:
    rows = []
    t = time.perf_counter()
    for q in questions:
        rows.append({**q, "answerable": answerable, **signals(p, q["text"])})
    print(f"{label}: {len(rows)} questions in {time.perf_counter() - t:.0f} s", flush=True)
    return rows


def gold_removed(root: Path, qs: dict[str, list[dict[str, str]]], data: Path) -> list[Any]:
    """A harder report set, added after the first run (it chooses nothing): the *report*
    half's SciFact claims split in two by another salted hash; one part's relevant abstracts
    are deleted from a copy of the store, so those claims are on topic but unanswerable; the
    other part's claims whose relevant abstracts all remain are the answerable ones."""
    _docs, _q, qrels = load_scifact(data)
    report = [q for q in qs["scifact"] if split(q["id"]) == "report"]

    def side(qid: str) -> str:
        return "gone" if hashlib.sha256(f"gold-removed:{qid}".encode()).digest()[0] % 2 else "kept"

    gone = {d for q in report if side(q["id"]) == "gone" for d in qrels[q["id"].split(":", 1)[1]]}
    unans = [q for q in report if side(q["id"]) == "gone"]
    ans = [
        q
        for q in report
        if side(q["id"]) == "kept" and not set(qrels[q["id"].split(":", 1)[1]]) & gone
    ]
    folder = root / "scifact_gold_removed"
    if not folder.exists():
        shutil.copytree(root / "scifact", folder, ignore=shutil.ignore_patterns("writer.lock"))
    with Pensive(folder, config=CONFIG) as p:
        for did in sorted(gone):
            if p.components.archive.document(did) is not None:
                p.delete(did)
        return measure(p, ans, True, "scifact (gold kept)") + measure(
            p, unans, False, "scifact (gold removed)"
        )


# -- statistics -----------------------------------------------------------------------------
def auroc(scores: Sequence[float], weak: Sequence[bool]) -> float:
    """AUROC of ``-score`` for the weak (positive) class; ties count half."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(weak, dtype=bool)
    pos, neg = -s[y], -s[~y]
    if not len(pos) or not len(neg):
        return float("nan")
    order = np.argsort(np.concatenate([pos, neg]), kind="mergesort")
    ranks = np.empty(len(order))
    allv = np.concatenate([pos, neg])[order]
    # average ranks of ties
    i = 0
    while i < len(allv):
        j = i
        while j + 1 < len(allv) and allv[j + 1] == allv[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    r_pos = ranks[: len(pos)].sum()
    return float((r_pos - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def at_threshold(scores: Sequence[float], weak: Sequence[bool], below: float) -> dict[str, Any]:
    """Precision / recall of "weak" (score < ``below``), and the answerable share kept."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(weak, dtype=bool)
    flagged = s < below
    tp = int((flagged & y).sum())
    return {
        "threshold": round(below, 4),
        "weak_precision": round(tp / max(1, int(flagged.sum())), 4),
        "weak_recall": round(tp / max(1, int(y.sum())), 4),
        "answerable_flagged_weak": round(int((flagged & ~y).sum()) / max(1, int((~y).sum())), 4),
        "flagged": int(flagged.sum()),
        "n_weak": int(y.sum()),
        "n_answerable": int((~y).sum()),
    }


def youden(scores: Sequence[float], weak: Sequence[bool]) -> float:
    """The threshold maximising recall of weak + recall of answerable (Youden's J), placed
    midway between neighbouring scores."""
    s = np.sort(np.unique(np.asarray(scores, dtype=float)))
    cuts = np.concatenate([[s[0] - 1e-6], (s[1:] + s[:-1]) / 2, [s[-1] + 1e-6]])
    y = np.asarray(weak, dtype=bool)
    arr = np.asarray(scores, dtype=float)
    best, best_j = float(cuts[0]), -1.0
    for c in cuts:
        flagged = arr < c
        j = (flagged & y).sum() / max(1, y.sum()) + (~flagged & ~y).sum() / max(1, (~y).sum())
        if j > best_j:
            best, best_j = float(c), float(j)
    return best


def fit_logistic(x: np.ndarray, answerable: np.ndarray, iters: int = 50) -> np.ndarray:
    """Logistic regression (Newton), classes weighted to an even prior, a tiny ridge.
    Returns ``[intercept, w1, w2, ...]`` for P(answerable)."""
    xb = np.hstack([np.ones((len(x), 1)), x])
    y = answerable.astype(float)
    w_pos = 0.5 / max(1e-9, y.mean())
    w_neg = 0.5 / max(1e-9, 1 - y.mean())
    sw = np.where(y > 0, w_pos, w_neg)
    beta = np.zeros(xb.shape[1])
    for _ in range(iters):
        p = 1 / (1 + np.exp(-xb @ beta))
        grad = xb.T @ (sw * (y - p)) - 1e-4 * beta
        hess = -(xb.T * (sw * p * (1 - p))) @ xb - 1e-4 * np.eye(len(beta))
        beta -= np.linalg.solve(hess, grad)
    return beta


def predict(beta: Sequence[float], x: np.ndarray) -> np.ndarray:
    xb = np.hstack([np.ones((len(x), 1)), x])
    return np.asarray(1 / (1 + np.exp(-xb @ np.asarray(beta))))


def calibration(probs: Sequence[float], answerable: Sequence[bool], bins: int = 5) -> list[Any]:
    """Mean predicted vs observed answerable share per probability bin (weighted to an even
    prior, as the fit was)."""
    p = np.asarray(probs, dtype=float)
    y = np.asarray(answerable, dtype=bool)
    w = np.where(y, 0.5 / max(1e-9, y.mean()), 0.5 / max(1e-9, 1 - y.mean()))
    out = []
    for lo in np.linspace(0, 1, bins, endpoint=False):
        m = (p >= lo) & (p < lo + 1 / bins + (1e-9 if lo + 1 / bins >= 1 else 0))
        if m.any():
            out.append(
                {
                    "bin": f"{lo:.1f}-{lo + 1 / bins:.1f}",
                    "n": int(m.sum()),
                    "mean_match": round(float(p[m].mean()), 3),
                    "answerable_share_even_prior": round(
                        float((w[m] * y[m]).sum() / w[m].sum()), 3
                    ),
                }
            )
    return out


# -- the run --------------------------------------------------------------------------------
def evaluate_signal(
    rows: Sequence[dict[str, Any]], score: Callable[[dict[str, Any]], float], below: float
) -> dict[str, Any]:
    s = [score(r) for r in rows]
    weak = [not r["answerable"] for r in rows]
    return {"auroc": round(auroc(s, weak), 4), **at_threshold(s, weak, below)}


def main(argv: list[str] | None = None) -> None:
    ap = base_parser(__doc__ or "")
    args = ap.parse_args(argv)
    root = args.store or Path(tempfile.mkdtemp(prefix="pensive-weak-"))
    qs = question_sets(args.data)

    sf_docs, _q, _qrels = load_scifact(args.data)
    print(f"SciFact store in {root / 'scifact'} ({len(sf_docs)} abstracts) ...", flush=True)
    p, sf_ingest = build_store(root / "scifact", sf_docs, CONFIG)
    sf_rows = (
        measure(p, qs["scifact"], True, "scifact on scifact")
        + measure(p, qs["hotpotqa"], False, "hotpotqa on scifact")
        + measure(p, qs["locomo"], False, "locomo on scifact")
    )
    p.close()
    hard_rows = gold_removed(root, qs, args.data)
    h_docs, _hq = load_hotpot(args.data)
    print(f"HotpotQA store in {root / 'hotpotqa'} ({len(h_docs)} paragraphs) ...", flush=True)
    p, h_ingest = build_store(root / "hotpotqa", h_docs, CONFIG)
    h_rows = (
        measure(p, qs["hotpotqa"], True, "hotpotqa on hotpotqa")
        + measure(p, qs["scifact"], False, "scifact on hotpotqa")
        + measure(p, qs["locomo"], False, "locomo on hotpotqa")
    )
    p.close()

    choose = [r for r in sf_rows if split(r["id"]) == "choose"]
    report_sets = {
        "scifact_report": [r for r in sf_rows if split(r["id"]) == "report"],
        "hotpotqa": h_rows,
        "scifact_gold_removed": hard_rows,
    }

    # -- choose: every candidate's AUROC, its threshold, and two logistic fits ------------------
    y_ans = np.asarray([r["answerable"] for r in choose])
    candidates: dict[str, dict[str, Any]] = {}
    for f in FEATURES:
        s = [r[f] for r in choose]
        below = youden(s, [not a for a in y_ans])
        candidates[f] = {"kind": "single", "features": [f], "threshold": below}
    for pair in (("dense_top", "bm25_per_term"), ("dense_top", "confidence")):
        x = np.asarray([[r[f] for f in pair] for r in choose])
        beta = fit_logistic(x, y_ans)
        probs = predict(beta, x)
        candidates["logistic(" + ", ".join(pair) + ")"] = {
            "kind": "logistic",
            "features": list(pair),
            "coef": [round(float(b), 4) for b in beta],
            "threshold": youden(list(probs), [not a for a in y_ans]),
        }
    # the product's calibration: a logistic over the top dense cosine alone
    x1 = np.asarray([[r["dense_top"]] for r in choose])
    beta1 = fit_logistic(x1, y_ans)
    candidates["logistic(dense_top)"] = {
        "kind": "logistic",
        "features": ["dense_top"],
        "coef": [round(float(b), 4) for b in beta1],
        "threshold": youden(list(predict(beta1, x1)), [not a for a in y_ans]),
    }
    if any(r["match"] is not None for r in sf_rows):  # the product exists
        candidates["QueryResult.match (product)"] = {
            "kind": "product",
            "features": ["match"],
            "threshold": None,
        }

    def scorer(c: dict[str, Any]) -> Callable[[dict[str, Any]], float]:
        if c["kind"] == "logistic":
            return lambda r: float(
                predict(c["coef"], np.asarray([[r[f] for f in c["features"]]]))[0]
            )
        f = c["features"][0]
        return lambda r: float(r[f] if r[f] is not None else 0.0)  # no match: no answer

    from pensive_core.query.match import WEAK_BELOW  # noqa: PLC0415 (the product's threshold)

    results: dict[str, Any] = {}
    for name, c in candidates.items():
        below = c["threshold"] if c["threshold"] is not None else WEAK_BELOW
        c["threshold"] = round(float(below), 4)
        sc = scorer(c)
        results[name] = {
            "how": {k: v for k, v in c.items()},
            "choose": evaluate_signal(choose, sc, below),
            **{n: evaluate_signal(rs, sc, below) for n, rs in report_sets.items()},
        }
        print(name, {k: v["auroc"] for k, v in results[name].items() if k != "how"}, flush=True)
    product = results.get("QueryResult.match (product)")
    if product is not None:
        product["calibration"] = {
            n: calibration([r["match"] for r in rs], [r["answerable"] for r in rs])
            for n, rs in report_sets.items()
        }
        product["weak_flag"] = {
            n: at_threshold(
                [0.0 if r["weak"] else 1.0 for r in rs], [not r["answerable"] for r in rs], 0.5
            )
            for n, rs in report_sets.items()
        }

    def count(rs: Sequence[dict[str, Any]]) -> dict[str, int]:
        return {
            "answerable": sum(r["answerable"] for r in rs),
            "unanswerable": sum(not r["answerable"] for r in rs),
        }

    payload = {
        "benchmark": NAME,
        "data": {
            "scifact_corpus": {
                "documents": len(sf_docs),
                "answerable": "SciFact train claims with qrels",
                "unanswerable": "HotpotQA-100 questions + LoCoMo dev questions (all categories)",
                "choose": count(choose),
                "report": count(report_sets["scifact_report"]),
            },
            "hotpotqa_corpus": {
                "documents": len(h_docs),
                "answerable": "HotpotQA-100 questions",
                "unanswerable": "SciFact train claims with qrels + LoCoMo dev questions",
                "report": count(h_rows),
            },
            "scifact_gold_removed": count(hard_rows),
            "split": "benchmarks.common.half_of('<dataset>:<id>'): choose / report; the "
            "HotpotQA corpus chooses nothing",
            "scifact_gold_removed_how": "added after the first run as a harder check (chooses "
            "nothing): report-half claims split by sha256('gold-removed:<id>'); one part's "
            "relevant abstracts deleted from a copy of the store (unanswerable, on topic), the "
            "other part's claims whose abstracts all remain (answerable)",
            "threshold_rule": "Youden's J (recall of weak + recall of answerable) on choose",
        },
        "config": CONFIG,
        "ingest": {"scifact": sf_ingest, "hotpotqa": h_ingest},
        "signals": results,
        "source": source_state(),
        "environment": environment(),
    }
    write_results(NAME, args.out, payload, render(payload))


def fmt(x: float) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def render(payload: dict[str, Any]) -> str:
    d = payload["data"]
    lines = [
        "# Weak results: does the match signal separate answerable from unanswerable questions?\n",
        f"SciFact corpus ({d['scifact_corpus']['documents']} abstracts): answerable = "
        f"{d['scifact_corpus']['answerable']}; unanswerable = {d['scifact_corpus']['unanswerable']}. "
        f"HotpotQA corpus ({d['hotpotqa_corpus']['documents']} paragraphs): answerable = "
        f"{d['hotpotqa_corpus']['answerable']}; unanswerable = "
        f"{d['hotpotqa_corpus']['unanswerable']}.\n",
        f"Chosen on the SciFact corpus's *choose* half ({d['scifact_corpus']['choose']}); "
        f"reported on its *report* half ({d['scifact_corpus']['report']}) and on the HotpotQA "
        f"corpus ({d['hotpotqa_corpus']['report']}), which chose nothing. Split: {d['split']}. "
        f"Threshold: {d['threshold_rule']}. Weak = positive class.\n",
        f"Harder set ({d['scifact_gold_removed']}): {d['scifact_gold_removed_how']}.\n",
    ]
    sets = {
        "choose": "SciFact choose half (chose)",
        "scifact_report": "SciFact report half",
        "hotpotqa": "HotpotQA corpus",
        "scifact_gold_removed": "SciFact, relevant abstracts removed (harder, added later)",
    }
    lines += [
        "AUROC (weak vs answerable; 1.0 = perfect, 0.5 = chance):",
        "",
        "| signal | threshold | " + " | ".join(sets.values()) + " |",
        "|---|---|" + "---|" * len(sets),
    ]
    for name, r in payload["signals"].items():
        cells = " | ".join(fmt(r[k]["auroc"]) if k in r else "-" for k in sets)
        lines.append(f"| {name} | {r['how']['threshold']} | {cells} |")
    lines += [
        "",
        "At each signal's threshold: weak precision / weak recall / share of answerable "
        "questions flagged weak:",
        "",
        "| signal | " + " | ".join(sets.values()) + " |",
        "|---|" + "---|" * len(sets),
    ]
    for name, r in payload["signals"].items():
        cells = " | ".join(
            f"{fmt(r[k]['weak_precision'])} / {fmt(r[k]['weak_recall'])} / "
            f"{fmt(r[k]['answerable_flagged_weak'])}"
            if k in r
            else "-"
            for k in sets
        )
        lines.append(f"| {name} | {cells} |")
    product = payload["signals"].get("QueryResult.match (product)")
    if product is not None:
        lines += [
            "",
            "Calibration of `QueryResult.match` (answerable share weighted to an even "
            "prior, per bin of match):",
            "",
        ]
        for n, bins in product["calibration"].items():
            lines.append(
                f"- {n}: "
                + "; ".join(
                    f"{b['bin']}: n={b['n']}, mean {b['mean_match']}, observed "
                    f"{b['answerable_share_even_prior']}"
                    for b in bins
                )
            )
    lines += [
        "",
        "Notes:",
        "",
        "- The product's `QueryResult.match` is the best *returned* hit's match, the "
        "`dense_top` row the best dense cosine over the store; they differ on HotpotQA by two "
        'answerable questions ("How many times was ...") that the aggregation stage answers '
        "with a count of 0 and no hits: an empty answer is weak.",
        "- The harder set shows what the signal is: questions from another dataset are told "
        "apart almost perfectly, but an on-topic claim whose relevant abstract is gone still "
        "finds close neighbours (AUROC about 0.66 for every signal, the existing confidence "
        "included, and 3% of those claims flagged weak). `match` says the store holds "
        "passages close to the question, not that a passage answers it.",
    ]
    lines += [
        "",
        "Reproduce: `python -m benchmarks.weak_results --store /tmp/weak-bench/run` (builds the "
        "SciFact and HotpotQA stores once, ~11 min on 2 cores, and reuses them; the SciFact "
        "store of this run was a copy of one built with the default configuration).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
