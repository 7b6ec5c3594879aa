"""Topic-shift (drift) detection on TIAGE: :class:`~pensive_core.memory.drift.DriftDetector`
against simple baselines.

TIAGE (``tiage/anno_train.json``, ``anno_dev.json``) annotates PersonaChat dialogues turn by
turn: ``"-1"`` the first turn, ``"1"`` a topic shift, ``"0"`` the same topic. Every figure is
per-turn precision, recall and F1 of the shift class over the turns labelled ``"1"`` or ``"0"``
(first turns excluded). Everything that is chosen -- the detector's parameters, each baseline's
threshold and window -- is chosen on the train split, maximising shift F1; the dev split is
only ever reported.

Rows:

* *majority class* (always the train split's majority label, "no shift": F1 0) and *always
  shift*;
* *turn asks a question*: shift iff the turn contains "?" (the detector's cue on its own);
* *cosine to previous turn < t*: one feature, the MiniLM cosine of a turn to the one before;
* *lexical novelty >= t*: the share of a turn's content words absent from the previous
  ``w`` turns;
* *DriftDetector (defaults)*: the library's defaults, which are the values this benchmark tuned
  (a row says whether they still match what tuning picks now);
* *DriftDetector, vector=None*: the same defaults judged on words alone;
* *DriftDetector, no question cues*: the best configuration of the grid with both cue weights 0,
  to show what the dialogue-act cues add.

Tuning: a grid over ``window x novelty_weight x question_weight x answer_weight``; for each
point the threshold is first read off the scores of a pass without window restarts (exact when
``window`` is 1) and then checked by real passes at nearby thresholds; ``min_words`` and a
final threshold are then refined around the best point; ``lexical_threshold`` is tuned last
with the rest fixed.

Utterances are embedded with the bundled MiniLM, cached as ``.npy`` under /tmp/drift-cache keyed
by a hash of the texts.

    python -m benchmarks.memory_tiage            # prints the markdown table
    python -m benchmarks.memory_tiage --out benchmarks/results
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import logging
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pensive_core.memory.drift import DriftDetector
from pensive_core.tokenize import Tokenizer

log = logging.getLogger(__name__)

CACHE = Path("/tmp/drift-cache")

WINDOWS = (1, 2, 3, 4)
NOVELTY_WEIGHTS = (0.0, 0.15, 0.3)
QUESTION_WEIGHTS = (0.0, 0.15, 0.3, 0.45)
ANSWER_WEIGHTS = (0.0, 0.15, 0.3)
MIN_WORDS = (0, 1, 2, 3)
NOVELTY_WINDOWS = (1, 2, 3, 4)

Dialogue = list[tuple[str, str]]


def load_split(path: Path) -> dict[str, Dialogue]:
    """Read one TIAGE file: ``{dialog_id: [(utterance, label), ...]}``."""
    raw = json.loads(Path(path).read_text())
    return {k: [(str(u), str(lab)) for u, lab in v] for k, v in raw.items()}


def embed_cached(
    texts: Sequence[str], embedder: Any | Callable[[], Any], name: str = "minilm"
) -> np.ndarray:
    """Embed ``texts``, reusing ``/tmp/drift-cache/{name}-{hash}.npy`` when present.

    Args:
        texts: The texts, in order.
        embedder: An embedder, or a callable that builds one (called only on a cache miss).
        name: The embedder's name, part of the cache key.

    Returns:
        ``(len(texts), dim)`` float32 unit rows.
    """
    h = hashlib.sha256()
    h.update(name.encode())
    for t in texts:
        h.update(b"\0" + t.encode())
    path = CACHE / f"{name}-{h.hexdigest()[:24]}.npy"
    if path.exists():
        vecs = np.load(path)
        if len(vecs) == len(texts):
            return vecs
    emb = embedder() if callable(embedder) and not hasattr(embedder, "embed") else embedder
    t0 = time.perf_counter()
    vecs = np.asarray(emb.embed(list(texts)), dtype=np.float32)
    log.info("embedded %d texts in %.1fs", len(texts), time.perf_counter() - t0)
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp.npy")
    np.save(tmp, vecs)
    tmp.replace(path)
    return vecs


class _MemoTokenizer(Tokenizer):
    """The default tokenizer with a memo: the grid replays the same turns hundreds of times."""

    def __init__(self) -> None:
        super().__init__()
        self._memo: dict[str, list[str]] = {}

    def tokenize(self, text: str) -> list[str]:
        out = self._memo.get(text)
        if out is None:
            out = self._memo[text] = super().tokenize(text)
        return out


@dataclass(frozen=True)
class Split:
    """One TIAGE split with its vectors, flattened in dialogue order."""

    dialogues: list[Dialogue]
    vectors: np.ndarray  # one row per utterance, dialogue after dialogue
    labels: np.ndarray  # per utterance: -1 first turn, 1 shift, 0 same topic

    @property
    def scored(self) -> np.ndarray:
        """Mask of the turns that are scored (labels 0/1)."""
        return self.labels >= 0

    @property
    def truth(self) -> np.ndarray:
        """Shift labels of the scored turns."""
        return self.labels[self.scored] == 1


def prf(pred: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """Precision, recall and F1 of the positive class (0 where undefined)."""
    tp = int(np.sum(pred & truth))
    npred, ntrue = int(pred.sum()), int(truth.sum())
    p = tp / npred if npred else 0.0
    r = tp / ntrue if ntrue else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {"precision": p, "recall": r, "f1": f}


def _f1_at(scores: np.ndarray, truth: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """F1 of ``scores >= t`` for every t, vectorised."""
    pred = scores[None, :] >= thresholds[:, None]
    tp = (pred & truth[None, :]).sum(1)
    denom = pred.sum(1) + truth.sum()
    return np.where(denom > 0, 2 * tp / np.maximum(denom, 1), 0.0)


def _best_threshold(
    scores: np.ndarray, truth: np.ndarray, grid: np.ndarray, below: bool = False
) -> tuple[float, float]:
    """The grid threshold with the best F1 (``score >= t``, or ``score < t`` when ``below``)."""
    f1 = _f1_at(-scores, truth, -grid) if below else _f1_at(scores, truth, grid)
    # ties go to the first (lowest) grid value so the choice is stable
    i = int(np.argmax(f1))
    return float(grid[i]), float(f1[i])


def run_detector(
    split: Split,
    params: dict[str, Any],
    *,
    use_vectors: bool = True,
    tokenizer: Tokenizer | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Run a fresh detector over every dialogue.

    Returns:
        ``(scores, shifts)`` over the scored turns.
    """
    scores, shifts = [], []
    row = 0
    for dialogue in split.dialogues:
        det = DriftDetector(tokenizer=tokenizer, **params)
        for text, _ in dialogue:
            sig = det.update(text, split.vectors[row] if use_vectors else None)
            scores.append(sig.score)
            shifts.append(sig.shift)
            row += 1
    mask = split.scored
    return np.asarray(scores)[mask], np.asarray(shifts, dtype=bool)[mask]


def cosine_to_previous(split: Split) -> np.ndarray:
    """Cosine of each scored turn to the turn before it."""
    out: list[float] = []
    row = 0
    for dialogue in split.dialogues:
        vecs = split.vectors[row : row + len(dialogue)]
        out.extend(float(vecs[t] @ vecs[t - 1]) for t in range(1, len(dialogue)))
        row += len(dialogue)
    return np.asarray(out)


def novelty_previous(split: Split, window: int, tokenizer: Tokenizer) -> np.ndarray:
    """Share of each scored turn's content words (as the detector counts them) absent from the
    previous ``window`` turns."""
    words = DriftDetector(tokenizer=tokenizer).content_words
    out: list[float] = []
    for dialogue in split.dialogues:
        terms = [words(u) for u, _ in dialogue]
        for t in range(1, len(dialogue)):
            seen = set().union(*terms[max(0, t - window) : t])
            out.append(len(terms[t] - seen) / len(terms[t]) if terms[t] else 0.0)
    return np.asarray(out)


def _round(x: float) -> float:
    return round(float(x), 2)


def tune_detector(split: Split, tokenizer: Tokenizer) -> dict[str, Any]:
    """Choose the detector's parameters on ``split`` by shift F1 (see the module docstring).

    Returns:
        ``{"params", "train_f1", "no_cue_params", "no_cue_train_f1", "grid_points", "runs"}``.
    """
    truth = split.truth
    grid = np.round(np.arange(0.2, 1.8, 0.01), 2)
    runs = 0

    def evaluate(params: dict[str, Any]) -> float:
        nonlocal runs
        runs += 1
        _, shifts = run_detector(split, params, tokenizer=tokenizer)
        return prf(shifts, truth)["f1"]

    results: list[tuple[float, dict[str, Any]]] = []
    for window, nw, qw, aw in itertools.product(
        WINDOWS, NOVELTY_WEIGHTS, QUESTION_WEIGHTS, ANSWER_WEIGHTS
    ):
        base: dict[str, Any] = {
            "window": window,
            "novelty_weight": nw,
            "question_weight": qw,
            "answer_weight": aw,
            "min_words": 2,
        }
        # a pass that never restarts the window gives the scores; their best threshold is exact
        # for window 1 and a starting point otherwise
        scores, _ = run_detector(split, {**base, "threshold": 1e9}, tokenizer=tokenizer)
        runs += 1
        eligible = _eligible(split, tokenizer, base["min_words"])
        t0, f0 = _best_threshold(np.where(eligible, scores, -math.inf), truth, grid)
        if window == 1:
            results.append((f0, {**base, "threshold": t0}))
            continue
        for dt in (-0.04, -0.02, 0.0, 0.02, 0.04):
            params = {**base, "threshold": _round(t0 + dt)}
            results.append((evaluate(params), params))

    best_f1, best = max(results, key=lambda r: r[0])
    no_cue_f1, no_cue = max(
        (r for r in results if r[1]["question_weight"] == 0 and r[1]["answer_weight"] == 0),
        key=lambda r: r[0],
    )
    # refine min_words and the threshold around the best point
    for mw, dt in itertools.product(MIN_WORDS, (-0.03, -0.02, -0.01, 0.0, 0.01, 0.02, 0.03)):
        params = {**best, "min_words": mw, "threshold": _round(best["threshold"] + dt)}
        f = evaluate(params)
        if f > best_f1 + 1e-12:
            best_f1, best = f, params
    return {
        "params": best,
        "train_f1": best_f1,
        "no_cue_params": no_cue,
        "no_cue_train_f1": no_cue_f1,
        "grid_points": len(results),
        "runs": runs,
    }


def _eligible(split: Split, tokenizer: Tokenizer, min_words: int) -> np.ndarray:
    """Scored turns with at least ``min_words`` content words."""
    words = DriftDetector(tokenizer=tokenizer).content_words
    counts = [len(words(u)) for d in split.dialogues for u, _ in d]
    return (np.asarray(counts) >= min_words)[split.scored]


def tune_lexical(split: Split, params: dict[str, Any], tokenizer: Tokenizer) -> tuple[float, float]:
    """Choose ``lexical_threshold`` with the other parameters fixed; returns (value, train F1)."""
    truth = split.truth
    best = (0.0, -1.0)
    for t in np.round(np.arange(0.3, 1.5, 0.02), 2):
        _, shifts = run_detector(
            split, {**params, "lexical_threshold": float(t)}, use_vectors=False, tokenizer=tokenizer
        )
        f = prf(shifts, truth)["f1"]
        if f > best[1] + 1e-12:
            best = (float(t), f)
    return best


def _default_params() -> dict[str, Any]:
    det = DriftDetector()
    return {
        "window": det.window,
        "threshold": det.threshold,
        "novelty_weight": det.novelty_weight,
        "question_weight": det.question_weight,
        "answer_weight": det.answer_weight,
        "min_words": det.min_words,
        "lexical_threshold": det.lexical_threshold,
    }


def run_tiage(data: Path, embedder: Any = None) -> tuple[dict[str, Any], str]:
    """Tune on TIAGE train, report on dev.

    Args:
        data: The shared data folder (holding ``tiage/``) or the ``tiage`` folder itself.
        embedder: An embedder; default the bundled MiniLM, loaded only if a vector is not cached.

    Returns:
        A JSON-able result and a markdown table.
    """
    folder = Path(data)
    if (folder / "tiage").is_dir():
        folder = folder / "tiage"
    name = "minilm" if embedder is None else str(getattr(embedder, "name", "custom"))

    def build() -> Any:
        from pensive_core.config import load_config
        from pensive_core.embedders.registry import create_embedder

        return create_embedder(load_config({"embedder": {"name": "minilm"}}).embedder)

    def vecs_for(path: Path) -> Split:
        dialogues = list(load_split(path).values())
        texts = [u for d in dialogues for u, _ in d]
        labels = np.array([int(lab) for d in dialogues for _, lab in d], dtype=np.int64)
        return Split(dialogues, embed_cached(texts, embedder or build, name), labels)

    t_start = time.perf_counter()
    train, dev = vecs_for(folder / "anno_train.json"), vecs_for(folder / "anno_dev.json")
    tok = _MemoTokenizer()
    grid = np.round(np.arange(-0.5, 1.0, 0.005), 3)

    rows: dict[str, dict[str, Any]] = {}

    def add(label: str, pred_dev: np.ndarray, train_f1: float | None, chosen: dict[str, Any]):
        rows[label] = {**prf(pred_dev, dev.truth), "train_f1": train_f1, "chosen": chosen}

    # (a) majority class and always shift
    majority_shift = bool(train.truth.mean() > 0.5)
    add(
        f"majority class ({'shift' if majority_shift else 'no shift'})",
        np.full(dev.truth.shape, majority_shift),
        prf(np.full(train.truth.shape, majority_shift), train.truth)["f1"],
        {},
    )
    add(
        "always shift",
        np.ones_like(dev.truth),
        prf(np.ones_like(train.truth), train.truth)["f1"],
        {},
    )

    # the question cue alone, to show how much of the detector it is
    def asks(split: Split) -> np.ndarray:
        return np.array(["?" in u for d in split.dialogues for u, _ in d])[split.scored]

    add("turn asks a question ('?')", asks(dev), prf(asks(train), train.truth)["f1"], {})

    # (b) cosine to the previous turn below a threshold
    t_cos, f_cos = _best_threshold(cosine_to_previous(train), train.truth, grid, below=True)
    add(
        "cosine to previous turn < t",
        cosine_to_previous(dev) < t_cos,
        f_cos,
        {"threshold": t_cos},
    )

    # (c) lexical novelty alone
    nov_grid = np.round(np.arange(0.0, 1.0001, 0.01), 2)
    best_nov = max(
        (
            (w, *_best_threshold(novelty_previous(train, w, tok), train.truth, nov_grid))
            for w in NOVELTY_WINDOWS
        ),
        key=lambda r: r[2],
    )
    w_nov, t_nov, f_nov = best_nov
    add(
        "lexical novelty >= t",
        novelty_previous(dev, w_nov, tok) >= t_nov,
        f_nov,
        {"window": w_nov, "threshold": t_nov},
    )

    # tuning the detector on train only
    tuned = tune_detector(train, tok)
    lex_t, lex_f1 = tune_lexical(train, tuned["params"], tok)
    tuned_params = {**tuned["params"], "lexical_threshold": lex_t}
    defaults = _default_params()
    match = all(math.isclose(defaults[k], v) for k, v in tuned_params.items())

    # (d) and (e): the library's defaults
    _, dev_shift = run_detector(dev, {}, tokenizer=tok)
    _, train_shift = run_detector(train, {}, tokenizer=tok)
    add("DriftDetector (defaults)", dev_shift, prf(train_shift, train.truth)["f1"], defaults)
    _, dev_lex = run_detector(dev, {}, use_vectors=False, tokenizer=tok)
    _, train_lex = run_detector(train, {}, use_vectors=False, tokenizer=tok)
    add(
        "DriftDetector, vector=None (defaults)",
        dev_lex,
        prf(train_lex, train.truth)["f1"],
        {"lexical_threshold": defaults["lexical_threshold"]},
    )
    _, dev_nc = run_detector(dev, tuned["no_cue_params"], tokenizer=tok)
    add(
        "DriftDetector, no question cues (tuned)",
        dev_nc,
        tuned["no_cue_train_f1"],
        tuned["no_cue_params"],
    )
    if not match:
        _, dev_tuned = run_detector(dev, tuned_params, tokenizer=tok)
        add("DriftDetector (as tuned now)", dev_tuned, tuned["train_f1"], tuned_params)

    def count(split: Split) -> dict[str, int]:
        return {
            "dialogues": len(split.dialogues),
            "turns": int(len(split.labels)),
            "scored_turns": int(split.scored.sum()),
            "shifts": int(split.truth.sum()),
        }

    result: dict[str, Any] = {
        "benchmark": "memory_tiage",
        "embedder": name,
        "counts": {"train": count(train), "dev": count(dev)},
        "tuned_on": "anno_train",
        "tuned_params": tuned_params,
        "tuned_train_f1": tuned["train_f1"],
        "tuned_lexical_train_f1": lex_f1,
        "defaults": defaults,
        "defaults_match_tuned": match,
        "grid": {
            "window": WINDOWS,
            "novelty_weight": NOVELTY_WEIGHTS,
            "question_weight": QUESTION_WEIGHTS,
            "answer_weight": ANSWER_WEIGHTS,
            "min_words": MIN_WORDS,
            "points": tuned["grid_points"],
            "detector_runs": tuned["runs"],
        },
        "rows": rows,
        "seconds": round(time.perf_counter() - t_start, 1),
    }
    return result, to_markdown(result)


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def to_markdown(result: dict[str, Any]) -> str:
    """The result as a markdown table with its counts and tuned parameters."""
    c = result["counts"]
    lines = [
        "## TIAGE topic-shift detection (per turn, shift class)",
        "",
        f"Embedder: {result['embedder']}. Train: {c['train']['dialogues']} dialogues, "
        f"{c['train']['scored_turns']} scored turns ({c['train']['shifts']} shifts). "
        f"Dev: {c['dev']['dialogues']} dialogues, {c['dev']['scored_turns']} scored turns "
        f"({c['dev']['shifts']} shifts). Everything chosen on train; dev only reported.",
        "",
        "| system | dev P | dev R | dev F1 | train F1 | chosen on train |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for label, row in result["rows"].items():
        chosen = ", ".join(f"{k}={v}" for k, v in row["chosen"].items()) or "-"
        lines.append(
            f"| {label} | {_fmt(row['precision'])} | {_fmt(row['recall'])} | "
            f"{_fmt(row['f1'])} | {_fmt(row['train_f1'])} | {chosen} |"
        )
    tuned = ", ".join(f"{k}={v}" for k, v in result["tuned_params"].items())
    lines += [
        "",
        f"Tuned on train ({result['grid']['points']} grid points, "
        f"{result['grid']['detector_runs']} detector passes): {tuned}; "
        f"defaults match: {result['defaults_match_tuned']}.",
        "",
    ]
    return "\n".join(lines)


def main(argv: Iterable[str] | None = None) -> None:
    """Run on ``../shared/data`` and print the markdown."""
    from benchmarks.common import DEFAULT_DATA, write_results

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="data folder (../shared/data)")
    ap.add_argument("--out", type=Path, default=None, help="also write memory_tiage.json/.md here")
    args = ap.parse_args(None if argv is None else list(argv))
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    result, markdown = run_tiage(args.data)
    print(markdown)
    if args.out is not None:
        write_results("memory_tiage", args.out, result, markdown)


if __name__ == "__main__":
    main()
