"""The card stage: an entity question about one known entity answered from its L1 card.

A question is served from a card when all of these hold: ``[router] entity_cards`` and
``[router] l1`` are on (L1 off sends every question to L2), learning is off (as for L1's
cached answers: with it on, answers change as they are used, and a card answer is no use); it
is an entity question (:func:`~.questions.entity_question`: "who is X", "tell me about X",
"X?"...) whose name is, whole, the key of an entity the graph knows (its normal form, a
document title's parenthesised qualifier dropped); that entity's card is *confident* (exactly
one document is about it, and when the card was built L2 put one and the same passage of that
document first for both "who is X?" and "tell me about X", which then leads the card); the
card is as of
the store's commit; the question comes without ``as_of``, a filter or a context; and the card
holds ``k`` passages or every passage naming the entity.

The answer has tier ``"L1"``, ``QueryResult.card`` set to the entity's key, and the card's
passages as hits in the usual shape (``Hit.sources == {"card": rank}``, no ``match``: no
question vector is made).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..errors import InputError
from ..fusion import Fused
from ..graph.store import subject_key
from ..query.match import verdict
from ..query.state import QueryState, elapsed_ms
from ..types import QueryResult
from ..validate import check_text
from .build import behind, document_summary, rebuild_all
from .questions import entity_question
from .store import EntityCard

if TYPE_CHECKING:
    from ..components import Components
    from ..query.request import QueryRequest
    from ..router import Router

log = logging.getLogger(__name__)

#: How many passages the L2 answer that checks a card is asked for.
VERIFY_K = 5

__all__ = ["CardStage"]


class CardStage:
    """Answers entity questions from cards, checks cards against L2, and reads cards and
    summaries.

    Made with the router; a writer whose cards are behind the archive (never built, another
    version, commits made with cards off) rebuilds them all then.

    Args:
        comps: The store's parts.
        router: The router (its hit builder, and L2 to check cards with).
    """

    def __init__(self, comps: Components, router: Router) -> None:
        self._comps = comps
        self._router = router
        self._current = -1  # the last commit the cards were seen to be built at
        if behind(comps):
            log.info("building entity cards")
            rebuild_all(comps, self.verify)

    def verify(self, questions: dict[str, list[str]]) -> dict[str, str | None]:
        """Per entity key, the passage L2 puts first for every one of its questions, as a
        fresh query would (no L1, no learning); None when they differ or one has no answer."""
        out: dict[str, str | None] = {}
        for key, texts in questions.items():
            tops = set()
            for text in texts:
                ans = self._router.answer(QueryState(text, VERIFY_K, None))
                tops.add(ans.hits[0].chunk_id if ans.hits else None)
            out[key] = tops.pop() if len(tops) == 1 else None
        return out

    @property
    def on(self) -> bool:
        """Cards are kept (``[router] entity_cards``, embedded engine, graph on)."""
        return self._comps.cards is not None and self._comps.config.router.entity_cards

    def fresh(self) -> bool:
        """The cards are as of the store's commit (a reader may see a commit before its
        writer has rebuilt the cards it touched)."""
        comps = self._comps
        if self._current != comps.commit_no:
            if comps.archive.get_meta("cards_synced") != comps.commit_no:
                return False
            self._current = comps.commit_no
        return True

    def card(self, name: str) -> EntityCard | None:
        """The card of the entity called ``name`` (any case; a title's qualifier may be left
        out), or None (unknown entity, or cards off or behind)."""
        if not self.on or not self.fresh():
            return None
        assert self._comps.cards is not None
        return self._comps.cards.get(subject_key(name))

    def summary(self, doc_id: str) -> str:
        """A document's summary: its lead sentences (stored with the cards where they are
        kept, else made from the archive).

        Raises:
            InputError: If ``doc_id`` is not a str that encodes as UTF-8.
            NotFoundError: If no document has that id.
        """
        if not isinstance(doc_id, str):
            raise InputError(f"doc_id must be a document id (str), got {type(doc_id).__name__}")
        check_text(doc_id, "doc_id")
        cards = self._comps.cards
        if cards is not None and self.fresh():
            stored = cards.summary(doc_id)
            if stored is not None:
                return stored
        return document_summary(self._comps, doc_id)

    def answer(self, req: QueryRequest, t0: float) -> QueryResult | None:
        """The card's answer to ``req``, or None when a card does not answer it (see the
        module docstring)."""
        comps = self._comps
        if not self.on or not comps.config.router.l1 or comps.learning is not None:
            return None
        if req.context or req.where is not None or req.cutoff is not None:
            return None
        name = entity_question(req.text)
        if name is None:
            return None
        card = self.card(name)
        if card is None or not card.confident:
            return None
        if len(card.passages) < req.k and not card.complete:
            return None  # more passages name it than the card holds: L2 ranks them
        fused = [Fused(cid, 1.0 / (i + 1), {"card": i + 1}) for i, cid in enumerate(card.passages)]
        hits = self._router.hits.build(fused, req.k, None)
        if not hits or hits[0].chunk_id != card.passages[0]:
            return None  # the archive lacks its lead passage (an interrupted change)
        kept, best, weak = verdict(hits, req.min_score)
        return QueryResult(
            kept, "L1", 1.0, elapsed_ms(t0), req.text, match=best, weak=weak, card=card.key
        )
