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
