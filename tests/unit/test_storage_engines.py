"""The storage engine choice, without a server: which schema a store folder names, the DSN a
store's connections use, what a store saves of [storage], and the vectors' default there."""

from pathlib import Path

import pytest

from pensive_core import ConfigError, load_config
from pensive_core.config import StorageConfig, saved_config, shared_backend
from pensive_core.storage.postgres import namespace_of, scoped_dsn, store_schema


def test_a_folder_names_its_namespace_as_namespace_path_lays_them_out():
    assert namespace_of(Path("/srv/pensive")) == "default"
    assert namespace_of(Path("/srv/pensive/namespaces/team-a")) == "team-a"
    assert namespace_of(Path("/srv/pensive/namespaces/Not_Valid!")) == "default"


def test_each_namespace_is_a_schema_of_its_own():
    cfg = StorageConfig(engine="postgres", dsn="host=db", schema_name="acme")
    assert store_schema(cfg, Path("/x")) == "acme"
    assert store_schema(cfg, Path("/x/namespaces/t-1")) == "acme__t-1"
    with pytest.raises(ConfigError, match="63 bytes"):
        store_schema(StorageConfig(schema_name="s" * 40), Path("/x/namespaces/" + "n" * 30))


@pytest.mark.parametrize("bad", ["Acme", "a-b", "a__b", "a_", "", "x" * 41, "1abc"])
def test_a_schema_name_that_could_collide_or_needs_quoting_is_refused(bad):
    with pytest.raises(ConfigError, match="schema_name"):
        load_config({"storage": {"schema_name": bad}}, environ={})


def test_connections_search_the_store_schema_first_and_keep_the_callers_options():
    from psycopg.conninfo import conninfo_to_dict

    got = conninfo_to_dict(scoped_dsn("host=db dbname=p options='-c statement_timeout=5s'", "s1"))
    assert got["host"] == "db" and got["dbname"] == "p"
    assert got["options"] == '-c statement_timeout=5s -c search_path="s1",public'
    url = conninfo_to_dict(scoped_dsn("postgresql://app@db:5433/p", "acme__t-1"))
    assert url["port"] == "5433" and url["options"] == '-c search_path="acme__t-1",public'


def test_the_dsn_is_never_saved_with_the_store():
    cfg = load_config(
        {"storage": {"engine": "postgres", "dsn": "postgresql://app:secret@db/p"}}, environ={}
    )
    saved = saved_config(cfg)
    assert saved["storage"]["dsn"] == "" and saved["storage"]["engine"] == "postgres"
    assert "secret" not in repr(saved)
    assert cfg.storage.dsn  # (the open store still knows where it is)


def test_a_new_shared_store_keeps_its_vectors_in_pgvector_unless_told(monkeypatch):
    given = {"storage": {"engine": "postgres", "dsn": "host=db"}}
    cfg = load_config(given, environ={})
    assert cfg.backend.name == "faiss"  # the general default...
    assert shared_backend(cfg, given).backend.name == "pgvector"  # ...is not one replicas share
    named = {**given, "backend": {"name": "weaviate"}}
    assert shared_backend(load_config(named, environ={}), named).backend.name == "weaviate"
    monkeypatch.setenv("PENSIVE_BACKEND__NAME", "chroma")  # the environment names one
    assert shared_backend(load_config(given), given).backend.name == "chroma"


def test_the_postgres_engine_without_a_dsn_says_where_to_put_one(tmp_path):
    from pensive_core import Pensive

    with pytest.raises(ConfigError, match=r"\[storage\] dsn.*PENSIVE_STORAGE__DSN"):
        Pensive(tmp_path / "s", config={"storage": {"engine": "postgres"}})
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").iterdir())


@pytest.mark.parametrize(
    "dsn",
    [
        "host=db dbname=p user=app password=S3cret",
        "host=db password='S3 cret' user=app",
        "postgresql:///p?host=/tmp/x&user=app&password=S3cret",
        "postgresql://app:S3cret@db/p",
        "PASSWORD = S3cret host=db",
    ],
)
def test_a_dsn_password_is_masked_wherever_the_config_is_shown(dsn):
    from pensive_core.config import redacted

    shown = redacted(load_config({"storage": {"engine": "postgres", "dsn": dsn}}, environ={}))
    assert "S3" not in str(shown) and "***" in shown["storage"]["dsn"]


def test_a_local_backend_named_for_a_shared_store_is_refused():
    given = {"storage": {"engine": "postgres", "dsn": "host=db"}, "backend": {"name": "faiss"}}
    with pytest.raises(ConfigError, match="pgvector"):
        shared_backend(load_config(given, environ={}), given)
