"""Shared pieces of the benchmarks: data location, store building, splits, result writing."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data"
RESULTS = ROOT / "benchmarks" / "results"


def base_parser(description: str) -> argparse.ArgumentParser:
    """Arguments every benchmark takes."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="data folder (../shared/data)")
    ap.add_argument("--out", type=Path, default=RESULTS, help="where NAME.json/.md are written")
    ap.add_argument(
        "--store",
        type=Path,
        default=None,
        help="reuse/keep the built store here (default: a temporary folder)",
    )
    return ap


def split_of(qid: str) -> str:
    """Queries are split in two by id parity: 'tune' (even) chooses defaults, 'heldout' (odd)
    is only ever reported, never used to choose anything."""
    try:
        return "tune" if int(qid) % 2 == 0 else "heldout"
    except ValueError:
        return "tune" if sum(map(ord, qid)) % 2 == 0 else "heldout"


def half_of(qid: str) -> str:
    """A second split of the queries, independent of id parity (issue 25): 'choose' or 'report'
    by the parity of the first byte of a salted SHA-256 of the id. The parity halves had been
    looked at too often to be held out any more; this one chooses nothing on 'report'."""
    digest = hashlib.sha256(f"issue25-scifact:{qid}".encode()).digest()
    return "choose" if digest[0] % 2 == 0 else "report"


def doc_ranking(
    chunk_ids: Iterable[str], doc_of: Callable[[str], str], limit: int = 100
) -> list[str]:
    """Collapse a ranked list of passages to a ranked list of documents (best passage wins)."""
    out: list[str] = []
    seen: set[str] = set()
    for cid in chunk_ids:
        did = doc_of(cid)
        if did not in seen:
            seen.add(did)
            out.append(did)
            if len(out) == limit:
                break
    return out


def load_average() -> float | None:
    """The 1-minute load average (None where the system has none): timings record it."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def retrieved(res: Any) -> list[Any]:
    """A result's retrieved hits: pinned documents (``@id`` in a question) never count."""
    return [h for h in res.hits if not h.pinned]


def chunk_doc(cid: str) -> str:
    """The document id of a Pensive passage id (``doc#hash``)."""
    return cid.rsplit("#", 1)[0]


def environment() -> dict[str, Any]:
    """What the numbers were measured on."""
    import os

    import pensive_core

    info: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "pensive": pensive_core.__version__,
    }
    for mod in (
        "torch",
        "faiss",
        "bm25s",
        "sentence_transformers",
        "langchain_core",
        "langchain_community",
        "langchain_classic",
        "llama_index.core",
        "rank_bm25",
    ):
        try:
            m = __import__(mod, fromlist=["_"])
            info[mod] = getattr(m, "__version__", "?")
        except ImportError:
            pass
    return info


def write_results(name: str, out: Path, payload: dict[str, Any], markdown: str) -> None:
    """Write ``NAME.json`` and ``NAME.md``; a payload that does not say which commit it
    measured (no full commit hash anywhere in it) gets ``source`` (:func:`source_state`), and
    its page a line naming the commit.

    Raises:
        ValueError: If ``name`` is empty or names a folder (``--name ../x`` would write
            outside ``out``).
    """
    if not name or Path(name).name != name or name in (".", ".."):
        raise ValueError(f"a results name is a file name without a folder, got {name!r}")
    out.mkdir(parents=True, exist_ok=True)
    if "source" not in payload and not re.search(r"\b[0-9a-f]{40}\b", json.dumps(payload)):
        payload = {**payload, "source": source_state()}
        commit = payload["source"]["commit"] or "unknown"
        dirty = payload["source"]["pensive_core_uncommitted"]
        markdown = markdown.rstrip("\n") + (
            f"\n\nMeasured on commit {commit}"
            + (f" with uncommitted changes to {', '.join(dirty)}" if dirty else "")
            + ".\n"
        )
    (out / f"{name}.json").write_text(json.dumps(payload, indent=2, sort_keys=False) + "\n")
    (out / f"{name}.md").write_text(markdown)
    print(f"wrote {out / (name + '.json')} and {out / (name + '.md')}")


def source_state() -> dict[str, Any]:
    """The commit measured, and whether the library's working tree differed from it (numbers
    taken on uncommitted code say so)."""
    import subprocess

    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10
            ).stdout
        except (OSError, subprocess.SubprocessError):
            return ""

    changed = git("status", "--porcelain", "--", "pensive_core")
    return {
        "commit": git("rev-parse", "HEAD").strip() or None,
        "pensive_core_uncommitted": [line[3:] for line in changed.splitlines()],
    }


# -- explain the failures ----------------------------------------------------------------------
def add_explain_arguments(ap: argparse.ArgumentParser) -> None:
    """``--explain-failures DIR`` and ``--limit N`` (the diagnostic mode of a benchmark)."""
    ap.add_argument(
        "--explain-failures",
        type=Path,
        default=None,
        metavar="DIR",
        help="run the default configuration only and write one Pensive.explain JSON per "
        "failing question (an expected document not in the top k) and DIR/summary.json; "
        "no results file is written",
    )
    ap.add_argument(
        "--limit", type=int, default=None, help="with --explain-failures: the first N questions"
    )


def explain_failures(
    p: Any, questions: Iterable[dict[str, Any]], out: Path, k: int
) -> dict[str, Any]:
    """Explain each question and keep the failing ones: one ``out/ID.json`` per question whose
    expected documents are not all in the final hits, and ``out/summary.json`` (also returned):
    how many expected items were lost at each stage, for which reason, and which stage moved
    those cut by k below the first k.

    Args:
        p: An open :class:`~pensive_core.Pensive` store.
        questions: ``{"id", "text", "expect": [document ids], "filters", "split"}`` each (the
            last two optional; the summary counts failures per split).
        out: The folder to write (created).
        k: Hits asked for (the benchmark's cut-off).

    Returns:
        The summary.
    """
    import re
    from collections import Counter

    from pensive_core import NotFoundError

    out.mkdir(parents=True, exist_ok=True)
    lost_at: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    causes: Counter[str] = Counter()
    n = failing = lost_items = found_items = 0
    splits: dict[str, Counter[str]] = {}
    for q in questions:
        n += 1
        split = splits.setdefault(str(q.get("split", "all")), Counter())
        split["questions"] += 1
        try:
            ex = p.explain(q["text"], list(q["expect"]), k, filters=q.get("filters"))
        except NotFoundError:
            failing += 1
            split["failing"] += 1
            lost_at["not in store"] += len(q["expect"])
            continue
        lost = [t for t in ex.items if t.kind != "missing" and not t.found]
        found_items += sum(1 for t in ex.items if t.found)
        lost_at["not in store"] += len(ex.missing)
        if not lost and not ex.missing:
            continue
        failing += 1
        split["failing"] += 1
        lost_items += len(lost)
        for t in lost:
            lost_at[str(t.lost_at)] += 1
            reasons[f"{t.lost_at}: {t.reason}"] += 1
            if t.cause:
                moved = t.stage(t.cause)
                causes[f"{t.cause}: {moved.reason if moved else None}"] += 1
        name = re.sub(r"[^A-Za-z0-9._-]", "_", str(q["id"]))[:120] or "question"
        record = {"id": q["id"], **ex.to_dict()}
        (out / f"{name}.json").write_text(json.dumps(record, indent=1, ensure_ascii=False))
    summary = {
        "questions": n,
        "failing": failing,
        "k": k,
        "expected_found": found_items,
        "expected_lost": lost_items,
        "lost_at": dict(lost_at.most_common()),
        "reason": dict(reasons.most_common()),
        "cut_by_k_moved_below_by": dict(causes.most_common()),
        "by_split": {name: dict(c) for name, c in splits.items()},
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"explained {failing} failing of {n} questions into {out}: {summary}")
    return summary
