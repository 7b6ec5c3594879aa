"""Contextual embedding inside the store: what is indexed, what is shown, what is reused."""

from __future__ import annotations

import sqlite3

import pytest

from pensive_core import ConfigError, Document, Pensive
from tests.conftest import HASH_CONFIG


def cfg(**context):
    return {**HASH_CONFIG, "router": {"l1": False}, "context": context}


BM25_ONLY = {"fusion": {"weights": {"dense": 0.0, "bm25": 1.0}}, "graph": {"enabled": False}}


def story(extra: str = "") -> Document:
    paras = [
        "Anna Berg had kept a secret from Tomas Lind for years. Anna Berg and Tomas Lind "
        "shared a flat in Uppsala.",
        *[
            " ".join(
                f"Filler sentence {i}-{j} about the quiet weeks in the flat." for j in range(8)
            )
            for i in range(6)
        ],
        "She finally told him the truth on the ferry." + extra,
    ]
    return Document(id="story", text="\n\n".join(paras), metadata={"title": "The Ferry Secret"})


def test_context_is_indexed_but_hit_text_stays_raw(tmp_path):
    doc = story()
    with Pensive(tmp_path / "h", config={**cfg(generator="heuristic"), **BM25_ONLY}) as p:
        report = p.ingest([doc])
        assert report.contexts > 0
        hits = p.query("Anna Berg truth ferry", k=10).hits
        key = next(h for h in hits if "finally told him" in h.text)
        assert "Anna Berg" not in key.text  # the raw passage
        assert key.text in doc.text
        assert "Anna Berg" in key.metadata["context"]
        assert key.metadata["title"] == "The Ferry Secret"
    with Pensive(tmp_path / "plain", config={**cfg(generator="none"), **BM25_ONLY}) as p:
        p.ingest([doc])
        hits = p.query("Anna Berg truth ferry", k=10).hits
        key = next(h for h in hits if "finally told him" in h.text)
        assert "context" not in key.metadata


def test_context_wins_the_question_that_names_the_people(tmp_path):
    """Two stories told alike: only the context says whose the key passage is."""
    a = story()
    b = Document(
        id="other",
        text=a.text.replace("Anna Berg", "Vera Haas").replace("Tomas Lind", "Karl Ruiz"),
        metadata={"title": "Another Secret"},
    )

    def top(generator: str) -> str:
        with Pensive(tmp_path / generator, config={**cfg(generator=generator), **BM25_ONLY}) as p:
            p.ingest([a, b])
            hits = p.query("When did Vera Haas tell Karl Ruiz the truth?", k=20).hits
            keys = [h.doc_id for h in hits if "finally told him" in h.text]
            return keys[0] if keys else ""

    assert top("heuristic") == "other"
    assert top("none") in ("story", "other")  # a tie on equal text: no way to tell


def test_one_paragraph_edit_reembeds_about_one_passage(tmp_path):
    rng_paras = [
        " ".join(
            f"Paragraph {i} sentence {j} tells part {i * 10 + j} of the story." for j in range(6)
        )
        for i in range(30)
    ]
    text = "\n\n".join(rng_paras)
    with Pensive(tmp_path / "s", config=cfg(generator="heuristic")) as p:
        first = p.ingest([Document(id="long", text=text, metadata={"title": "Long"})])
        assert first.chunks_embedded > 5
        rng_paras[14] = rng_paras[14].replace("sentence 3", "sentence three")
        again = p.ingest(
            [Document(id="long", text="\n\n".join(rng_paras), metadata={"title": "Long"})]
        )
        assert again.updated == 1
        assert again.chunks_embedded <= 2
        assert again.chunks_reused >= first.chunks_embedded - 2


def test_changing_the_generator_reindexes_only_what_changed(tmp_path):
    docs = [story()]
    with Pensive(tmp_path / "s", config=cfg(generator="heuristic")) as p:
        p.ingest(docs)
        assert p.ingest(docs).unchanged == 1
        n = p.components.archive.counts()[1]
    with Pensive(tmp_path / "s", config=cfg(generator="none")) as p:
        r = p.ingest(docs)
        assert r.unchanged == 0 and r.updated == 1
        assert r.chunks_embedded + r.chunks_reused == n
        assert r.chunks_embedded >= 1  # passages that had a context are embedded bare
        assert r.contexts == 0
        assert p.ingest(docs).unchanged == 1
        assert p.stats()["context"] == {"prose": None, "records": None}


class CountingLLM:
    def __init__(self, fail: bool = False, words: int = 8) -> None:
        self.calls = 0
        self.prompts: list[str] = []
        self.fail = fail
        self.words = words

    def __call__(self, prompt: str) -> str:
        self.calls += 1
        self.prompts.append(prompt)
        if self.fail:
            raise RuntimeError("the model is down")
        return " ".join(["situated"] * self.words) + "."


def test_llm_contexts_are_cached_across_reingest(tmp_path):
    llm = CountingLLM()
    docs = [story(), Document(id="b", text="Short note about budgets.\n\nAnd a second one.")]
    with Pensive(tmp_path / "s", config=cfg(generator="llm"), llm=llm) as p:
        first = p.ingest(docs)
        assert first.llm_calls == llm.calls > 0
        assert first.contexts_fallback == 0
        assert any("She finally told him the truth" in x for x in llm.prompts)
        hit = p.query("situated", k=1).hits[0]
        assert hit.metadata["context"].startswith("situated")
        for d in docs:
            p.delete(d.id)
        again = p.ingest(docs)
        assert again.llm_calls == 0
        assert again.contexts_cached == first.contexts
    assert llm.calls == first.llm_calls


def test_auto_uses_the_llm_when_given(tmp_path):
    llm = CountingLLM()
    with Pensive(tmp_path / "s", config=cfg(generator="auto"), llm=llm) as p:
        p.ingest([story()])
        assert p.stats()["context"]["prose"].startswith("llm:")
    assert llm.calls > 0


def test_llm_failure_falls_back_and_is_counted(tmp_path):
    llm = CountingLLM(fail=True)
    with Pensive(tmp_path / "s", config=cfg(generator="llm"), llm=llm) as p:
        r = p.ingest([story()])
        assert r.contexts_fallback == p.components.archive.counts()[1] > 0
        contexts = p.components.archive.contexts("story")
        key = next(c for cid, c in contexts.items() if c and "Anna Berg" in c)
        assert key  # the model-free context stood in


def test_long_context_is_clipped_to_fit(tmp_path):
    llm = CountingLLM(words=500)
    with Pensive(tmp_path / "s", config=cfg(generator="llm", max_tokens=20), llm=llm) as p:
        p.ingest([story()])
        contexts = p.components.archive.contexts("story").values()
        assert all(0 < len(c.split()) <= 20 for c in contexts)


def test_llm_generator_without_an_llm_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="llm="):
        Pensive(tmp_path / "s", config=cfg(generator="llm"))


def test_records_get_their_own_generator(tmp_path):
    rows = "\n".join(f"id: {i}\nstatus: open\nowner: Team {i % 3}" for i in range(5))
    records = Document(id="rows", text=rows, metadata={"doc_type": "records", "title": "Tickets"})
    with Pensive(tmp_path / "s", config=cfg(generator="heuristic", records="none")) as p:
        r = p.ingest([records, story()])
        assert all(c == "" for c in p.components.archive.contexts("rows").values())
        assert any(p.components.archive.contexts("story").values())
        assert r.contexts == sum(1 for c in p.components.archive.contexts("story").values() if c)


def test_bad_context_generator_is_rejected(tmp_path):
    from pensive_core import InputError

    with pytest.raises(InputError, match="context_generator"):
        Pensive(tmp_path / "s", config=HASH_CONFIG, context_generator=object())  # type: ignore[arg-type]


def test_user_generator_takes_the_place_of_auto(tmp_path):
    class Upper:
        name = "upper-v1"

        def generate(self, requests):
            return [
                [r.document.metadata.get("title", "").upper() for _ in r.chunks] for r in requests
            ]

    with Pensive(tmp_path / "s", config=HASH_CONFIG, context_generator=Upper()) as p:
        p.ingest([story()])
        assert set(p.components.archive.contexts("story").values()) == {"THE FERRY SECRET"}


def test_schema_2_store_is_migrated(tmp_path):
    with Pensive(tmp_path / "s", config=cfg(generator="none")) as p:
        p.ingest([story()])
    db = sqlite3.connect(tmp_path / "s" / "pensive.sqlite")
    db.execute("ALTER TABLE chunks DROP COLUMN context")
    db.execute("ALTER TABLE documents DROP COLUMN context_gen")
    db.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
    db.commit()
    db.close()
    with Pensive(tmp_path / "s", config=cfg(generator="none")) as p:
        assert p.query("ferry truth", k=1).hits
        assert p.ingest([story()]).unchanged == 1


def test_a_llamaindex_llm_situates_passages_in_the_store(tmp_path):
    llms = pytest.importorskip("llama_index.core.llms")
    llm = llms.MockLLM(max_tokens=6)  # answers "text text text ..."
    with Pensive(tmp_path / "s", config=cfg(generator="llm"), llm=llm) as p:
        r = p.ingest([story()])
        assert r.llm_calls > 0 and r.contexts_fallback == 0
        assert set(p.components.archive.contexts("story").values()) == {
            "text text text text text text"
        }


def test_a_langchain_chat_model_situates_passages_in_the_store(tmp_path):
    fake = pytest.importorskip("langchain_core.language_models.fake_chat_models")
    from langchain_core.messages import AIMessage

    model = fake.GenericFakeChatModel(
        messages=iter([AIMessage(content=f"Context number {i}.") for i in range(100)])
    )
    with Pensive(tmp_path / "s", config=cfg(generator="llm"), llm=model) as p:
        r = p.ingest([story()])
        assert r.llm_calls == p.components.archive.counts()[1]
        got = set(p.components.archive.contexts("story").values())
        assert all(c.startswith("Context number ") for c in got) and len(got) == r.llm_calls
