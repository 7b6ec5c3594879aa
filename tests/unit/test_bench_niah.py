"""The needle benchmark's own parts: planting, needles, scoring (no data, no model)."""

from benchmarks.niah import haystack
from benchmarks.niah.needles import DEPTHS, KINDS, make_needles, norm, placements
from benchmarks.niah.run import plant, score


def _docs(n=20, words=400):
    out = []
    for i in range(n):
        text = " ".join(f"Sentence {i}-{j} tells of nothing much." for j in range(words // 6))
        out.append(haystack.HayDoc(f"d{i}", "test", text, tokens=words))
    return out


def test_needles_cover_every_kind_and_depth_with_distinct_questions():
    needles = make_needles(2, seed=3)
    assert len(needles) == len(KINDS) * len(DEPTHS) * 2
    assert {(n.kind, n.depth) for n in needles} == {(k, d) for k in KINDS for d in DEPTHS}
    assert len({n.question for n in needles}) == len(needles)
    for n in needles:
        assert n.gold and all(g not in n.question for g in n.gold)
        assert len(n.gold) == (2 if n.kind == "multihop" else 1)
    # drift and corrections plant older statements too
    assert all(len(n.support) == 2 for n in needles if n.kind == "drift")
    assert all(len(n.support) == 1 for n in needles if n.kind == "correction")
    assert make_needles(2, seed=3)[5].question == needles[5].question  # seeded


def test_plant_puts_each_sentence_at_its_depth_and_loses_no_text():
    docs = _docs()
    needles = make_needles(1, seed=5)
    planted = plant(docs, needles)
    before = sum(len(norm(d.text)) for d in docs)
    sentences = placements(needles)
    after = sum(len(norm(d.text)) for d in planted)
    assert after == before + sum(len(s) + 1 for _, s in sentences)
    where = {}
    for i, d in enumerate(planted):
        for _, s in sentences:
            if s in d.text:
                where[s] = i
    assert len(where) == len({s for _, s in sentences})
    for depth, s in sentences:
        # 20 equal documents: depth d% lands in document ~d/5 (the last one at 100%)
        assert abs(where[s] - min(19, int(depth / 5))) <= 1, (depth, where[s])
    first, last = planted[0].text, planted[-1].text
    for depth, s in sentences:  # 0%: before the haystack's first sentence; 100%: after its last
        if depth == 0:
            assert first.index(s) < first.index("Sentence 0-0 ")
        if depth == 100:
            assert last.index(s) > last.index("Sentence 19-65 ")


def test_score_counts_a_two_hop_needle_only_when_both_facts_are_in_the_top_five():
    needles = make_needles(1, seed=2)
    hop = next(n for n in needles if n.kind == "multihop")
    ident = next(n for n in needles if n.kind == "identifier")
    filler = ["unrelated text"] * 5
    ranked = [[hop.gold[0], *filler[:3], hop.gold[1]], [*filler, ident.gold[0]]]
    s = score([hop, ident], ranked)
    assert s["overall"]["recall@5"] == 0.5 and s["overall"]["recall@1"] == 0.5
    assert s["misses@5"] == [ident.id]
    ranked = [[hop.gold[0], *filler], [ident.gold[0]]]
    assert score([hop, ident], ranked)["misses@5"] == [hop.id]


def test_filler_is_new_text_never_a_copied_paragraph():
    real = [haystack.HayDoc(f"r{i}", "essays", f"Alpha beta gamma {i}. " * 50) for i in range(30)]
    filler = haystack.MarkovFiller(real, seed=1)
    docs = [filler.document(i) for i in range(20)]
    assert haystack.repeated_paragraphs(real[:1] + docs) == 0
    assert all(len(d.text.split()) > 300 for d in docs)


def test_needles_of_one_depth_each_get_their_own_place():
    needles = make_needles(2, seed=4)
    sentences = placements(needles)
    gold_at = {}
    for nd in needles:
        gold_at[nd.id] = next(d for d, s in sentences if s == nd.gold[0])
    for depth in DEPTHS:
        at = [gold_at[n.id] for n in needles if n.depth == depth]
        assert len(set(at)) == len(at) == 2 * len(KINDS)  # no two share a point
        assert all(0 <= d <= 100 and abs(d - depth) <= 2 for d in at)
