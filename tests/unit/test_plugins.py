"""The one plug-in resolver: built-in names, "module:Class", instances, and the protocol checks
each kind makes; the extractors reachable from the config; the named hook points."""

import pytest

from pensive_core import ConfigError, Document, InputError, Pensive, hooks
from pensive_core.graph import EntityExtractor, Mention, RuleExtractor
from pensive_core.plugins import PLUG_KINDS, check_plugin, is_class_path, resolve_class
from pensive_core.temporal import RuleStatementExtractor, Statement
from tests.conftest import HASH_CONFIG


class Shouty:
    """A user's entity extractor: every capitalised word is a name."""

    name = "shouty-v1"

    def extract(self, text):
        out, pos = [], 0
        for word in text.split():
            start = text.index(word, pos)
            pos = start + len(word)
            w = word.strip(".,")
            if w[:1].isupper():
                out.append(Mention(w.lower(), w, "name", start, start + len(w)))
        return out


class NoStatements:
    name = "none-v1"

    def extract(self, text, reference=None):
        return []


class Half:
    """A user's embedder with a dimension of its own (model-free)."""

    name, dim, max_tokens = "half", 8, 64

    def embed(self, texts):
        import numpy as np

        out = np.ones((len(texts), 8), dtype=np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def embed_query(self, text):
        return self.embed([text])[0]

    def count_tokens(self, texts):
        return [len(t.split()) for t in texts]


def test_every_kind_resolves_its_built_ins():
    assert resolve_class("extractor", "rules") is RuleExtractor
    assert resolve_class("statements", "rules") is RuleStatementExtractor
    for kind in PLUG_KINDS.values():
        assert kind.names, kind.kind
        assert isinstance(kind.protocol(), type)


def test_a_class_path_and_its_errors():
    assert resolve_class("extractor", "tests.unit.test_plugins:Shouty") is Shouty
    assert is_class_path("a.b:C") and not is_class_path("C:\\models") and not is_class_path("x")
    with pytest.raises(ConfigError, match="graph.extractor 'nope' is unknown"):
        resolve_class("extractor", "nope")
    with pytest.raises(ConfigError, match="cannot import module"):
        resolve_class("extractor", "no_such_module_here:X")
    with pytest.raises(ConfigError, match="has no attribute 'Missing'"):
        resolve_class("extractor", "tests.unit.test_plugins:Missing")


def test_what_cannot_be_built_is_a_config_error(tmp_path):
    from pensive_core.plugins import build

    with pytest.raises(ConfigError, match="cannot be built with no arguments"):
        build("extractor", "tests.unit.test_plugins:NeedsArgs")
    with pytest.raises(ConfigError, match="is not a class"):
        build("extractor", "tests.unit.test_plugins:NOT_A_CLASS")
    with pytest.raises(ConfigError, match="does not implement ContextGenerator"):
        build("context", "os:getcwd")  # a callable that returns something else
    cfg = {**HASH_CONFIG, "graph": {"extractor": "tests.unit.test_plugins:NeedsArgs"}}
    with pytest.raises(ConfigError, match="graph.extractor"):
        Pensive(tmp_path, config=cfg)
    with Pensive(tmp_path, config=HASH_CONFIG) as p:  # the refused config was not kept
        assert p.config.graph.extractor == "rules"


class NeedsArgs:
    def __init__(self, model):
        self.model = model


NOT_A_CLASS = 42


def test_an_instance_must_implement_the_protocol():
    assert check_plugin("extractor", Shouty()) is not None
    with pytest.raises(ConfigError, match="does not implement EntityExtractor.*extract"):
        check_plugin("extractor", object())
    with pytest.raises(ConfigError, match="StatementExtractor"):
        check_plugin("statements", Half())
    assert isinstance(Shouty(), EntityExtractor)


def test_extractors_from_config_and_by_instance(tmp_path):
    cfg = {**HASH_CONFIG, "graph": {"extractor": "tests.unit.test_plugins:Shouty"}}
    docs = [Document(id="a", text="Quorbel is led by Hana. Hana lives in Tallinn.")]
    with Pensive(tmp_path / "a", config=cfg) as p:
        p.ingest(docs)
        assert p.components.extractor.name == "shouty-v1"
        assert p.components.graph.mentioning({"tallinn"})
    with Pensive(tmp_path / "b", config=HASH_CONFIG, statement_extractor=NoStatements()) as p:
        p.ingest([Document(id="c", text="The CEO of Acme is Jane Doe.")])
        assert p.stats()["temporal"]["statements"] == 0
    with pytest.raises(ConfigError, match="extractor"):
        Pensive(tmp_path / "c", config=HASH_CONFIG, extractor=object())
    Pensive(tmp_path / "c", config=HASH_CONFIG).close()  # the refused open left no lock behind


def test_a_new_extractor_rebuilds_the_graph_from_the_archive(tmp_path):
    docs = [Document(id="a", text="the quorbel project is led by hana kraind in tallinn.")]
    with Pensive(tmp_path, config=HASH_CONFIG) as p:
        p.ingest(docs)
        assert not p.components.graph.mentioning({"tallinn"})  # the rules want capitals
    with Pensive(tmp_path, extractor=LowerToo()) as p:
        assert p.components.archive.get_meta("graph_extractor") == "lower-too"
        assert p.components.graph.mentioning({"tallinn"})
    with Pensive(tmp_path) as p:  # back to the configured rules: rebuilt again
        assert p.components.archive.get_meta("graph_extractor") == "rules"
        assert not p.components.graph.mentioning({"tallinn"})


class LowerToo(Shouty):
    name = "lower-too"

    def extract(self, text):
        word = "tallinn"
        at = text.find(word)
        return [] if at < 0 else [Mention(word, word, "name", at, at + len(word))]


def test_spacy_is_reachable_from_the_config(tmp_path):
    spacy = pytest.importorskip("spacy")
    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler").add_patterns([{"label": "GPE", "pattern": "Tallinn"}])
    nlp.to_disk(tmp_path / "pipe")
    cfg = {**HASH_CONFIG, "graph": {"extractor": "spacy", "spacy_model": str(tmp_path / "pipe")}}
    with Pensive(tmp_path / "s", config=cfg) as p:
        p.ingest([Document(id="a", text="Hana Kraind was born in Tallinn.")])
        assert p.components.extractor.name.startswith("spacy:")
        assert p.components.graph.mentioning({"tallinn"})


def test_an_embedder_by_class_path(tmp_path):
    cfg = {"embedder": {"name": "tests.unit.test_plugins:Half"}}
    with Pensive(tmp_path, config=cfg) as p:
        p.ingest([Document(id="a", text="one two three")])
        assert p.stats()["vectors"] == 1 and p.embedder.dim == 8
    # the model is made on first use: a class that is no embedder is refused then
    bad = Pensive(tmp_path / "x", config={"embedder": {"name": "tests.unit.test_plugins:Shouty"}})
    try:
        with pytest.raises(ConfigError, match="embedder.name"):
            bad.ingest([Document(id="a", text="one")])
        assert bad.stats()["documents"] == 0
    finally:
        bad.close()


class Titled:
    """A user's context generator: the document's title."""

    name = "titled-v1"

    def generate(self, requests):
        return [[r.document.metadata.get("title", "")] * len(r.chunks) for r in requests]


def test_a_context_generator_by_class_path(tmp_path):
    cfg = {**HASH_CONFIG, "context": {"generator": "tests.unit.test_plugins:Titled"}}
    with Pensive(tmp_path / "a", config=cfg) as p:
        p.ingest([Document(id="d", text="It sails at ten.", metadata={"title": "Night ferry"})])
        assert set(p.components.archive.contexts("d").values()) == {"Night ferry"}
        assert p.stats()["context"]["prose"] == "titled-v1"
    bad = {**HASH_CONFIG, "context": {"generator": "tests.unit.test_plugins:Shouty"}}
    with pytest.raises(ConfigError, match="context.generator.*ContextGenerator"):
        Pensive(tmp_path / "b", config=bad)
    with pytest.raises(ConfigError, match="context.generator"):
        Pensive(tmp_path / "c", config={**HASH_CONFIG, "context": {"generator": "bogus"}})


def test_statement_extractors_have_names():
    assert RuleStatementExtractor().name == "rules"
    assert isinstance(Statement, type)


# -- hook points --------------------------------------------------------------------------
def test_hooks_announce_each_point_in_order(tmp_path):
    seen = []
    remove = hooks.add_listener(lambda point, event: seen.append((point, event)))
    try:
        with Pensive(tmp_path, config=HASH_CONFIG) as p:
            p.ingest([Document(id="a", text="Hana Kraind was born in Tallinn.")])
            p.query("Tallinn")
            p.delete("a")
    finally:
        remove()
    points = [pt for pt, ev in seen if ev == "enter"]
    assert points == [
        "open",
        "recover",
        "ingest-batch",
        "commit",
        "l1-invalidate",
        "query",
        "delete",
        "commit",
        "l1-invalidate",
        "close",
        "commit",
    ]
    assert all(ev in ("enter", "exit") for _, ev in seen)
    assert len([1 for _, ev in seen if ev == "enter"]) == len([1 for _, ev in seen if ev == "exit"])


def test_a_failing_step_is_announced_and_listeners_nest():
    order = []
    a = hooks.add_listener(lambda pt, ev: order.append(("a", ev)))
    b = hooks.add_listener(lambda pt, ev: order.append(("b", ev)))
    try:
        with pytest.raises(ValueError), hooks.announce("commit"):
            raise ValueError("boom")
    finally:
        a()
        b()
    assert order == [("a", "enter"), ("b", "enter"), ("b", "fail"), ("a", "fail")]
    with pytest.raises(InputError, match="callable"):
        hooks.add_listener(42)  # type: ignore[arg-type]
    with hooks.announce("not-a-point"):  # no listener: costs nothing, checks nothing
        pass
    remove = hooks.add_listener(lambda pt, ev: None)
    try:
        with pytest.raises(InputError, match="unknown hook point"), hooks.announce("nope"):
            pass
    finally:
        remove()
