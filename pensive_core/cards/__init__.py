"""L1 entity cards and document summaries.

Per entity the graph knows, a card (:class:`EntityCard`): the documents about it, their
passages then the passages naming it (most used first), its current statements with valid
times, and its document's summary. Per document, a lead-sentence summary. Built at commit from
the graph's tables (:mod:`.build`), kept in the store's SQLite file (:mod:`.store`), and served
by the router for entity questions ("who is X") about exactly one known entity whose card is
confident (:mod:`.stage`).
"""

from .build import MAX_PASSAGES, build_cards, document_summary, open_cards, update_cards
from .questions import entity_question
from .stage import CardStage
from .store import CardStatement, CardStore, EntityCard
from .summary import summarize

__all__ = [
    "MAX_PASSAGES",
    "CardStage",
    "CardStatement",
    "CardStore",
    "EntityCard",
    "build_cards",
    "document_summary",
    "entity_question",
    "open_cards",
    "summarize",
    "update_cards",
]
