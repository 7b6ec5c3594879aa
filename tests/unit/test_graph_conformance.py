"""The graph and learning conformance suites on the embedded SQLite tables."""

import sqlite3

import pytest

from pensive_core.graph.learning import BaseLevel, Hebbian
from pensive_core.graph.store import GraphStore
from pensive_core.testing import GraphTablesTests, LearningTablesTests


@pytest.fixture
def connections():
    opened = []

    def connect(folder):
        db = sqlite3.connect(folder / "pensive.sqlite", isolation_level=None)
        opened.append(db)
        return db

    yield connect
    for db in opened:
        db.close()


class TestSQLiteGraph(GraphTablesTests):
    refused_write = sqlite3.IntegrityError

    @pytest.fixture
    def make_graph(self, connections):
        return lambda folder, max_pair: GraphStore(connections(folder), max_pair)


class TestSQLiteLearning(LearningTablesTests):
    @pytest.fixture
    def make_learning(self, connections):
        def make(folder, knobs, read_only):
            db = connections(folder)
            return (
                BaseLevel.from_config(knobs, db, read_only=read_only),
                Hebbian.from_config(knobs, db, read_only=read_only),
            )

        return make
