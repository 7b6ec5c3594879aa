"""The relay: a second hop from L2's top passages, each passage reached scored by its own
likeness to the question (``[graph] relay``)."""

import pytest

from pensive_core import Document, Pensive
from tests.conftest import HASH_CONFIG, l2_state

#: The relay alone (activation off), so what it lists is its own doing.
RELAY = {**HASH_CONFIG, "graph": {"enabled": True, "weight": 0.0, "relay": 1.0}}


def cfg(**graph):
    return {**RELAY, "graph": {**RELAY["graph"], **graph}}


def doc_ids(pairs):
    return [c.split("#")[0] for c, _ in pairs]


def relay_list(p, q):
    return l2_state(p, q).relayed


FILM = Document(
    id="film",
    text="Sinister is a 2012 horror film directed by Scott Derrickson and starring Ethan Hawke.",
    metadata={"title": "Sinister (film)"},
)
BIOS = [
    Document(
        id="derrickson",
        text="He was born in the city of Denver, Colorado.",
        metadata={"title": "Scott Derrickson"},
    ),
    Document(
        id="hawke",
        text="He plays guitar and writes novels about music.",
        metadata={"title": "Ethan Hawke"},
    ),
]
FILLER = [
    Document(
        id=f"d{i}",
        text=f"{name} was born in the city of {city}, where {name} lived.",
        metadata={"title": name},
    )
    for i, (name, city) in enumerate(
        [("Ada Park", "Leeds"), ("Bo Chen", "Lyon"), ("Cy Dunn", "Porto"), ("Di Eve", "Graz")]
    )
]
Q = "In which city was the director of Sinister born?"


def test_of_two_linked_passages_the_one_like_the_question_ranks_first(tmp_path):
    # the film's passage names two people with a document each; only one of those documents
    # answers the rest of the question ("born", "city"): the relay ranks it first, where
    # activation gives both the same share of the passage
    with Pensive(tmp_path, config=cfg()) as p:
        p.ingest([FILM, *BIOS, *FILLER])
        relayed = relay_list(p, Q)
    scores = {c.split("#")[0]: s for c, s in relayed}
    assert doc_ids(relayed)[0] == "derrickson"
    assert scores["derrickson"] > scores.get("hawke", 0.0)
    with Pensive(tmp_path, config=cfg(weight=1.0, relay=0.0, focus=0.0)) as p:
        spread = {c.split("#")[0]: s for c, s in l2_state(p, Q).lists["graph"]}
    # the control: activation cannot tell them apart
    assert spread["derrickson"] == pytest.approx(spread["hawke"])


def test_the_relayed_passage_enters_the_answer(tmp_path):
    # the bridge shares one word with the question ("born"), every filler two ("born", "city")
    bio = Document(
        id="derrickson", text="He was born in Denver, Colorado.", metadata=BIOS[0].metadata
    )
    with Pensive(tmp_path, config=cfg(relay=0.0)) as p:
        p.ingest([FILM, bio, BIOS[1], *FILLER])
        off = [h.doc_id for h in p.query(Q, k=len(FILLER) + 3).hits]
    with Pensive(tmp_path, config=cfg()) as p:
        res = p.query(Q, k=3)
    on = [h.doc_id for h in res.hits]
    assert off.index("derrickson") > 2  # hybrid alone leaves it out of the top 3
    assert "derrickson" in on[:3]
    hit = next(h for h in res.hits if h.doc_id == "derrickson")
    assert hit.sources["relay"] == 1


def test_without_titles_names_lead_to_the_passages_naming_them(tmp_path):
    # no document is about anything: the bridge is the other passage naming the name
    docs = [
        Document(id="film", text=FILM.text),
        Document(id="bio", text="Scott Derrickson was born in the city of Denver, Colorado."),
        Document(id="hawke", text="Ethan Hawke plays guitar and writes novels about music."),
        *[Document(id=d.id, text=d.text) for d in FILLER],
    ]
    with Pensive(tmp_path, config=cfg()) as p:
        p.ingest(docs)
        relayed = relay_list(p, Q)
    assert doc_ids(relayed)[0] == "bio"
    with Pensive(tmp_path, config=cfg(relay_naming=0.0)) as p:
        assert relay_list(p, Q) == []  # naming links off: without titles nothing is linked


def test_a_name_many_passages_give_is_not_followed(tmp_path):
    # "Acme" is named by seven passages, more than relay_fanout: a hub, not a bridge
    docs = [
        Document(id="seed", text="The Quorbel project is funded by Acme and run by Hana Kraind."),
        Document(id="kraind", text="Hana Kraind works on the third floor of the lab."),
        *[Document(id=f"acme{i}", text=f"Acme sells floor tiles in shop {i}.") for i in range(7)],
    ]
    q = "On which floor does the leader of the Quorbel project work?"
    with Pensive(tmp_path, config=cfg(relay_fanout=5)) as p:
        p.ingest(docs)
        few = doc_ids(relay_list(p, q))
    with Pensive(tmp_path, config=cfg(relay_fanout=10)) as p:
        many = doc_ids(relay_list(p, q))
    assert "kraind" in few
    assert not any(d.startswith("acme") for d in few if d != "seed")
    assert any(d.startswith("acme") for d in many)  # the control: at 10 Acme is followed


def test_names_the_question_says_and_dates_are_not_followed(tmp_path):
    docs = [
        Document(id="seed", text="The Quorbel project began in 1994 under Hana Kraind."),
        Document(id="kraind", text="Hana Kraind works on the third floor of the lab."),
        Document(id="quorbel", text="Quorbel later moved to the floor above the lab."),
        Document(id="year", text="In 1994 the lab had a floor plan."),
    ]
    q = "On which floor does the leader of the Quorbel project work?"
    with Pensive(tmp_path, config=cfg()) as p:
        p.ingest(docs)
        relayed = doc_ids(relay_list(p, q))
    assert "kraind" in relayed
    assert "quorbel" not in relayed  # reached only through "Quorbel", said
    assert "year" not in relayed  # reached only through a year


def test_more_rounds_follow_longer_chains(tmp_path):
    # a three-hop chain: the question's passage names B, B's names C, C's answers
    docs = [
        Document(id="a", text="The Quorbel project was founded by Bela Ostrom."),
        Document(id="b", text="Bela Ostrom trained under Cyra Vanek."),
        Document(id="c", text="Cyra Vanek was born on the floor of a moving train."),
        *[
            Document(id=f"f{i}", text=f"Person{i} works on the project floor {i}.")
            for i in range(6)
        ],
    ]
    q = "Where was the teacher of the founder of the Quorbel project born?"
    with Pensive(tmp_path, config=cfg(relay_rounds=1, relay_seeds=1)) as p:
        p.ingest(docs)
        one = doc_ids(relay_list(p, q))
    with Pensive(tmp_path, config=cfg(relay_rounds=2, relay_seeds=1)) as p:
        two = doc_ids(relay_list(p, q))
    assert "b" in one and "c" not in one
    assert "c" in two


def test_the_relay_keeps_to_the_filter(tmp_path):
    docs = [
        Document(id="film", text=FILM.text, metadata={"title": "Sinister (film)", "shelf": "x"}),
        Document(id="derrickson", text=BIOS[0].text,
                 metadata={"title": "Scott Derrickson", "shelf": "y"}),
        Document(id="hawke", text=BIOS[1].text, metadata={"title": "Ethan Hawke", "shelf": "x"}),
    ]  # fmt: skip
    with Pensive(tmp_path, config=cfg()) as p:
        p.ingest(docs)
        hits = p.query(Q, k=3, filters={"shelf": "x"}).hits
        everything = p.query(Q, k=3).hits
    assert {h.doc_id for h in hits} <= {"film", "hawke"}
    assert "derrickson" in {h.doc_id for h in everything}


def test_lists_nothing_when_off(tmp_path):
    with Pensive(tmp_path, config=cfg(relay=0.0)) as p:
        p.ingest([FILM, *BIOS, *FILLER])
        state = l2_state(p, Q)
    assert state.relayed == []
    assert not any("relay" in f.ranks for f in state.fused)


def test_the_cache_stays_exact_with_the_relay(tmp_path):
    # the relay leads from a seed to the other passages naming a rare name it names: a commit
    # drops a cached answer when a passage naming such a name comes, keeps it otherwise
    config = {
        **HASH_CONFIG,
        "router": {"l1_refresh": 0, "l3_below": 0.0},
        "fusion": {"depth": 5},
        "graph": {"relay": 0.3, "focus": 0.0, "weight": 0.0, "relay_seeds": 1},
    }
    docs = [
        Document(id="lead", text="The Quorbel project is led by Hana Kraind."),
        Document(id="lab", text="Hana Kraind works on the third floor of the lab."),
    ]
    filler = [Document(id=f"f{i}", text=f"Person{i} keeps bees in Town{i}.") for i in range(300)]
    q = "On which floor does the leader of the Quorbel project work?"
    with Pensive(tmp_path, config=config) as p:
        p.ingest(docs + filler)
        first = p.query(q, k=2)
        assert [h.doc_id for h in first.hits] == ["lead", "lab"]
        assert p.query(q, k=2).tier == "L1"
        p.ingest([Document(id="tea", text="Zed Quux likes tea.")])
        again = p.query(q, k=2)
        assert again.tier == "L1" and again.hits == first.hits
        p.ingest([Document(id="news", text="Hana Kraind moved her bees to Oslo.")])
        assert p.query(q, k=2).tier == "L2"


def test_a_relayed_passage_never_passes_the_passage_it_came_from():
    from pensive_core.fusion import Fused
    from pensive_core.query.graph import GraphStage

    fused = [Fused("a", 2.0, {"dense": 1}), Fused("b", 1.5, {"dense": 2}), Fused("c", 0.2, {})]
    # "c" is reached from "b" at full relevance, "d" (new) from "a" at half
    out = GraphStage.place(fused, [("c", 1.0, "b"), ("d", 0.5, "a")], 1.0)
    # "c" would reach 0.2 + 2.0 but stops right below "b"; "d" gets half the top, from nothing
    assert [f.id for f in out] == ["a", "b", "c", "d"]
    score = {f.id: f.score for f in out}
    assert score["c"] < score["b"] and score["c"] == pytest.approx(1.5)
    assert score["d"] == pytest.approx(0.5 * 2.0)
    assert out[2].ranks == {"relay": 1} and out[3].ranks == {"relay": 2}
    # the raise adds to what a passage had; a passage above its seed is never lowered
    raised = GraphStage.place(fused, [("b", 0.1, "a")], 1.0)
    assert [f.id for f in raised] == ["a", "b", "c"] and raised[1].score == pytest.approx(1.7)
    kept = GraphStage.place(fused, [("a", 0.5, "b")], 1.0)
    assert [(f.id, f.score) for f in kept] == [("a", 2.0), ("b", 1.5), ("c", 0.2)]
    # at a smaller share the bridge rises less
    low = GraphStage.place(fused, [("d", 0.5, "a")], 0.25)
    assert [f.id for f in low] == ["a", "b", "d", "c"]
