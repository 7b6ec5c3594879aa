from pensive_core import Tokenizer


def test_identifiers_and_numbers_stay_whole():
    toks = Tokenizer().tokenize("Invoice INV-4471 in Q3 2024 grew 3.5% to $1,200,000")
    for t in ("inv-4471", "q3", "2024", "3.5", "1200000"):
        assert t in toks
    assert "q" not in toks  # "Q3" is not split into letter and digit


def test_camel_and_snake_case_split_and_kept():
    toks = Tokenizer().tokenize("getUserName reads user_name via HTTPServer")
    assert {
        "getusername",
        "get",
        "user",
        "name",
        "user_name",
        "httpserver",
        "http",
        "server",
    } <= set(toks)


def test_stemming_and_stopwords():
    toks = Tokenizer().tokenize("The cats were running")
    assert toks == ["cat", "run"]
    assert Tokenizer(stemmer="", stopwords="none").tokenize("The cats") == ["the", "cats"]


def test_negation_is_kept():
    assert "not" in Tokenizer().tokenize("did X not happen")


def test_numbers_are_not_stemmed():
    assert Tokenizer().tokenize("1990s 2024") == ["1990s", "2024"]
