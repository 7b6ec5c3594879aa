"""The situate stage: a short context for each passage, embedded and BM25-indexed with it.

``[context] generator`` chooses the generator for prose and ``records`` the one for documents
that are rows of fields: ``heuristic`` (from the document itself, no model), ``llm`` (from the
LLM given to the store, cached in the store), ``auto`` (llm when an LLM is given), ``none``, or
``"module.path:Class"``. A generator passed to the store takes the place of ``auto`` and
``llm``. Contexts are clipped, at a word, so that a passage and its context fit the embedder's
window: the passage is never what gets cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..context.base import ContextGenerator, ContextRequest
from ..context.llm import LLMContextGenerator
from ..embedders.base import Embedder
from ..errors import ConfigError, InputError, PensiveError
from ..plugins import build, is_class_path
from ..types import Chunk, Document
from .changes import IngestCounts

if TYPE_CHECKING:
    from ..components import Components

__all__ = ["Situate", "choose_generators"]

#: One document to situate: ``(document, content hash, passages, its generator)``.
Todo = tuple[Document, str, list[Chunk], ContextGenerator | None]


def choose_generators(
    comps: Components, llm: Any, given: ContextGenerator | None
) -> dict[str, ContextGenerator | None]:
    """The context generators for prose and for records documents, as ``[context]`` says.

    Raises:
        InputError: If ``given`` is not a context generator.
        ConfigError: If ``llm`` is asked for and no LLM was given, or a ``module:Class``
            does not implement the protocol.
    """
    from ..context.heuristic import HeuristicContextGenerator

    cfg = comps.config.context
    if given is not None and not isinstance(given, ContextGenerator):
        raise InputError(
            f"context_generator must have a name and a generate(requests) method, got "
            f"{type(given).__name__}"
        )
    made: dict[str, ContextGenerator] = {}

    def cache() -> Any:  # its table is made only when an LLM is in use
        return None if comps.read_only else comps.storage.open_context_cache()

    def make(choice: str) -> ContextGenerator | None:
        if choice == "none":
            return None
        if choice == "heuristic" or (choice == "auto" and llm is None and given is None):
            return made.setdefault("heuristic", HeuristicContextGenerator())
        if is_class_path(choice):
            return made.setdefault(choice, build("context", choice))
        if given is not None:
            if (
                isinstance(given, LLMContextGenerator)
                and given.cache is None
                and not comps.read_only
            ):
                given.use_cache(cache())
            return given
        if llm is None:
            raise ConfigError(
                "[context] asks for the 'llm' context generator but no LLM was given; "
                "pass Pensive(path, llm=...) (a LlamaIndex LLM, a LangChain chat model or a "
                'callable str -> str), or set generator = "heuristic"'
            )
        if "llm" not in made:
            made["llm"] = LLMContextGenerator(
                llm,
                cache=cache(),
                concurrency=cfg.concurrency,
                document_chars=cfg.document_chars,
            )
        return made["llm"]

    prose = make(cfg.generator)
    records = prose if cfg.records == "same" else make(cfg.records)
    return {"prose": prose, "records": records}


class Situate:
    """Writes (or reads from the generator's cache) the contexts of a batch's passages."""

    def __init__(self, comps: Components) -> None:
        self._comps = comps

    def generator_for(self, doc: Document) -> ContextGenerator | None:
        """The generator that situates ``doc`` (records documents may have their own)."""
        prose, records = self._comps.contexts["prose"], self._comps.contexts["records"]
        if prose is records:
            return prose
        from ..context.heuristic import is_records

        return records if is_records(doc) else prose

    def run(
        self,
        todo: Sequence[Todo],
        embedder: Embedder,
        counts: IngestCounts,
        known: dict[tuple[str, str, str], dict[str, str]] | None = None,
    ) -> tuple[dict[str, str], dict[str, str]]:
        """Situating contexts of the passages of these documents, fitted to the window.

        Args:
            known: Contexts already generated for a document, by ``(document id, content
                hash, generator name)`` (an ingest's work done ahead of its change lock):
                those documents are not situated again.

        Returns:
            ``(context by passage id, generator name by document id)``.

        Raises:
            PensiveError: If a generator returns the wrong number of contexts.
        """
        contexts: dict[str, str] = {}
        gen_of: dict[str, str] = {}
        groups: dict[int, tuple[ContextGenerator, list[ContextRequest]]] = {}
        for doc, doc_hash, chunks, gen in todo:
            if gen is None or not chunks:
                continue
            gen_of[doc.id] = gen.name
            ready = (known or {}).get((doc.id, doc_hash, gen.name))
            if ready is not None:
                contexts.update(ready)
                continue
            groups.setdefault(id(gen), (gen, []))[1].append(ContextRequest(doc, chunks, doc_hash))
        for gen, requests in groups.values():
            # the LLM generator counts its calls, cache hits and fallbacks for the report
            counted = isinstance(gen, LLMContextGenerator)
            before = dict(gen.counts) if isinstance(gen, LLMContextGenerator) else {}
            made = gen.generate(requests)
            if len(made) != len(requests) or any(
                len(m) != len(r.chunks) for m, r in zip(made, requests)
            ):
                raise PensiveError(
                    f"context generator {gen.name!r} returned the wrong number of contexts"
                )
            if counted:
                assert isinstance(gen, LLMContextGenerator)
                after = gen.counts
                counts.contexts_cached += int(after.get("cached", 0)) - int(before.get("cached", 0))
                counts.contexts_fallback += int(after.get("fallback", 0)) - int(
                    before.get("fallback", 0)
                )
                counts.llm_calls += int(after.get("llm_calls", 0)) - int(before.get("llm_calls", 0))
            for request, texts in zip(requests, made):
                for chunk, text in zip(request.chunks, texts):
                    contexts[chunk.id] = text
        fitted = self.fit(contexts, todo, embedder)
        counts.contexts += sum(1 for t in fitted.values() if t)
        return fitted, gen_of

    def fit(
        self, contexts: dict[str, str], todo: Sequence[Todo], embedder: Embedder
    ) -> dict[str, str]:
        """Clip each context, at a word, so that it and its passage fit the embedder's window
        (and ``[context] max_tokens``): the passage is never what gets truncated."""
        cap = self._comps.config.context.max_tokens
        room = {c.id: min(cap, embedder.max_tokens - c.tokens) for _, _, cs, _ in todo for c in cs}
        ids = [i for i, t in contexts.items() if t.strip()]
        out = {i: " ".join(contexts[i].split()) for i in ids}
        for _ in range(4):  # a few rounds of proportional cuts converge
            if not ids:
                break
            sizes = embedder.count_tokens([out[i] for i in ids])
            over = []
            for i, n in zip(ids, sizes):
                budget = max(0, room.get(i, cap))
                if n <= budget:
                    continue
                words = out[i].split()
                keep = min(len(words) - 1, int(len(words) * budget / max(n, 1)))
                out[i] = " ".join(words[: max(0, keep)])
                if out[i]:
                    over.append(i)
            ids = over
        return {i: t for i, t in out.items() if t}
