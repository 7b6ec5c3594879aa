"""A question asked in a context (issue 25): the README's example, with the real model.

Cases written before the code: a question that names nobody ("Where did she grow up?") over
biographies where several women grew up somewhere; the context names the person meant, who
must come first, and a context naming nobody the store knows changes nothing."""

import pytest

from pensive_core import Document, Pensive

pytestmark = pytest.mark.slow

BIOS = [
    (
        "derrickson",
        "Scott Derrickson",
        "Scott Derrickson (born July 16, 1966) is an American director, screenwriter and producer. "
        "He lives in Los Angeles, California. He is best known for directing horror films such as "
        "Sinister and The Exorcism of Emily Rose. Derrickson grew up in Denver, Colorado.",
    ),
    (
        "wood",
        "Ed Wood",
        "Edward Davis Wood Jr. was an American filmmaker, actor and author. In the 1950s Wood made "
        "low-budget films. He was raised in Poughkeepsie, New York.",
    ),
    (
        "austen",
        "Jane Austen",
        "Jane Austen was an English novelist. She grew up in Steventon, Hampshire, where her father "
        "was the rector, and was educated mostly at home.",
    ),
    (
        "curie",
        "Marie Curie",
        "Marie Curie was a physicist and chemist. She grew up in Warsaw, then part of the Russian "
        "Empire, and moved to Paris in 1891.",
    ),
    (
        "kahlo",
        "Frida Kahlo",
        "Frida Kahlo was a Mexican painter. She grew up in the Blue House in Coyoacan, where she "
        "later lived and worked.",
    ),
    (
        "lovelace",
        "Ada Lovelace",
        "Ada Lovelace was an English mathematician. She grew up in London with her mother, who "
        "encouraged her interest in mathematics.",
    ),
    (
        "morrison",
        "Toni Morrison",
        "Toni Morrison was an American novelist. She grew up in Lorain, Ohio, in a working-class "
        "family.",
    ),
    (
        "hopper",
        "Grace Hopper",
        "Grace Hopper was an American computer scientist. She grew up in New York City and studied "
        "at Vassar College.",
    ),
]
DOCS = [Document(id=i, text=t, metadata={"title": title}) for i, title, t in BIOS]
Q = "Where did she grow up?"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    with Pensive(tmp_path_factory.mktemp("ctx")) as p:  # the defaults: MiniLM, graph on
        p.ingest(DOCS)
        yield p


def ranked(res):
    return [h.doc_id for h in res.hits]


def test_the_document_the_context_names_comes_first(store):
    plain = ranked(store.query(Q, k=8))
    assert plain[0] != "derrickson"  # without the context, the question fits the women's bios
    for ctx in (
        ["We were talking about Scott Derrickson."],
        ["Tell me about Scott Derrickson", "He directed Sinister."],
        "scott derrickson? the director",  # a bare string, lower case
    ):
        res = store.query(Q, k=8, context=ctx)
        assert ranked(res)[0] == "derrickson", ctx
        assert "context" in res.hits[0].sources


def test_a_context_naming_nobody_known_changes_nothing(store):
    plain = store.query(Q, k=8)
    other = store.query(Q, k=8, context=["We were talking about the weather in Lisbon."])
    assert ranked(other) == ranked(plain)


def test_a_question_that_names_someone_keeps_its_own_subject(store):
    res = store.query(
        "Where did Marie Curie grow up?", k=3, context=["We were talking about Scott Derrickson."]
    )
    assert ranked(res)[0] == "curie"


def test_only_the_latest_part_of_a_long_context_is_read(store):
    # the name said last counts; one buried under 100 long pieces before it is not read
    old = ["Marie Curie was mentioned. " + "nothing to see here. " * 900]
    res = store.query(Q, k=8, context=old * 99 + ["We were talking about Scott Derrickson."])
    assert ranked(res)[0] == "derrickson"
