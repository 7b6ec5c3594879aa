import pytest

from pensive_core import ConfigError, Pensive, load_config


def test_partial_config_overrides_only_named_keys():
    cfg = load_config({"fusion": {"method": "zscore"}})
    assert cfg.fusion.method == "zscore"
    assert cfg.fusion.k == 60
    assert cfg.embedder.name == "minilm"


@pytest.mark.parametrize(
    "bad,needle",
    [
        ({"fusion": {"methd": "rrf"}}, "fusion.methd"),
        ({"nonsense": 1}, "nonsense"),
        ({"fusion": {"method": "borda"}}, "fusion.method"),
        ({"fusion": {"weights": {"dnse": 1.0}}}, "dnse"),
        ({"bm25": {"b": 2}}, "bm25.b"),
    ],
)
def test_bad_config_is_a_clear_error(bad, needle):
    with pytest.raises(ConfigError, match=needle.replace(".", r"\.")):
        load_config(bad)


@pytest.mark.parametrize(
    "bad,said",
    [
        ({"fusion": {"methd": "rrf"}}, "'fusion.methd' (did you mean 'fusion.method'?)"),
        ({"fusoin": {"method": "rrf"}}, "'fusoin' (did you mean 'fusion'?)"),
        (
            {"backend": {"faiss": {"hnsw_treshold": 5}}},
            "'backend.faiss.hnsw_treshold' (did you mean 'backend.faiss.hnsw_threshold'?)",
        ),
    ],
)
def test_an_unknown_key_names_the_nearest_valid_one(bad, said):
    with pytest.raises(ConfigError) as info:
        load_config(bad)
    assert f"unknown config key {said}" in str(info.value)


def test_an_unknown_key_with_nothing_near_gets_no_guess():
    with pytest.raises(ConfigError) as info:
        load_config({"zzzzzz": 1, "fusion": {"qqqqqq": 2}})
    message = str(info.value)
    assert "unknown config key 'zzzzzz'" in message and "'fusion.qqqqqq'" in message
    assert "did you mean" not in message


def test_toml_file_and_env_override(tmp_path, monkeypatch):
    f = tmp_path / "pensive.toml"
    f.write_text('[fusion]\nmethod = "weighted"\nk = 10\n')
    monkeypatch.setenv("PENSIVE_FUSION__K", "20")
    cfg = load_config(f)
    assert cfg.fusion.method == "weighted" and cfg.fusion.k == 20


def test_broken_toml_and_missing_file(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("[fusion\nmethod=")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(f)
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")
    with pytest.raises(ConfigError):
        load_config(42)


def test_store_remembers_config_and_refuses_structural_change(tmp_path):
    with Pensive(tmp_path, config={"embedder": {"name": "hash"}, "fusion": {"k": 7}}) as p:
        assert p.config.fusion.k == 7
    with Pensive(tmp_path) as p:  # reopened with no config: the saved one applies
        assert p.config.embedder.name == "hash"
        assert p.config.fusion.k == 7
    with Pensive(
        tmp_path, config={"fusion": {"method": "zscore"}}
    ) as p:  # query-time keys may change
        assert p.config.fusion.method == "zscore"
    with pytest.raises(ConfigError, match="embedder.name"):
        Pensive(tmp_path, config={"embedder": {"name": "minilm"}})


def test_the_docs_config_block_is_the_defaults():
    import re
    from pathlib import Path

    import tomllib

    from pensive_core.config import PensiveConfig, load_config

    page = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    (block,) = re.findall(r"```toml\n(.*?)```", page, re.S)[:1]
    assert load_config(tomllib.loads(block), environ={}) == PensiveConfig()
