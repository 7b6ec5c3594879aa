"""LangChain's standard retriever suite, run on PensiveLangChainRetriever over a small hash-embedder store."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("langchain_tests")

from langchain_tests.integration_tests import RetrieversIntegrationTests  # noqa: E402

from pensive_langchain import PensiveLangChainRetriever  # noqa: E402
from tests.conftest import HASH_CONFIG, docs_corpus  # noqa: E402


@pytest.fixture(scope="module")
def corpus_store(tmp_path_factory):
    """One store for the whole suite: eight documents, three of them about Acme's revenue."""
    from pensive_core import Pensive

    p = Pensive(tmp_path_factory.mktemp("lc-standard") / "store", config=HASH_CONFIG)
    p.ingest(docs_corpus())
    yield p
    p.close()


# The suite's coroutine test (test_ainvoke_returns_documents) is unmarked and pytest-asyncio
# runs in strict mode here; the suite forbids overriding it, so the class carries the mark and
# the sync tests' "not an async function" warning is silenced.
@pytest.mark.asyncio
@pytest.mark.filterwarnings("ignore:.*marked with '@pytest.mark.asyncio' but it is not an async")
class TestPensiveLangChainRetrieverStandard(RetrieversIntegrationTests):
    @pytest.fixture(autouse=True)
    def _store(self, corpus_store: Any) -> None:
        self.store = corpus_store

    @property
    def retriever_constructor(self) -> type[PensiveLangChainRetriever]:
        return PensiveLangChainRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"pensive": self.store, "k": 2}

    @property
    def retriever_query_example(self) -> str:
        return "How did Acme revenue change in 2024?"
