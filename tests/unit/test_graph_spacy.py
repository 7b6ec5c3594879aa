"""The spaCy entity extractor, on a real blank pipeline with an entity ruler (no trained model
can be installed offline)."""

import sqlite3
import subprocess
import sys

import pytest

spacy = pytest.importorskip("spacy")

from pensive_core.errors import ConfigError, MissingDependencyError  # noqa: E402
from pensive_core.graph import EntityExtractor, Mention  # noqa: E402
from pensive_core.graph.spacy_extract import SpacyExtractor  # noqa: E402
from pensive_core.graph.store import GraphStore  # noqa: E402

PATTERNS = [
    {"label": "PERSON", "pattern": [{"LOWER": "scott"}, {"LOWER": "derrickson"}]},
    {"label": "ORG", "pattern": "Blumhouse"},
    {"label": "GPE", "pattern": "Denver"},
    {"label": "WORK_OF_ART", "pattern": "Sinister"},
    # a shorter date than the rules would find: the model's word stands
    {"label": "DATE", "pattern": [{"LOWER": "may"}, {"SHAPE": {"IN": ["d", "dd"]}}]},
]


@pytest.fixture
def nlp():
    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler").add_patterns(PATTERNS)
    return nlp


def spans(mentions):
    return [(m.text, m.kind, m.key, m.start, m.end) for m in mentions]


def test_entities_with_offsets_kinds_and_keys(nlp):
    text = "Scott Derrickson directed Sinister for Blumhouse."
    got = SpacyExtractor(nlp, fallback_rules=False).extract(text)
    assert spans(got) == [
        ("Scott Derrickson", "person", "scott derrickson", 0, 16),
        ("Sinister", "work_of_art", "sinister", 26, 34),
        ("Blumhouse", "org", "blumhouse", 39, 48),
    ]
    for m in got:
        assert text[m.start : m.end] == m.text
    assert isinstance(SpacyExtractor(nlp), EntityExtractor)


def test_name_is_the_pipeline_package_name(nlp):
    assert SpacyExtractor(nlp).name == "spacy:en_pipeline"
    nlp.meta["name"] = "core_web_sm"
    assert SpacyExtractor(nlp).name == "spacy:en_core_web_sm"


def test_rules_fill_the_gaps(nlp):
    text = "Blumhouse paid $4.1 billion for INV-4471 on 2 May 2024 in Denver."
    with_rules = SpacyExtractor(nlp).extract(text)
    assert spans(with_rules) == [
        ("Blumhouse", "org", "blumhouse", 0, 9),
        ("$4.1 billion", "quantity", "$4.1 billion", 15, 27),
        ("INV-4471", "id", "inv-4471", 32, 40),
        ("2 May 2024", "date", "2 may 2024", 44, 54),
        ("Denver", "gpe", "denver", 58, 64),
    ]
    without = SpacyExtractor(nlp, fallback_rules=False).extract(text)
    assert [m.kind for m in without] == ["org", "gpe"]


def test_the_model_wins_an_overlap_even_when_shorter(nlp):
    # spaCy's DATE "May 2" overlaps the rules' longer "May 2, 2024": spaCy's is kept, and so
    # is the rules' quantity that overlaps nothing
    text = "On May 2, 2024 Blumhouse sold 12% of Sinister."
    got = SpacyExtractor(nlp).extract(text)
    assert spans(got) == [
        ("May 2", "date", "may 2", 3, 8),
        ("Blumhouse", "org", "blumhouse", 15, 24),
        ("12%", "quantity", "12%", 30, 33),
        ("Sinister", "work_of_art", "sinister", 37, 45),
    ]
    starts = [(m.start, m.end) for m in got]
    assert all(e <= s for (_, e), (s, _) in zip(starts, starts[1:]))  # no overlaps, in order


def test_rule_overlaps_among_themselves_are_resolved_longest_first(nlp):
    # the year "2024" inside "2024-05-02" and the id-like "2024-05-02" lose to the full date
    got = SpacyExtractor(nlp).extract("Filed 2024-05-02 by Denver.")
    assert spans(got) == [
        ("2024-05-02", "date", "2024-05-02", 6, 16),
        ("Denver", "gpe", "denver", 20, 26),
    ]


def test_labels_filter_and_filtered_entities_do_not_block_rules(nlp):
    text = "On May 2, 2024 Blumhouse moved to Denver."
    ex = SpacyExtractor(nlp, labels={"org", "GPE"})
    assert spans(ex.extract(text)) == [
        ("May 2, 2024", "date", "may 2, 2024", 3, 14),  # the rules' date, spaCy's was dropped
        ("Blumhouse", "org", "blumhouse", 15, 24),
        ("Denver", "gpe", "denver", 34, 40),
    ]
    with pytest.raises(ConfigError, match="labels"):
        SpacyExtractor(nlp, labels="PERSON")


def test_entities_with_an_empty_normal_form_are_dropped():
    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler").add_patterns([{"label": "ORG", "pattern": "--"}])
    assert SpacyExtractor(nlp, fallback_rules=False).extract("Wait -- fine.") == []


def test_extract_many_matches_extract(nlp):
    texts = [
        "Scott Derrickson directed Sinister for Blumhouse.",
        "",
        "Blumhouse paid $4.1 billion on 2 May 2024.",
    ]
    ex = SpacyExtractor(nlp)
    assert ex.extract_many(texts) == [ex.extract(t) for t in texts]
    assert ex.extract_many(iter(texts), batch_size=1) == [ex.extract(t) for t in texts]
    assert ex.extract_many([]) == []


def test_load_by_path_and_missing_model(nlp, tmp_path):
    nlp.to_disk(tmp_path / "pipe")
    loaded = SpacyExtractor(str(tmp_path / "pipe"))
    assert loaded.name == "spacy:en_pipeline"
    assert [m.key for m in loaded.extract("Blumhouse")] == ["blumhouse"]
    assert SpacyExtractor(tmp_path / "pipe").name == "spacy:en_pipeline"  # a Path too

    with pytest.raises(ConfigError, match="en_core_web_nonexistent") as info:
        SpacyExtractor("en_core_web_nonexistent")
    assert "spacy download" in str(info.value)
    assert isinstance(info.value.__cause__, OSError)
    with pytest.raises(ConfigError, match="nlp_or_model"):
        SpacyExtractor(42)  # type: ignore[arg-type]


def test_missing_spacy_names_the_extra(monkeypatch, nlp):
    monkeypatch.setitem(sys.modules, "spacy", None)  # makes `import spacy` raise ImportError
    with pytest.raises(MissingDependencyError, match=r'pip install "pensive\[spacy\]"') as info:
        SpacyExtractor(nlp)
    assert info.value.extra == "spacy"
    assert isinstance(info.value, ImportError)


def test_a_pipeline_without_entity_component_warns(caplog):
    with caplog.at_level("WARNING", logger="pensive_core.graph.spacy_extract"):
        ex = SpacyExtractor(spacy.blank("en"))
    assert "no entity component" in caplog.text
    assert [m.kind for m in ex.extract("Paid 12% on 2 May 2024.")] == ["quantity", "date"]


def test_importing_the_graph_does_not_import_spacy():
    code = (
        "import sys, pensive_core.graph; "
        "from pensive_core.graph import SpacyExtractor; "
        "assert 'spacy' not in sys.modules, 'spacy imported'; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_graph_store_keeps_the_mentions(nlp, tmp_path):
    db = sqlite3.connect(tmp_path / "g.sqlite", isolation_level=None)
    graph = GraphStore(db)
    chunks = [
        ("a#1", 0, "Scott Derrickson directed Sinister for Blumhouse."),
        ("a#2", 1, "Blumhouse moved to Denver on 2 May 2024. Blumhouse grew."),
    ]
    stored = graph.add_document("a", chunks, SpacyExtractor(nlp))
    assert stored == 7
    assert graph.entities_of(["a#1", "a#2"]) == {
        "a#1": {"scott derrickson": 1, "sinister": 1, "blumhouse": 1},
        "a#2": {"blumhouse": 2, "denver": 1, "2 may 2024": 1},
    }
    assert graph.chunks_of("blumhouse") == ["a#1", "a#2"]
    kinds = dict(db.execute("SELECT key, kind FROM graph_entities"))
    assert kinds["scott derrickson"] == "person"
    assert kinds["2 may 2024"] == "date"
    db.close()


def test_mentions_are_plain_values(nlp):
    (m,) = SpacyExtractor(nlp, fallback_rules=False).extract("Blumhouse")
    assert m == Mention("blumhouse", "Blumhouse", "org", 0, 9)
