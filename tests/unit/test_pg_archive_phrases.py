"""The Postgres archive's phrase reading, without a server: a phrase's words and numbers in
order, each later number also with the sign Postgres's parser gives "-1949" in "1945-1949"."""

from __future__ import annotations

import pytest

from pensive_core.storage.pg_archive import word_phrase


@pytest.mark.parametrize(
    ("phrase", "query"),
    [
        ("1945-1949", "'1945' <-> ('1949' | '-1949')"),
        ("1945–1949", "'1945' <-> ('1949' | '-1949')"),
        ("COVID-19", "'COVID' <-> ('19' | '-19')"),
        ("inv-4471", "'inv' <-> ('4471' | '-4471')"),
        ("x-ray", "'x' <-> 'ray'"),
        ("1950s", "'1950s'"),
        ("it's", "'it' <-> 's'"),
        ("snake_case", "'snake' <-> 'case'"),
        ("ünïcødé", "'ünïcødé'"),
    ],
)
def test_a_phrase_is_its_words_and_numbers_in_order(phrase, query):
    assert word_phrase(phrase) == query


def test_nothing_but_punctuation_is_no_query():
    assert word_phrase(" -- ' ; ") == ""
    assert word_phrase("") == ""


def test_no_quote_or_operator_reaches_the_query():
    q = word_phrase("'tern' | !acme & (x) <-> y:*")
    assert q == "'tern' <-> 'acme' <-> 'x' <-> 'y'"
