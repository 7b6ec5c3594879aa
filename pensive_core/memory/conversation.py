"""Persistent per-session conversation memory: ``Pensive.conversation(session_id)``.

A session is a small Pensive store of its own (in its own folder: physical isolation), holding
one document per turn, so turns are found by the same hybrid machinery as documents: dense +
BM25 fusion, the entity graph, temporal resolution (a later "I moved to Lisbon" supersedes an
earlier "I live in Porto"). Each turn is embedded with its speaker as situating context.

Beside the index, ``memory.sqlite`` keeps the log: every turn in order, the segments that topic
shifts cut the conversation into, their summaries ("the story so far") and pinned notes. A turn
is written to the log first and indexed second; a turn the index lacks (a crash in between) is
indexed when the session next opens, so nothing acknowledged is lost.

What ``context()`` hands a model, within a token budget: pinned notes and the story so far (a
stable prefix, byte-identical from turn to turn for provider prompt caching), the older turns
that bear on the question (recalled), passages from the main store if asked for, and the most
recent turns verbatim.

:class:`Conversation` ties the parts together; each lives in a module of its own: the turn log
(:mod:`.turns`), segments and summaries (:mod:`.segments`), the session's stores
(:mod:`.index`), recall (:mod:`.recall`) and the prompt (:mod:`.session_prompt`). Everything a
session needs of the store that owns it comes through a :class:`~.host.SessionHost`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..errors import InputError, PensiveError
from ..timeutil import ensure_utc
from ..types import Hit
from ..validate import check_text, validate_k, validate_query
from .index import SessionIndex
from .index import session_config as session_config  # importable from here, as it always was
from .recall import (
    HybridSearch,
    LastRecall,
    hypervector_hits,
    is_followup_query,
    marked,
    recent_hits,
)
from .segments import Segmenter, Story
from .sessions import SessionInfo
from .turns import RESERVED_KEYS as RESERVED_KEYS  # importable from here, as they always were
from .turns import Turn, TurnContext, TurnStore, check_turn
from .turns import turn_context as turn_context
from .turns import turn_id as turn_id

if TYPE_CHECKING:
    from ..engine import Pensive
    from .host import SessionHost
    from .hypervector import HypervectorSelector
    from .prompt import BuiltPrompt

__all__ = ["Conversation", "Turn", "TurnContext"]

log = logging.getLogger(__name__)

Method = Literal["hybrid", "hypervector", "recent"]


class Conversation:
    """One session's memory. Get it from :meth:`Pensive.conversation`, not directly.

    Turns come back as :class:`Hit` objects: ``hit.doc_id`` is the turn id, ``hit.metadata``
    what the caller passed to :meth:`add` plus ``role``, ``session_id`` and ``seq``, and
    ``hit.timestamp`` the turn's time.

    Args:
        host: What the session needs of the store that owns it.
        info: The session's registration.

    Example:
        >>> chat = p.conversation("session-42", user="ana")           # doctest: +SKIP
        >>> chat.add("user", "I moved to Lisbon last week")
        >>> chat.recall("where do I live?", k=3)[0].text
        'I moved to Lisbon last week'
        >>> prompt = chat.context("where do I live?", token_budget=2000)
    """

    def __init__(self, host: SessionHost, info: SessionInfo) -> None:
        self._host = host
        self._info = info
        self.session_id = info.session_id
        self.namespace = info.namespace
        self.read_only = host.read_only
        self._lock = threading.RLock()
        self._closed = False
        self._suspended = False
        self._turnlog: TurnStore | None = None
        self._stores = SessionIndex(host, info.folder, info.session_id)
        self._hv: HypervectorSelector | None = None
        self._story = Story(host)
        self._segments = Segmenter(host, self._story)
        self._last: LastRecall | None = None
        self.counts = {"followups_reused": 0, "recalls": 0}  # this process's
        self._open_log()

    # -- properties -----------------------------------------------------------------------
    @property
    def user(self) -> str | None:
        """The user this session belongs to (for cross-session recall), if any."""
        return self._info.user

    @property
    def folder(self) -> Path:
        """The session's folder (its log and its index)."""
        return self._info.folder

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (or the owning store closed)."""
        return self._closed

    def __len__(self) -> int:
        with self._lock:
            turnlog = self._log()
            return 0 if turnlog is None else len(turnlog)

    def __repr__(self) -> str:
        return f"Conversation({self.session_id!r}, namespace={self.namespace!r})"

    def update_info(self, info: SessionInfo) -> None:
        """Take a newer registration of this session (the owner gave it a user).

        Raises:
            InputError: If ``info`` registers another session.
        """
        if (info.namespace, info.session_id) != (self.namespace, self.session_id):
            raise InputError(f"{info!r} is not the registration of {self!r}")
        self._info = info

    # -- opening ----------------------------------------------------------------------------
    def _open_log(self) -> None:
        self._turnlog = self._host.open_turn_log(self._info)
        if self.read_only or self._turnlog is None:
            return
        self._segments.last_shift = self._turnlog.last_shift()
        if self._turnlog.has_unindexed():
            self._catch_up()

    def _log(self) -> TurnStore | None:
        if self._closed:
            raise PensiveError(f"conversation {self.session_id!r} is closed")
        if self._turnlog is None and (self._suspended or self.read_only):
            woke = self._suspended
            self._suspended = False
            self._open_log()  # suspended, or written by the writer since this reader looked
            if woke:
                self._host.mark_used(self)
        return self._turnlog

    def suspend(self) -> bool:
        """Release the session's files until it is next used (the owning store does this to
        the least recently used sessions past ``[memory] max_open_sessions``).

        Returns:
            False if another thread is using the session (it is left open).
        """
        if not self._lock.acquire(blocking=False):  # busy: never wait (no lock-order deadlock)
            return False
        try:
            if not self._closed and self._turnlog is not None:
                self._release()
                self._suspended = True
            return True
        finally:
            self._lock.release()

    @property
    def suspended(self) -> bool:
        """Whether the session's files are released until its next use."""
        return self._suspended

    def index(self) -> Pensive | None:
        """The session's index of turns: a store of its own in ``folder / "index"``, one
        document per turn (``doc_id`` the turn id), opened on first use.

        Returns:
            The store; None for a read-only session that has never been written.
        """
        with self._lock:
            self._log()
            return self._stores.turns()

    def windows(self) -> Pensive | None:
        """The session's index of trailing windows (``[memory] window_turns`` turns each, the
        speakers named; ``doc_id`` ``w`` and the last turn's position): a short turn is found
        by the exchange around it.

        Returns:
            The store; None when windows are off (``window_turns`` 0 or 1) or the session is
            read-only and has none.
        """
        with self._lock:
            turnlog = self._log()
            return None if turnlog is None else self._stores.windows(turnlog)

    def _catch_up(self) -> None:
        """Index turns the log holds but the index lacks (an interrupted add)."""
        turnlog = self._turnlog
        assert turnlog is not None
        turns = turnlog.unindexed()
        if not turns:
            return
        log.info(
            "session %r: indexing %d turns an interrupted add left", self.session_id, len(turns)
        )
        self._stores.ingest(turnlog, turns)
        turnlog.mark_indexed(turns)

    # -- adding -----------------------------------------------------------------------------
    def add(
        self,
        role: str,
        text: str,
        timestamp: datetime | str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Turn:
        """Remember one turn: it is logged, indexed, and checked for a topic shift.

        Args:
            role: Who spoke: "user", "assistant", "system", or a name.
            text: What was said.
            timestamp: When (any tz-aware datetime or ISO string; naive means UTC). Now if None.
            metadata: JSON-serialisable fields returned with the turn's hits. ``speaker`` (or
                ``name``) names the speaker for retrieval when ``role`` is generic.

        Returns:
            The stored turn (its segment and drift score included).

        Raises:
            InputError: On an empty role or text, a wrong type, text over 1,000,000
                characters, or metadata that is not a JSON-serialisable mapping or uses a
                reserved key (``role``, ``session_id``, ``seq``).
            PensiveError: If the store is open read-only or the conversation is closed.
        """
        return self.add_many([(role, text, timestamp, metadata)])[0]

    def add_many(self, turns: Iterable[Any]) -> list[Turn]:
        """Remember several turns at once (importing a transcript): one batched index update.

        Args:
            turns: ``(role, text)``, ``(role, text, timestamp)``, ``(role, text, timestamp,
                metadata)`` tuples or dicts with those keys, oldest first.

        Returns:
            The stored turns.

        Raises:
            InputError: As :meth:`add`, for any turn; then nothing is stored.
        """
        items = [check_turn(t) for t in turns]
        if not items:
            return []
        with self._lock:
            self._check_writable()
            turnlog = self._log()
            assert turnlog is not None
            stored = turnlog.append(items)  # logged first: an acknowledged turn is never lost
            segment = stored[0].segment
            self._stores.ingest(turnlog, stored)
            vectors = self._segments.vectors(stored)
            out: list[Turn] = []
            for t, vec in zip(stored, vectors, strict=True):
                t = self._segments.place(turnlog, t, vec, segment)
                segment = t.segment
                out.append(t)
            turnlog.settle(out)
            if self._hv is not None:
                self._hv.add([t.text for t in out], [t.id for t in out])
            self._story.summarise_aged(turnlog)
            return out

    def summaries(self) -> list[str]:
        """The story so far: one summary per block of older turns, oldest first, each headed
        by its turn range and dates."""
        with self._lock:
            turnlog = self._log()
            return [] if turnlog is None else self._story.summaries(turnlog)

    # -- pins ---------------------------------------------------------------------------------
    def pin(self, text: str) -> int:
        """Pin a note (an instruction, a fact about the user): every context() carries it.

        Returns:
            The pin's id, for :meth:`unpin`.
        """
        if not isinstance(text, str) or not text.strip():
            raise InputError("a pin must be a non-empty str")
        check_text(text, "a pin")
        with self._lock:
            self._check_writable()
            turnlog = self._log()
            assert turnlog is not None
            return turnlog.pin(text)

    def unpin(self, pin_id: int) -> bool:
        """Remove a pin; False if there was none with that id."""
        with self._lock:
            self._check_writable()
            turnlog = self._log()
            assert turnlog is not None
            return turnlog.unpin(pin_id)

    def pins(self) -> list[str]:
        """The pinned notes, oldest first."""
        with self._lock:
            turnlog = self._log()
            return [] if turnlog is None else turnlog.pins()

    # -- reading ------------------------------------------------------------------------------
    def history(self, limit: int | None = None) -> list[Hit]:
        """The turns in order (the last ``limit`` of them, if given), as hits with score 0."""
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 0
        ):
            raise InputError(f"limit must be a non-negative int or None, got {limit!r}")
        return [t.to_hit(self.session_id) for t in self.turns(limit)]

    def turns(self, limit: int | None = None) -> list[Turn]:
        """The stored turns in order (the last ``limit`` of them, if given)."""
        with self._lock:
            turnlog = self._log()
            return [] if turnlog is None else turnlog.turns(limit)

    def is_followup(self, query: str) -> bool:
        """Whether ``query`` is a short follow-up leaning on the previous exchange: a few words,
        a pronoun pointing back ("and her?", "why did she do that?"), and at most one word
        of its own content (a new subject means a new search)."""
        return is_followup_query(query, self._host.config.memory.followup_max_words)

    def _adapted(self) -> bool:
        """Whether a recent topic shift has retrieval adapted (less recency, wider scope)."""
        last_shift = self._segments.last_shift
        if last_shift is None:
            return False
        last = len(self) - 1
        return last - last_shift < self._host.config.memory.shift_turns

    def recall(
        self,
        query: str,
        k: int = 5,
        *,
        scope: Literal["session", "user"] | None = None,
        method: Method = "hybrid",
        as_of: datetime | None = None,
        reuse: bool | None = None,
    ) -> list[Hit]:
        """The turns that bear on ``query``, best first.

        Args:
            query: The question (or the user's new message).
            k: How many turns.
            scope: "session" (this session only) or "user" (all sessions of this session's
                user in its namespace). Default: "session", widened to ``[memory] shift_scope``
                just after a topic shift.
            method: "hybrid" (dense + BM25 + graph + time, the default), "hypervector" (the
                numpy-only selector: no model, sub-millisecond) or "recent" (the last k turns).
            as_of: Only turns at or before this time.
            reuse: Let a short pronoun-led follow-up reuse the last recall without a new search
                (default: ``[memory] followup_reuse``). Reused hits carry
                ``metadata["reused"] = True``.

        Returns:
            Hits whose ``doc_id`` is the turn id, ``metadata`` holds ``role``, ``session_id`` and
            ``seq``, and ``timestamp`` the turn's time.

        Raises:
            InputError: On an empty or over-long query, a bad ``k``, scope or method, or
                scope "user" for a session opened without a user.
        """
        query = validate_query(query)
        validate_k(k)
        if scope not in (None, "session", "user"):
            raise InputError(f"scope must be 'session' or 'user', got {scope!r}")
        if method not in ("hybrid", "hypervector", "recent"):
            raise InputError(f"method must be 'hybrid', 'hypervector' or 'recent', got {method!r}")
        cfg = self._host.config.memory
        with self._lock:
            self._log()
            self.counts["recalls"] += 1
            adapted = self._adapted()
            if scope is None:
                scope = cfg.shift_scope if adapted and self.user is not None else "session"
            if scope == "user" and self.user is None:
                raise InputError(
                    f"session {self.session_id!r} has no user; open it with "
                    "p.conversation(id, user=...) for cross-session recall"
                )
            use_reuse = cfg.followup_reuse if reuse is None else bool(reuse)
            last = self._last
            last_shift = self._segments.last_shift
            if (
                use_reuse
                and method == "hybrid"
                and last is not None
                and len(last.hits) >= min(k, 1)
                and not (last_shift is not None and last_shift > last.after_seq)
                and len(self) - 1 - last.after_seq <= 2
                and self.is_followup(query)
            ):
                self.counts["followups_reused"] += 1
                return [marked(h, reused=True) for h in last.hits[:k]]
            hits = self._search(query, k, method, as_of, adapted)
            if scope != "user":
                if method == "hybrid":
                    self._last = LastRecall(query, hits, len(self) - 1)
                return hits
        # the other sessions are asked without this one's lock held: two sessions recalling
        # each other from two threads would otherwise each wait for the other's lock
        hits = self._across_sessions(query, k, method, as_of, hits)
        if method == "hybrid":
            with self._lock:
                self._last = LastRecall(query, hits, len(self) - 1)
        return hits

    def _search(
        self, query: str, k: int, method: str, as_of: datetime | None, adapted: bool
    ) -> list[Hit]:
        cutoff = ensure_utc(as_of)
        turnlog = self._log()
        if method == "recent":
            if turnlog is None:
                return []
            turns = turnlog.turns(k) if cutoff is None else turnlog.turns_until(cutoff, k)
            return recent_hits(turns, self.session_id)
        if method == "hypervector":
            return hypervector_hits(self.hypervector(), turnlog, self.session_id, query, k, cutoff)
        if turnlog is None or len(turnlog) == 0:
            return []
        search = HybridSearch(turnlog, self._stores, self._host.config.memory, self.session_id)
        return search.run(query, k, cutoff, adapted)

    def _across_sessions(
        self, query: str, k: int, method: Method, as_of: datetime | None, own: list[Hit]
    ) -> list[Hit]:
        merged = list(own)
        for info in self._host.sessions(self.namespace, self.user):
            if info.session_id == self.session_id:
                continue
            other = self._host.session(info.session_id, self.namespace)
            merged.extend(
                other.recall(query, k, scope="session", method=method, as_of=as_of, reuse=False)
            )
        merged.sort(key=lambda h: -h.score)
        return merged[:k]

    def hypervector(self) -> HypervectorSelector:
        """The session's hypervector selector (built from the log on first use)."""
        with self._lock:
            if self._hv is None:
                from .hypervector import HypervectorSelector

                cfg = self._host.config.memory
                hv = HypervectorSelector(cfg.hv_dim, seed=cfg.hv_seed)
                turns = self.turns()
                if turns:
                    hv.add([t.text for t in turns], [t.id for t in turns])
                self._hv = hv
            return self._hv

    # -- prompts ------------------------------------------------------------------------------
    def build(
        self,
        query: str,
        token_budget: int = 2000,
        *,
        system: str = "",
        pins: Sequence[str] = (),
        k: int | None = None,
        documents_k: int | None = None,
        show_query: bool = True,
        strategy: Any = None,
        template: Any = None,
    ) -> BuiltPrompt:
        """A prompt for answering ``query``, within ``token_budget`` tokens.

        Sections, in order: ``system``; pinned notes (:meth:`pin` and ``pins``); the story so far
        (summaries of older turns) — these three form a prefix that stays byte-identical from
        turn to turn until a new block of turns is summarised, for provider prompt caching —
        then recalled older turns (each expanded outward to its neighbours when room allows),
        passages from the main store, the recent turns verbatim, and the question. Under
        pressure, the weakest recalled items are dropped first, then the largest clipped (marked
        ``[…]``), then older history compressed; pins are never dropped.

        Args:
            query: The user's message.
            token_budget: The whole prompt's budget in tokens (``[memory] tokenizer``); a share
                (``[memory] headroom``) is left unused for the answer.
            system: A system prompt, always included.
            pins: More pinned notes for this prompt only.
            k: Older turns to recall (default ``[memory] recall_k``).
            documents_k: Main-store passages to include (default ``[memory] documents_k``, or
                ``shift_documents_k`` just after a topic shift).
            show_query: End with the question section; False when the caller's prompt already
                carries the user's message (a framework's memory block), so it is not repeated.
                The query still decides what is recalled and where passages are clipped.
            strategy: How recalled items are shown (``"concatenate"``, ``"weighted"``,
                ``"recency"``, ``"template"``, a line template or a ``PromptStrategy``;
                default ``[memory] prompt_strategy``).
            template: The prompt's layout (``"qa"``, ``"research"``, ``"conversational"``,
                template text with ``{query}``, a file path or a ``PromptTemplate``; default
                ``[memory] prompt_template``).

        Returns:
            The built prompt: ``text``, ``prefix``, ``tokens`` and what was dropped or clipped.

        Raises:
            InputError: On a bad query, budget, strategy or template (nothing is changed), or
                pins that alone exceed the budget.
        """
        from .documents import document_items
        from .session_prompt import neighbour_seqs, recalled_items, session_prompt
        from .strategies import resolve_strategy
        from .templates import resolve_template
        from .tokens import token_counter

        cfg = self._host.config.memory
        if isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget < 1:
            raise InputError(f"token_budget must be a positive int, got {token_budget!r}")
        # checked before recall: recall counts follow-ups and may reuse state
        strategy = None if strategy is None else resolve_strategy(strategy)
        template = None if template is None else resolve_template(template)
        with self._lock:
            recent = self.turns(cfg.recent_turns) if cfg.recent_turns else []
            recent_ids = {t.id for t in recent}
            hits = self.recall(query, k or cfg.recall_k) if len(self) else []
            hits = [h for h in hits if h.doc_id not in recent_ids]
            turnlog = self._log()
            seqs = neighbour_seqs(hits, self.session_id)
            neighbours = {} if turnlog is None else turnlog.by_seq(seqs)
            retrieved = recalled_items(hits, neighbours, self.session_id, len(self) - 1)
            n_docs = documents_k
            if n_docs is None:
                n_docs = cfg.shift_documents_k if self._adapted() else cfg.documents_k
            if n_docs > 0 and self._host.documents():
                retrieved += document_items(
                    self._host,
                    query,
                    n_docs,
                    counter=token_counter(cfg.tokenizer),
                    whole_tokens=cfg.document_whole_tokens,
                    window=cfg.document_window,
                )
            return session_prompt(
                cfg,
                token_budget,
                query=query,
                system=system,
                pins=[*self.pins(), *pins],
                summaries=self.summaries(),
                retrieved=retrieved,
                recent=recent,
                session_id=self.session_id,
                show_query=show_query,
                strategy=strategy,
                template=template,
            )

    def context(self, query: str, token_budget: int = 2000, **options: Any) -> str:
        """The prompt-ready text of :meth:`build` (same arguments)."""
        return self.build(query, token_budget, **options).text

    # -- lifecycle ----------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Turns, segments, summaries, shifts, follow-ups reused and recalls made."""
        with self._lock:
            turnlog = self._log()
            turns, segments, shifts, summaries = (
                (0, 0, 0, 0) if turnlog is None else turnlog.counts()
            )
            return {
                "session_id": self.session_id,
                "namespace": self.namespace,
                "user": self.user,
                "turns": turns,
                "segments": segments,
                "summaries": summaries,
                "shifts": shifts,
                **self.counts,
            }

    def clear(self) -> int:
        """Forget the whole session: its log, index and summaries are deleted from disk.

        Returns:
            How many turns were forgotten. The conversation stays usable (empty).
        """
        with self._lock:
            self._check_writable()
            n = len(self)
            self._release()
            self._host.drop_session(self._info)
            self._hv = None
            self._segments.forget()
            self._last = None
            self._story.forget()
            self._open_log()
            return n

    def _release(self) -> None:
        self._stores.close()
        if self._turnlog is not None:
            self._turnlog.close()
            self._turnlog = None

    def close(self) -> None:
        """Release the session's files (the owning store does this when it closes)."""
        with self._lock:
            if not self._closed:
                self._release()
                self._closed = True

    def _check_writable(self) -> None:
        if self._closed:
            raise PensiveError(f"conversation {self.session_id!r} is closed")
        if self.read_only:
            raise PensiveError(
                f"conversation {self.session_id!r} is read-only (its store was opened with "
                "read_only=True)"
            )
        self._host.check_writable()
