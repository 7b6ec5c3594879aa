"""Boilerplate: does a line that recurs across many documents win vague questions?

The Paul Graham essays (``niah_haystack/paul_graham_essays``) are ingested with the default
configuration (L1 off). A sentence is *recurring* when it appears verbatim (whitespace
normalised) in at least ``--min-docs`` essays; a passage is *boilerplate* when recurring
sentences make up at least half of its characters. The vague questions in
``benchmarks/data/vague_essay_questions.json`` were written before any result on the essays was
looked at, in everyday wording. Counted: questions whose first hit (and any of whose top 3) is
boilerplate, and how likely the match signal says that hit answers.

    python -m benchmarks.boilerplate [--data DIR] [--store DIR]
"""

from __future__ import annotations

import json
import re
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, base_parser, environment, source_state, write_results
from pensive_core import Document, Pensive

NAME = "boilerplate"
QUESTIONS = ROOT / "benchmarks" / "data" / "vague_essay_questions.json"
CONFIG: dict[str, Any] = {"router": {"l1": False}}


def sentences(text: str) -> list[str]:
    """Sentences, whitespace normalised (a line wrapped mid-sentence is one sentence)."""
    flat = re.sub(r"\s+", " ", text).strip()
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", flat) if len(s.strip()) >= 10]


def recurring(docs: list[Document], min_docs: int) -> dict[str, int]:
    """Sentences found in at least ``min_docs`` documents, with how many."""
    seen: Counter[str] = Counter()
    for d in docs:
        seen.update(set(sentences(d.text)))
    return {s: n for s, n in seen.items() if n >= min_docs}


def boilerplate_share(text: str, common: dict[str, int]) -> float:
    """The share of a passage's sentence characters taken by recurring sentences."""
    sents = sentences(text)
    total = sum(len(s) for s in sents)
    return sum(len(s) for s in sents if s in common) / total if total else 0.0


def main(argv: list[str] | None = None) -> None:
    ap = base_parser(__doc__ or "")
    ap.add_argument("--min-docs", type=int, default=3)
    ap.add_argument(
        "--max-tokens",
        type=int,
        default=0,
        help="passage size ([chunking] max_tokens; 0: the default) - small passages can hold "
        "a boilerplate line alone; results go to boilerplate_<N>tok.*",
    )
    args = ap.parse_args(argv)
    config = dict(CONFIG)
    name = NAME
    if args.max_tokens:
        config["chunking"] = {"max_tokens": args.max_tokens, "min_tokens": args.max_tokens // 4}
        name = f"{NAME}_{args.max_tokens}tok"
    folder = args.data / "niah_haystack" / "paul_graham_essays"
    docs = [Document(id=f.stem, text=f.read_text()) for f in sorted(folder.glob("*.txt"))]
    common = recurring(docs, args.min_docs)
    questions = json.loads(QUESTIONS.read_text())["questions"]
    sub = "essays" if not args.max_tokens else f"essays_{args.max_tokens}tok"
    store = (args.store or Path(tempfile.mkdtemp(prefix="pensive-boiler-"))) / sub
    rows = []
    with Pensive(store, config=config) as p:
        report = p.ingest(docs)
        n_passages = p.stats(disk=False)["chunks"]
        for q in questions:
            res = p.query(q, k=3)
            shares = [round(boilerplate_share(h.text, common), 3) for h in res.hits]
            rows.append(
                {
                    "question": q,
                    "top": [
                        {
                            "doc_id": h.doc_id,
                            "boilerplate_share": s,
                            "match": h.match,
                            "text": h.text[:160],
                        }
                        for h, s in zip(res.hits, shares, strict=True)
                    ],
                    "first_is_boilerplate": bool(shares and shares[0] >= 0.5),
                    "boilerplate_in_top3": any(s >= 0.5 for s in shares),
                    "match": res.match,
                    "weak": res.weak,
                }
            )
    summary = {
        "questions": len(rows),
        "first_hit_boilerplate": sum(r["first_is_boilerplate"] for r in rows),
        "boilerplate_in_top3": sum(r["boilerplate_in_top3"] for r in rows),
        "weak": sum(bool(r["weak"]) for r in rows),
    }
    payload = {
        "benchmark": NAME,
        "data": {
            "essays": len(docs),
            "passages": n_passages,
            "chunks_embedded": report.chunks_embedded,
            "recurring_sentences": [{"sentence": s, "documents": n} for s, n in common.items()],
            "min_docs": args.min_docs,
            "questions_file": str(QUESTIONS.relative_to(ROOT)),
        },
        "config": config,
        "summary": summary,
        "rows": rows,
        "source": source_state(),
        "environment": environment(),
    }
    write_results(name, args.out, payload, render(payload))


def render(payload: dict[str, Any]) -> str:
    d, s = payload["data"], payload["summary"]
    rec = "; ".join(
        f'"{r["sentence"]}" ({r["documents"]} essays)' for r in d["recurring_sentences"]
    )
    lines = [
        "# Boilerplate lines and vague questions (Paul Graham essays)\n",
        f"{d['essays']} essays -> {d['passages']} passages, configuration "
        f"`{payload['config']}` (else the defaults). Sentences recurring verbatim in >= "
        f"{d['min_docs']} essays: {rec or 'none'}. A passage is boilerplate when recurring "
        "sentences are at least half of its characters. Questions: "
        f"`{d['questions_file']}` (written before any result was looked at).\n",
        f"- first hit is boilerplate: **{s['first_hit_boilerplate']} / {s['questions']}**",
        f"- boilerplate anywhere in the top 3: {s['boilerplate_in_top3']} / {s['questions']}",
        f"- results flagged weak: {s['weak']} / {s['questions']}",
        "",
        "| question | first hit | boilerplate share | match |",
        "|---|---|---|---|",
    ]
    for r in payload["rows"]:
        t = r["top"][0] if r["top"] else None
        if t is None:
            lines.append(f"| {r['question']} | - | - | - |")
            continue
        lines.append(
            f"| {r['question']} | {t['doc_id']}: {t['text'][:70].replace('|', '/')!r} | "
            f"{t['boilerplate_share']} | {t['match']} |"
        )
    lines += ["", "Reproduce: `python -m benchmarks.boilerplate --store /tmp/weak-bench`", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
