"""The rule-based entity extractor: what it finds, how mentions are normalised and merged."""

import pytest

from pensive_core.graph import EntityExtractor, RuleExtractor, merge_aliases, normalize_entity


def found(text, **kw):
    return [(m.kind, m.text) for m in merge_aliases(RuleExtractor(**kw).extract(text))]


def test_protocol():
    assert isinstance(RuleExtractor(), EntityExtractor)


def test_kinds_on_a_business_sentence():
    got = found("Invoice INV-4471 for 3,200 euros was paid by Globex on 2 May 2024.")
    assert ("id", "INV-4471") in got
    assert ("quantity", "3,200 euros") in got
    assert ("name", "Globex") in got
    assert ("date", "2 May 2024") in got
    assert ("name", "May") not in got  # inside a date, not a name


@pytest.mark.parametrize(
    "text, mention",
    [
        ("Revenue rose 12% in Q3.", ("quantity", "12%")),
        ("It cost $4.1 billion.", ("quantity", "$4.1 billion")),
        ("The BRCA1 gene.", ("id", "BRCA1")),
        ("Born July 16, 1966 in Denver.", ("date", "July 16, 1966")),
        ("Released 2024-05-02.", ("date", "2024-05-02")),
        ('The film "The Night Ferry" opened.', ("title", "The Night Ferry")),
        ("She studied at the University of Oxford.", ("name", "University of Oxford")),
        ("Ed Wood was an American filmmaker.", ("name", "Ed Wood")),
    ],
)
def test_each_kind(text, mention):
    assert mention in found(text)


def test_sentence_openers_and_honorifics_are_not_names():
    got = found("The tern flies. In 1999 Mr. Smith's team won.")
    assert ("name", "The") not in got and ("name", "In") not in got
    assert ("name", "Smith") in got  # honorific and possessive dropped


def test_two_names_joined_by_and_stay_two():
    got = found("Acme and Globex merged with the Bank of America.")
    assert ("name", "Acme") in got and ("name", "Globex") in got
    assert ("name", "Bank of America") in got


def test_offsets_point_at_the_text():
    text = "John Smith met Jane Doe at IBM in March 2020."
    for m in RuleExtractor().extract(text):
        assert text[m.start : m.end] == m.text


def test_normal_form():
    assert normalize_entity("The  Beatles’s") == "beatles"
    assert normalize_entity("ＡＣＭＥ Corp") == "acme corp"  # NFKC, case folded


def test_alias_merging():
    ms = merge_aliases(
        RuleExtractor().extract(
            "John Smith founded International Business Machines. Smith ran IBM for years."
        )
    )
    keys = {m.text: m.key for m in ms}
    assert keys["Smith"] == "john smith"
    assert keys["IBM"] == "international business machines"


def test_ambiguous_short_forms_keep_their_own_key():
    ms = merge_aliases(RuleExtractor().extract("John Smith and Anna Smith met. Smith left."))
    assert {m.key for m in ms if m.text == "Smith"} == {"smith"}


def test_kinds_can_be_limited():
    assert all(k == "date" for k, _ in found("Acme paid 5% on 2 May 2024.", kinds=["date"]))


def test_names_stay_on_their_line_and_keep_every_letter():
    text = "Christopher Nolan\n\nChristopher Edward  Nolan directed films."
    keys = [m.key for m in RuleExtractor().extract(text)]
    assert keys == ["christopher nolan", "christopher edward nolan"]
    spans = [text[m.start : m.end] for m in RuleExtractor().extract(text)]
    assert spans == ["Christopher Nolan", "Christopher Edward  Nolan"]


# Written before the fix (issue 25): how people open a sentence before a name. The opener, a
# time word after it, or a greeting is not part of the name that follows it.
OPENED = [
    ("In June Caroline went to Lisbon.", "Caroline"),
    ("Over Christmas Caroline visited Lisbon again.", "Caroline"),
    ("Last Christmas Caroline stayed home.", "Caroline"),
    ("On Monday Caroline flew out.", "Caroline"),
    ("Yesterday Caroline got back.", "Caroline"),
    ("After Easter Caroline took the train.", "Caroline"),
    ("Around New Year Caroline moved.", "Caroline"),
    ("Back in March Caroline was there.", "Caroline"),
    ("Finally Caroline made it.", "Caroline"),
    ("Honestly Caroline loved it.", "Caroline"),
    ("Next Tuesday Caroline returns.", "Caroline"),
    ("This weekend Caroline is away.", "Caroline"),
    ("Hey Caroline, how was it?", "Caroline"),
    ("Thanks Caroline!", "Caroline"),
    ("Dear Caroline Bell, welcome.", "Caroline Bell"),
    ("Later that year Hana Kraind left.", "Hana Kraind"),
]


@pytest.mark.parametrize(("text", "name"), OPENED)
def test_a_sentence_opening_does_not_merge_into_the_name(text, name):
    names = [t for kind, t in found(text) if kind == "name"]
    assert names[0] == name


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("June Carter sang in Lisbon.", "June Carter"),  # a time word opening a name stays
        ("Christmas Island lies south of Java.", "Christmas Island"),
        ("She met Caroline in June.", "Caroline"),
        ("The Bank of England raised rates.", "Bank of England"),
    ],
)
def test_names_that_start_with_a_time_word_stay_whole(text, name):
    assert ("name", name) in found(text)
