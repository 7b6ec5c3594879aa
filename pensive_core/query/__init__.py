"""The query side: the stages a question passes through, in the order
:class:`~pensive_core.router.Router` runs them.

request validation (:mod:`.request`) -> L1 (:mod:`.l1`) -> aggregation (:mod:`.aggregate`) ->
L2 retrieval (:mod:`.retrieve`) -> graph (:mod:`.graph`, :mod:`.learning`) -> temporal
(:mod:`.temporal`) -> hits (:mod:`.hits`) -> rerank (:mod:`.rerank`) -> L3 escalation
(:mod:`.escalate`) -> L1 store. :class:`~.state.QueryState` carries one question through them.
"""

from .request import MAX_K, MAX_QUERY_CHARS, QueryRequest, make_request
from .state import Answer, QueryState

__all__ = ["MAX_K", "MAX_QUERY_CHARS", "Answer", "QueryRequest", "QueryState", "make_request"]
