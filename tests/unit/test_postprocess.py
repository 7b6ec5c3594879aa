"""Core post-retrieval steps over (text, score, metadata) items, and the reranker plug point."""

from __future__ import annotations

import sys
from datetime import datetime, timezone

import pytest

from pensive_core.errors import ConfigError, InputError, MissingDependencyError
from pensive_core.postprocess import entity_boost, fit_budget, item_time, temporal_rescore
from pensive_core.rerank import CrossEncoderReranker, Reranker, rerank

UTC = timezone.utc

CEO = [
    ("John Smith is the CEO of Acme.", 0.9, {"timestamp": "2019-01-01"}),
    ("Jane Doe is the new CEO of Acme.", 0.8, {"date": datetime(2024, 3, 1)}),
    ("Green tea contains catechins.", 0.5, {}),
]


def _words(text: str) -> int:
    return len(text.split())


def test_item_time_reads_keys_in_order():
    assert item_time({"timestamp": "2024-05-02T10:00:00Z"}) == datetime(2024, 5, 2, 10, tzinfo=UTC)
    assert item_time({"date": "2 May 2024"}) == datetime(2024, 5, 2, tzinfo=UTC)
    assert item_time({"valid_from": 0}) == datetime(1970, 1, 1, tzinfo=UTC)
    assert item_time({"timestamp": "not a date", "date": "2020-01-01"}) == datetime(
        2020, 1, 1, tzinfo=UTC
    )
    assert item_time({"other": "2020-01-01"}) is None
    assert item_time({"when": "2020-01-01"}, keys=("when",)) == datetime(2020, 1, 1, tzinfo=UTC)


def test_temporal_rescore_demotes_the_older_statement():
    out = temporal_rescore(CEO)
    assert [r.index for r in out] == [1, 2, 0]
    old = out[-1]
    assert old.superseded_by == 1 and old.score == pytest.approx(0.45)
    assert old.valid_to == datetime(2024, 3, 1, tzinfo=UTC)
    assert out[0].superseded_by is None and out[0].score == 0.8
    assert CEO[0][1] == 0.9  # inputs untouched


def test_temporal_rescore_as_of_and_negative_scores():
    out = temporal_rescore(CEO, as_of=datetime(2020, 1, 1, tzinfo=UTC))
    assert [(r.index, r.superseded_by) for r in out] == [(0, None), (2, None)]
    neg = [(t, -1.0, m) for t, _, m in CEO[:2]]
    by = {r.index: r.score for r in temporal_rescore(neg, demote=0.5)}
    assert by[0] < by[1] == -1.0  # a demoted negative score still goes down
    with pytest.raises(InputError, match="demote"):
        temporal_rescore(CEO, demote=1.5)


def test_temporal_rescore_undated_change_does_not_demote_dated():
    items = [
        ("The CEO of Acme is Jane Doe.", 0.5, {"timestamp": "2024-01-01"}),
        ("John Smith is now the CEO of Acme.", 0.4, {}),
    ]
    assert all(r.superseded_by is None for r in temporal_rescore(items))


def test_entity_boost_never_lowers_and_favours_shared_entities():
    items = [
        ("The weather in Paris was mild.", 0.5, {}),
        ("Acme hired Jane Doe as chief executive.", 0.48, {}),
        ("Jane Doe spoke about Acme cloud sales.", 0.3, {}),
        ("Nothing here.", -2.0, {}),
    ]
    out = entity_boost("what does acme do", items, boost=0.1)
    assert out[0] == pytest.approx(0.5)
    assert 0.48 * 1.1 < out[1] <= 0.48 * 1.2 + 1e-12
    assert out[2] > 0.3
    assert all(new >= old for new, (_, old, _) in zip(out, items))
    assert entity_boost("acme", items, boost=0.0) == [s for _, s, _ in items]
    with pytest.raises(InputError):
        entity_boost("q", items, boost=-0.1)


def test_fit_budget_keeps_best_and_clips_the_last_around_the_query():
    filler = " ".join(f"Filler sentence {i} says nothing at all." for i in range(20))
    long = f"{filler} The arctic tern migrates from pole to pole. {filler}"
    items = [("Low score.", 0.1, {}), (long, 0.7, {}), ("Green tea helps.", 0.9, {})]
    out = fit_budget("arctic tern", items, 25, tokenizer=_words)
    assert [b.index for b in out] == [2, 1]
    assert not out[0].clipped and out[1].clipped
    assert "The arctic tern migrates from pole to pole." in out[1].text
    assert out[1].text.startswith("[…]")  # clipped around the query, not the head
    assert sum(b.tokens for b in out) <= 25
    assert [b.index for b in fit_budget("x", items, 1000, tokenizer=_words)] == [2, 1, 0]
    # too little room left for a useful clip: the passage is left out
    assert [b.index for b in fit_budget("tern", items, 5, tokenizer=_words, min_tokens=4)] == [2]
    with pytest.raises(InputError):
        fit_budget("q", items, 0)


class _Len:
    def score(self, query, texts):
        return [float(len(t)) for t in texts]


def test_rerank_orders_by_reranker():
    assert isinstance(_Len(), Reranker)
    assert rerank(_Len(), "q", ["aa", "a", "aaa"]) == [(2, 3.0), (0, 2.0), (1, 1.0)]
    assert rerank(_Len(), "q", ["aa", "a", "aaa"], top_n=1) == [(2, 3.0)]
    with pytest.raises(InputError):
        rerank(_Len(), "q", ["a"], top_n=0)


def test_cross_encoder_checks_folder_and_names_extra(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="config.json"):
        CrossEncoderReranker(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    reranker = CrossEncoderReranker(tmp_path, num_labels=1)  # nothing loaded yet
    assert reranker.score("q", []) == []
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(MissingDependencyError) as info:
        reranker.score("q", ["text"])
    assert info.value.extra == "minilm"
