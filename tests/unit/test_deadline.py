"""A query past its thread's time limit stops at its next stage instead of running on (the
server's 504 used to leave it running to the end, holding a reader and a worker thread)."""

from __future__ import annotations

import threading
import time

import pytest

from pensive_core import Document, Pensive
from pensive_core.deadline import DeadlineExceeded, check, within


class SlowQueries:
    """A model-free embedder whose query embedding takes a while, counting what it was asked."""

    name, dim, max_tokens = "slow-queries", 8, 64
    calls = 0

    def embed(self, texts):
        import numpy as np

        out = np.ones((len(texts), 8), dtype=np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def embed_query(self, text):
        SlowQueries.calls += 1
        time.sleep(0.3)
        return self.embed([text])[0]

    def count_tokens(self, texts):
        return [len(t.split()) for t in texts]


def test_the_limit_is_per_thread_nests_and_is_gone_after_the_block():
    with within(0.0):
        time.sleep(0.001)
        with pytest.raises(DeadlineExceeded):
            check()
        with within(60.0), pytest.raises(DeadlineExceeded):  # an inner limit never extends
            check()
        elsewhere = []
        t = threading.Thread(target=lambda: elsewhere.append(check()))
        t.start()
        t.join()
        assert elsewhere == [None]  # another thread has no limit
    check()  # and after the block neither has this one
    assert issubclass(DeadlineExceeded, TimeoutError)


def test_a_query_past_its_limit_stops_before_the_next_stage(tmp_path):
    cfg = {"embedder": {"name": "tests.unit.test_deadline:SlowQueries"}, "router": {"l1": False}}
    with Pensive(tmp_path / "s", config=cfg) as p:
        p.ingest([Document(id="a", text="Grey herons wait at the edge of the marsh.")])
        assert p.query("grey heron").hits  # without a limit it answers
        with within(0.1), pytest.raises(DeadlineExceeded):
            p.query("where do herons wait")  # its embedding (0.3 s) runs out the limit
        assert p.query("grey heron").hits  # the store is none the worse
