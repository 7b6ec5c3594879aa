import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from pensive_core.chunking import chunk_text, split_sentences
from pensive_core.errors import InputError


def words(texts):
    return [len(t.split()) for t in texts]


def test_sentences_respect_abbreviations_and_paragraphs():
    text = "Dr. Smith met Mr. Jones, e.g. at noon. They talked.\n\nA new paragraph starts here."
    spans = split_sentences(text)
    got = [text[s:e] for s, e, _ in spans]
    assert got == [
        "Dr. Smith met Mr. Jones, e.g. at noon.",
        "They talked.",
        "A new paragraph starts here.",
    ]
    assert [p for _, _, p in spans] == [True, False, True]


def test_chunks_are_exact_slices_within_budget_and_cover_text():
    rng = random.Random(0)
    vocab = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    paras = []
    for _ in range(12):
        sents = [
            " ".join(rng.choice(vocab) for _ in range(rng.randint(3, 40))).capitalize() + "."
            for _ in range(rng.randint(1, 8))
        ]
        paras.append(" ".join(sents))
    paras.append(" ".join(["overlong"] * 500) + ".")  # one sentence far over the window
    text = "\n\n".join(paras)
    chunks = chunk_text("d", text, max_tokens=64, count_tokens=words)
    assert all(len(c.text.split()) <= 64 for c in chunks)
    for c in chunks:
        assert text[c.start : c.end] == c.text
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    covered = "".join(c.text for c in chunks).replace(" ", "").replace("\n", "")
    assert covered == text.replace(" ", "").replace("\n", "")


def test_ids_are_stable_and_content_addressed():
    text = "One sentence here. Another one there.\n\nThird paragraph."
    a = chunk_text("doc", text, max_tokens=5, count_tokens=words)
    b = chunk_text("doc", text, max_tokens=5, count_tokens=words)
    assert [c.id for c in a] == [c.id for c in b]
    assert all(c.id.startswith("doc#") for c in a)
    edited = chunk_text("doc", text.replace("Third", "Fourth"), max_tokens=5, count_tokens=words)
    assert [c.id for c in a][:-1] == [c.id for c in edited][:-1]
    assert a[-1].id != edited[-1].id


def test_repeated_passages_get_distinct_ids():
    chunks = chunk_text(
        "d", "Same words.\n\nSame words.", max_tokens=2, count_tokens=words, min_tokens=0
    )
    assert len(chunks) == 2 and len({c.id for c in chunks}) == 2


@pytest.mark.slow
def test_no_passage_exceeds_minilm_window(minilm):
    long_sentence = " ".join(f"token{i} immunohistochemistry" for i in range(400)) + "."
    text = "Short intro.\n\n" + long_sentence + "\n\n" + "Normal sentence. " * 200
    chunks = chunk_text("d", text, max_tokens=minilm.max_tokens, count_tokens=minilm.count_tokens)
    sizes = minilm.count_tokens([c.text for c in chunks])
    assert max(sizes) <= minilm.max_tokens
    assert len(chunks) > 3


# --- content-defined chunking -------------------------------------------------------------------

_FUNCTION_WORDS = (
    "the of and to in a is that for it as with was on by be this are from at or an which but not"
).split()


def _vocabulary(rng, size=1200):
    syllables = "ka to ri mon sel pra di ver lu sta gen ol ex qua bri tan mo ne cor phi".split()
    vocab = set()
    while len(vocab) < size:
        vocab.add("".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))))
    return sorted(vocab)


def _sentence(rng, vocab):
    # function words are frequent and content words skewed, as in prose, so many words recur
    tokens = []
    for _ in range(rng.randint(6, 32)):
        if rng.random() < 0.4:
            tokens.append(rng.choice(_FUNCTION_WORDS))
        elif rng.random() < 0.3:
            tokens.append(vocab[min(int(rng.paretovariate(1.1)) - 1, len(vocab) - 1)])
        else:
            tokens.append(rng.choice(vocab))
    if len(tokens) > 12 and rng.random() < 0.5:
        tokens[rng.randint(3, len(tokens) - 4)] += ","
    return " ".join(tokens).capitalize() + "."


def _prose(seed, paragraphs=40):
    """A seeded document: paragraphs of 1 to 14 sentences of 6 to 32 words (about 4,000 words)."""
    rng = random.Random(seed)
    vocab = _vocabulary(rng)
    lengths = [1, 2, 3, 3, 4, 5, 6, 8, 10, 14]
    doc = [[_sentence(rng, vocab) for _ in range(rng.choice(lengths))] for _ in range(paragraphs)]
    return rng, vocab, doc


def _render(doc):
    return "\n\n".join(" ".join(paragraph) for paragraph in doc)


def _edit(rng, vocab, doc, kind):
    """The document with one paragraph edited: a word replaced, a sentence inserted or deleted."""
    doc = [list(paragraph) for paragraph in doc]
    if kind == "replace":
        p = rng.randrange(len(doc))
        s = rng.randrange(len(doc[p]))
        tokens = doc[p][s].split(" ")
        tokens[rng.randrange(1, len(tokens) - 1)] = rng.choice(vocab)
        doc[p][s] = " ".join(tokens)
    elif kind == "insert":
        p = rng.randrange(len(doc))
        doc[p].insert(rng.randint(0, len(doc[p])), _sentence(rng, vocab))
    else:
        p = rng.choice([i for i, paragraph in enumerate(doc) if len(paragraph) > 1])
        del doc[p][rng.randrange(len(doc[p]))]
    return _render(doc)


def _chunk(text, **kwargs):
    return chunk_text("d", text, max_tokens=254, count_tokens=words, **kwargs)


def test_cdc_boundaries_survive_a_one_paragraph_edit():
    # 12 documents x 9 edits: across documents is where the variance is, so many short samples
    changed = {"cdc": [], "greedy": []}
    for seed in range(12):
        rng, vocab, doc = _prose(seed)
        original = {m: {c.id for c in _chunk(_render(doc), method=m)} for m in changed}
        for kind in ("replace", "insert", "delete"):
            for _ in range(3):
                edited = _edit(rng, vocab, doc, kind)
                for method, counts in changed.items():
                    new = _chunk(edited, method=method)
                    counts.append(sum(c.id not in original[method] for c in new))
    cdc, greedy = changed["cdc"], changed["greedy"]
    # measured here: cdc mean 1.25, 95th percentile 2, max 4; greedy 1.51, 4 and 10. Over 100
    # other sets of 12 seeds cdc's mean ranged 1.07-1.46 and its 95th percentile stayed <= 3,
    # but its worst single edit ranged 3-7, so that is bounded loosely
    assert sum(cdc) / len(cdc) <= 1.5
    assert sorted(cdc)[int(0.95 * len(cdc)) - 1] <= 3
    assert max(cdc) <= 8
    # cdc's mean beat greedy's on 98 of those 100 sets (median margin 0.25)
    assert sum(cdc) / len(cdc) < sum(greedy) / len(greedy)


def test_cdc_passage_sizes_respect_min_max_and_follow_the_target():
    texts = [_render(_prose(seed)[2]) for seed in range(12)]
    means = {}
    for target in (80, 0, 180):
        sizes = []
        for text in texts:
            chunks = _chunk(text, target_tokens=target)
            assert all(c.tokens <= 254 for c in chunks)
            assert all(c.tokens >= 32 for c in chunks[:-1])
            sizes += [c.tokens for c in chunks]
        means[target] = sum(sizes) / len(sizes)
    # measured: 99 at target 80, 134 at the default 127, 162 at 180 (the window of 254 caps it).
    # Over 100 other sets of 12 seeds the default's mean ranged 127-144 (per document 98-171)
    assert 127 * 0.85 <= means[0] <= 127 * 1.25
    assert means[80] < means[0] < means[180]


@pytest.mark.parametrize("method", ["cdc", "greedy"])
def test_long_document_chunks_are_exact_ordered_slices_that_cover_it(method):
    text = _render(_prose(3)[2])
    chunks = _chunk(text, method=method)
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    assert all(text[c.start : c.end] == c.text for c in chunks)
    assert chunks[0].start == 0 and chunks[-1].end == len(text)
    for a, b in zip(chunks, chunks[1:]):
        assert a.end <= b.start and not text[a.end : b.start].strip()


def test_tokens_field_counts_the_passage():
    text = _render(_prose(4)[2])
    for kwargs in ({"method": "cdc"}, {"method": "greedy"}, {"overlap": 2}):
        chunks = _chunk(text, **kwargs)
        assert all(c.tokens == len(c.text.split()) > 0 for c in chunks)


def test_cdc_ids_do_not_depend_on_the_process_hash_seed():
    text = _render(_prose(5)[2])
    here = [c.id for c in _chunk(text)]
    script = (
        "import json, sys\n"
        "from pensive_core.chunking import chunk_text\n"
        "count = lambda texts: [len(t.split()) for t in texts]\n"
        "chunks = chunk_text('d', sys.stdin.read(), max_tokens=254, count_tokens=count)\n"
        "print(json.dumps([c.id for c in chunks]))\n"
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(root)}
    out = subprocess.run(
        [sys.executable, "-c", script],
        input=text,
        capture_output=True,
        text=True,
        env=env,
        check=True,
        encoding="utf-8",
    )
    assert json.loads(out.stdout) == here


def test_overlap_repeats_the_previous_passages_last_sentence():
    text = _render(_prose(6)[2])
    plain = _chunk(text)
    overlapped = _chunk(text, overlap=1)
    assert [c.end for c in overlapped] == [c.end for c in plain]  # same cut points
    assert overlapped[0] == plain[0]
    sentences = split_sentences(text)
    extended = 0
    for prev, bare, chunk in zip(plain, plain[1:], overlapped[1:]):
        assert chunk.tokens <= 254
        last = next((s, e) for s, e, _ in reversed(sentences) if e == prev.end)
        if bare.tokens + len(text[last[0] : last[1]].split()) <= 254:
            assert chunk.start == last[0] and chunk.text.startswith(text[last[0] : last[1]])
            assert chunk.text.endswith(bare.text)
            extended += 1
        else:
            assert chunk == bare
    assert extended >= 0.9 * (len(plain) - 1)


def test_unknown_method_and_negative_overlap_are_refused():
    with pytest.raises(InputError, match="method"):
        chunk_text("d", "Some text.", max_tokens=10, count_tokens=words, method="fixed")
    with pytest.raises(InputError, match="overlap"):
        chunk_text("d", "Some text.", max_tokens=10, count_tokens=words, overlap=-1)
