import random

import pytest

from pensive_core.chunking import chunk_text, split_sentences


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


def _vocabulary(rng: random.Random, size: int = 1200) -> list[str]:
    syllables = "ka to ri mon sel pra di ver lu sta gen ol ex qua bri tan mo ne cor phi".split()
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))))
    return sorted(words)


def _sentence(rng: random.Random, vocab: list[str]) -> str:
    # content words follow a skewed distribution, as in prose, so some recur often
    words = [
        rng.choice(_FUNCTION_WORDS)
        if rng.random() < 0.4
        else vocab[min(int(rng.paretovariate(1.1)) - 1, len(vocab) - 1)]
        if rng.random() < 0.3
        else rng.choice(vocab)
        for _ in range(rng.randint(6, 32))
    ]
    if len(words) > 12 and rng.random() < 0.5:
        words[rng.randint(3, len(words) - 4)] += ","
    return " ".join(words).capitalize() + "."


def _prose(seed: int, paragraphs: int = 48) -> tuple[random.Random, list[str], list[list[str]]]:
    """A seeded document: paragraphs of 1 to 14 sentences of 6 to 32 words."""
    rng = random.Random(seed)
    vocab = _vocabulary(rng)
    lengths = [1, 2, 3, 3, 4, 5, 6, 8, 10, 14]
    doc = [[_sentence(rng, vocab) for _ in range(rng.choice(lengths))] for _ in range(paragraphs)]
    return rng, vocab, doc


def _render(doc: list[list[str]]) -> str:
    return "\n\n".join(" ".join(paragraph) for paragraph in doc)


def _edit(rng: random.Random, vocab: list[str], doc: list[list[str]], kind: str) -> str:
    """The document with one paragraph edited: a word replaced, a sentence inserted or deleted."""
    doc = [list(paragraph) for paragraph in doc]
    if kind == "replace":
        p = rng.randrange(len(doc))
        s = rng.randrange(len(doc[p]))
        words = doc[p][s].split(" ")
        words[rng.randrange(1, len(words) - 1)] = rng.choice(vocab)
        doc[p][s] = " ".join(words)
    elif kind == "insert":
        p = rng.randrange(len(doc))
        doc[p].insert(rng.randint(0, len(doc[p])), _sentence(rng, vocab))
    else:
        p = rng.choice([i for i, paragraph in enumerate(doc) if len(paragraph) > 1])
        del doc[p][rng.randrange(len(doc[p]))]
    return _render(doc)
