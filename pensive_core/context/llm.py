"""Situating contexts written by an LLM ("contextual retrieval"), cached and with a fallback.

For each passage the model sees the whole document (or, for a document longer than
``document_chars``, a summary of it written once per document) and the passage, and answers
with one or two sentences that situate the passage for search. Any LlamaIndex LLM, LangChain
chat model or LLM, or plain ``str -> str`` callable will do (:func:`as_completion`); neither
framework is imported here.

Every context is cached by ``(document hash, passage hash, generator name)``, so a passage is
sent to the model once per model and prompt version. A passage the model fails on (an error or
an empty answer) gets the fallback generator's context instead: such passages are counted,
logged once per call and not cached, so the next ingest asks the model again.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import Any

from ..chunking import content_hash
from ..errors import ConfigError, InputError
from .base import ContextGenerator, ContextRequest
from .cache import SUMMARY_KEY, ContextStore
from .heuristic import HeuristicContextGenerator

__all__ = [
    "CONTEXT_PROMPT",
    "LLMContextGenerator",
    "PROMPT_VERSION",
    "SUMMARY_PROMPT",
    "as_completion",
    "model_id",
]

logger = logging.getLogger(__name__)

SUMMARY_PROMPT = """\
Here is a document:
<document>
{document}
</document>

Summarise this document in at most 150 words for a reader who will see only one passage of it: \
what kind of document it is, its subject, how it is organised, and the main people, \
organisations, places and dates it names. Answer only with the summary."""

CONTEXT_PROMPT = """\
Here is {source}:
<{tag}>
{document}
</{tag}>

Here is a passage from the document:
<passage>
{chunk}
</passage>

Write one or two sentences that situate this passage within the document, to help a search \
engine find the passage: say what the document is about and where the passage fits in it, and \
name the people, things, places and dates the passage refers to without naming them. Answer \
only with those sentences."""

# What CONTEXT_PROMPT shows: the whole document, or the summary of a long one.
_WHOLE = {"source": "the document", "tag": "document"}
_SUMMARY = {
    "source": "a summary of the document (the document is too long to show in full)",
    "tag": "document_summary",
}

PROMPT_VERSION = hashlib.blake2b(
    "\0".join([SUMMARY_PROMPT, CONTEXT_PROMPT, *_WHOLE.values(), *_SUMMARY.values()]).encode(),
    digest_size=4,
).hexdigest()
"""A short hash of the prompts: part of the generator's name, so editing a prompt changes the
cache key and a store notices that its contexts were written by another prompt."""

_DOCUMENT_CHARS = 24_000
_MAX_CHARS = 600

_ACCEPTED = (
    "a LlamaIndex LLM (llama_index.core.llms.LLM), a LangChain chat model or LLM (anything with "
    ".invoke), or a callable that takes a prompt str and returns the answer str"
)

# "Context:", "**Situating context:**", "Here is the context:", "Summary:" ...
_LABEL_RE = re.compile(
    r"^[*_#>\s]*(?:here\s+is\s+(?:the|a)\s+)?(?:(?:situating|succinct|short|brief)\s+)?"
    r"(?:context|summary)[*_]*\s*:[*_]*\s*",
    re.IGNORECASE,
)
_SPACE_RE = re.compile(r"\s+")
_SENTENCE_END_RE = re.compile(r"[.!?][\"'\u201d\u2019)\]]*(?=\s)")
_QUOTES = {'"': '"', "'": "'", "\u201c": "\u201d", "`": "`"}


def _framework(llm: Any) -> str | None:
    """``"llamaindex"``, ``"langchain"``, ``"callable"`` or None (not usable)."""
    if isinstance(llm, type):
        return None  # a class is callable, but calling it with a prompt makes no answer
    modules = [getattr(cls, "__module__", "") or "" for cls in type(llm).__mro__]
    # Checked first: the module name is what tells a LlamaIndex LLM from any other object
    # that happens to have a ``complete`` method.
    if any(m == "llama_index" or m.startswith("llama_index.") for m in modules) and callable(
        getattr(llm, "complete", None)
    ):
        return "llamaindex"
    # Every LangChain runnable has ``invoke``; chat models and LLMs are the ones meant here.
    if callable(getattr(llm, "invoke", None)):
        return "langchain"
    if callable(llm):
        return "callable"
    return None


def _type_name(obj: Any) -> str:
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _message_text(result: Any) -> str:
    """The text of a LangChain answer: a str (an LLM) or a message (a chat model)."""
    if isinstance(result, str):
        return result
    content = getattr(result, "content", None)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        # Content blocks: plain strings and {"type": "text", "text": ...}; reasoning, tool-call
        # and image blocks are not part of the answer.
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type", "text") == "text":
                text = block.get("text")
                if isinstance(text, str):
                    parts.append(text)
        return "".join(parts)
    raise TypeError(
        f"the LangChain model returned {_type_name(result)}; expected a str or a message "
        "whose content is a str or a list of content blocks"
    )


def as_completion(llm: Any) -> Callable[[str], str]:
    """A ``prompt -> answer`` function over any supported model.

    Args:
        llm: A LlamaIndex LLM (its ``complete(prompt).text`` is the answer), a LangChain chat
            model (its ``invoke(prompt)`` message's text content) or LLM (its ``invoke(prompt)``
            str), or a plain callable ``str -> str``.

    Returns:
        A function that sends one prompt and returns the answer text. It raises whatever the
        model raises, and ``TypeError`` when the model answers with something that is not text.

    Raises:
        InputError: ``llm`` is none of the above.
    """
    kind = _framework(llm)
    if kind == "llamaindex":

        def complete_llamaindex(prompt: str) -> str:
            text = llm.complete(prompt).text
            if not isinstance(text, str):
                raise TypeError(f"the LlamaIndex LLM's answer text is {type(text).__name__}")
            return text

        return complete_llamaindex
    if kind == "langchain":

        def complete_langchain(prompt: str) -> str:
            return _message_text(llm.invoke(prompt))

        return complete_langchain
    if kind == "callable":

        def complete_callable(prompt: str) -> str:
            text = llm(prompt)
            if not isinstance(text, str):
                raise TypeError(f"the LLM callable returned {type(text).__name__}, not str")
            return text

        return complete_callable
    what = f"the class {_type_name(llm)} (pass an instance)" if isinstance(llm, type) else None
    raise InputError(f"llm must be {_ACCEPTED}; got {what or _type_name(llm)}")


def _usable_id(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip()) and value.strip() != "unknown"


def model_id(llm: Any) -> str:
    """A stable identifier of the model behind ``llm``, for cache keys.

    Args:
        llm: Anything :func:`as_completion` accepts.

    Returns:
        A LlamaIndex LLM's ``metadata.model_name``; a LangChain model's ``model_name`` or
        ``model``; else the module-qualified name of its class. For a plain callable, its
        ``__module__.__qualname__`` (every lambda of one function shares it: give such a
        model an explicit ``generator_id``).
    """
    kind = _framework(llm)
    if kind == "llamaindex":
        try:
            name = llm.metadata.model_name
        except Exception:  # metadata is a property that some integrations compute
            name = None
        if _usable_id(name):  # "unknown" is LlamaIndex's default, not an identifier
            return str(name).strip()
    elif kind == "langchain":
        for attr in ("model_name", "model"):
            name = getattr(llm, attr, None)
            if _usable_id(name):
                return str(name).strip()
    elif kind == "callable":
        qualname = getattr(llm, "__qualname__", None)
        module = getattr(llm, "__module__", None)
        if isinstance(qualname, str) and isinstance(module, str):
            return f"{module}.{qualname}"
    return _type_name(llm)


def _clean(text: str, limit: int) -> str:
    """One line, without a "Context:" label or wrapping quotes, at most ``limit`` characters."""
    text = _SPACE_RE.sub(" ", text).strip()
    text = _LABEL_RE.sub("", text, count=1).strip()
    if len(text) >= 2 and _QUOTES.get(text[0]) == text[-1]:
        text = text[1:-1].strip()
    return _clip(text, limit)


def _clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters at the last sentence end, else the last word end,
    in the window; a sentence end is preferred unless it would drop more than half."""
    if len(text) <= limit:
        return text
    window = text[: limit + 1]  # a sentence or word that ends exactly at ``limit`` still fits
    ends = [m.end() for m in _SENTENCE_END_RE.finditer(window) if m.end() <= limit]
    if ends and ends[-1] >= limit // 2:
        return text[: ends[-1]]
    space = window.rfind(" ")
    if space > 0:
        return text[:space].rstrip(" ,;:-\u2013\u2014")
    return text[:limit]


class _EmptyAnswerError(RuntimeError):
    """The model answered with nothing usable."""


class LLMContextGenerator:
    """Situating contexts from an LLM, with a cache and a fallback (see the module docstring).

    Args:
        llm: A LlamaIndex LLM, a LangChain chat model or LLM, or a callable ``str -> str``.
            It is called from ``concurrency`` threads at once.
        cache: Where contexts are kept; None for none. The store attaches its own with
            :meth:`use_cache` when none is given.
        concurrency: How many model calls run at once.
        document_chars: A document longer than this is summarised once, and its passages'
            prompts show the summary instead of the document.
        max_chars: The longest context kept; a longer answer is cut at a sentence or word end.
        fallback: Writes the contexts of the passages the model fails on; default
            :class:`~pensive_core.context.heuristic.HeuristicContextGenerator` with its defaults.
        generator_id: The generator's name (the cache key part) instead of the one made from
            the model id and the prompt version. Change it whenever the output would change.

    Attributes:
        name: ``"llm:{model id}:{PROMPT_VERSION}"`` (settings that change the output, when not
            the defaults, are appended), or ``generator_id``.
        counts: Cumulative figures: ``llm_calls`` (calls made, failed ones included),
            ``summaries`` (document summaries written by the model), ``cached`` (passages whose
            context came from the cache), ``generated`` (by the model) and ``fallback`` (by the
            fallback, after the model failed).

    Raises:
        InputError: ``llm`` is not a supported model.
        ConfigError: A setting is out of range.
    """

    def __init__(
        self,
        llm: Any,
        *,
        cache: ContextStore | None = None,
        concurrency: int = 4,
        document_chars: int = _DOCUMENT_CHARS,
        max_chars: int = _MAX_CHARS,
        fallback: ContextGenerator | None = None,
        generator_id: str | None = None,
    ) -> None:
        for arg, value, low in (
            ("concurrency", concurrency, 1),
            ("document_chars", document_chars, 1),
            ("max_chars", max_chars, 20),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(
                    f"LLMContextGenerator: {arg} must be an int >= {low}, got {value!r}"
                )
        if generator_id is not None and (not isinstance(generator_id, str) or not generator_id):
            raise ConfigError(
                f"LLMContextGenerator: generator_id must be a non-empty str, got {generator_id!r}"
            )
        self.llm = llm
        self._complete = as_completion(llm)
        self.cache = cache
        self.concurrency = concurrency
        self.document_chars = document_chars
        self.max_chars = max_chars
        self.fallback: ContextGenerator = (
            HeuristicContextGenerator() if fallback is None else fallback
        )
        if generator_id is None:
            generator_id = f"llm:{model_id(llm)}:{PROMPT_VERSION}"
            # Both settings change what is cached under the name, so they are part of it; the
            # defaults are left out to keep the common name short.
            if document_chars != _DOCUMENT_CHARS:
                generator_id += f":doc{document_chars}"
            if max_chars != _MAX_CHARS:
                generator_id += f":max{max_chars}"
        self.name = generator_id
        self.counts: dict[str, int] = {
            "llm_calls": 0,
            "summaries": 0,
            "cached": 0,
            "generated": 0,
            "fallback": 0,
        }

    def use_cache(self, cache: ContextStore) -> None:
        """Keep contexts in ``cache`` from now on (the store's, when none was given)."""
        self.cache = cache

    def generate(self, requests: Sequence[ContextRequest]) -> list[list[str]]:
        """Contexts for each request's passages, in order.

        All passages of all requests are sent together, ``concurrency`` at a time, after the
        summaries of the long documents among them; the cache is read before and written after,
        in the calling thread.

        Args:
            requests: Documents and their passages.

        Returns:
            One list per request, as long as its ``chunks``.
        """
        requests = list(requests)
        out: list[list[str]] = [[""] * len(r.chunks) for r in requests]
        doc_hashes = [r.doc_hash or content_hash(r.document.text) for r in requests]

        # One model call per distinct (document, passage): a document ingested under two ids,
        # or a passage repeated in its document, is asked about once.
        where: dict[tuple[str, str], list[tuple[int, int]]] = {}
        chunk_text: dict[tuple[str, str], str] = {}
        doc_text: dict[str, str] = {}
        for ri, (request, doc_hash) in enumerate(zip(requests, doc_hashes)):
            doc_text.setdefault(doc_hash, request.document.text)
            for ci, chunk in enumerate(request.chunks):
                key = (doc_hash, chunk.hash)
                where.setdefault(key, []).append((ri, ci))
                chunk_text.setdefault(key, chunk.text)
        if not where:
            return out

        long_docs = {d for d, text in doc_text.items() if len(text) > self.document_chars}
        cached: dict[tuple[str, str, str], str] = {}
        if self.cache is not None:
            wanted = [(d, c, self.name) for d, c in where]
            wanted += [(d, SUMMARY_KEY, self.name) for d in long_docs]
            cached = self.cache.get_many(wanted)

        pending: dict[str, list[tuple[str, str]]] = {}
        for key in where:
            context = cached.get((*key, self.name))
            if context is None:
                pending.setdefault(key[0], []).append(key)
            else:
                for ri, ci in where[key]:
                    out[ri][ci] = context
                self.counts["cached"] += len(where[key])
        summaries = {
            d: cached[(d, SUMMARY_KEY, self.name)]
            for d in long_docs
            if (d, SUMMARY_KEY, self.name) in cached
        }

        generated, new_summaries, errors = self._run(pending, doc_text, chunk_text, summaries)

        rows = [(d, SUMMARY_KEY, self.name, s) for d, s in new_summaries.items()]
        for key, context in generated.items():
            rows.append((*key, self.name, context))
            for ri, ci in where[key]:
                out[ri][ci] = context
            self.counts["generated"] += len(where[key])
        # Cached before the fallback runs, so that a failing fallback loses no model answers.
        if self.cache is not None and rows:
            self.cache.put_many(rows)

        if errors:
            self._fall_back(requests, doc_hashes, where, errors, out)
        return out

    def _run(
        self,
        pending: dict[str, list[tuple[str, str]]],
        doc_text: dict[str, str],
        chunk_text: dict[tuple[str, str], str],
        summaries: dict[str, str],
    ) -> tuple[dict[tuple[str, str], str], dict[str, str], dict[tuple[str, str], Exception]]:
        """The model calls: summaries of long documents first, then each pending passage.

        Returns:
            Contexts by passage key, the summaries written now by document hash, and the error
            of every passage the model failed on (a failed summary fails all its passages).
        """
        generated: dict[tuple[str, str], str] = {}
        new_summaries: dict[str, str] = {}
        errors: dict[tuple[str, str], Exception] = {}
        if not pending:
            return generated, new_summaries, errors

        chunk_futures: dict[Future[str], tuple[str, str]] = {}
        pool = ThreadPoolExecutor(
            max_workers=self.concurrency, thread_name_prefix="pensive-context"
        )
        try:

            def submit_chunks(doc_hash: str, summary: str | None) -> None:
                for key in pending[doc_hash]:
                    future = pool.submit(
                        self._context, doc_text[doc_hash], chunk_text[key], summary
                    )
                    chunk_futures[future] = key
                    self.counts["llm_calls"] += 1

            summary_futures: dict[Future[str], str] = {}
            for doc_hash in pending:
                if len(doc_text[doc_hash]) > self.document_chars and doc_hash not in summaries:
                    summary_futures[pool.submit(self._summary, doc_text[doc_hash])] = doc_hash
                    self.counts["llm_calls"] += 1
            for doc_hash in pending:
                if len(doc_text[doc_hash]) <= self.document_chars:
                    submit_chunks(doc_hash, None)
                elif doc_hash in summaries:
                    submit_chunks(doc_hash, summaries[doc_hash])
            for future in as_completed(summary_futures):
                doc_hash = summary_futures[future]
                try:
                    summary = future.result()
                except Exception as exc:
                    for key in pending[doc_hash]:
                        errors[key] = exc
                    continue
                new_summaries[doc_hash] = summary
                self.counts["summaries"] += 1
                submit_chunks(doc_hash, summary)
            for future in as_completed(chunk_futures):
                key = chunk_futures[future]
                try:
                    generated[key] = future.result()
                except Exception as exc:
                    errors[key] = exc
        except BaseException:
            # Interrupted (Ctrl-C) or a bug: do not leave queued model calls running.
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        return generated, new_summaries, errors

    def _summary(self, document: str) -> str:
        summary = _clean(
            self._complete(SUMMARY_PROMPT.format(document=document)), self.document_chars
        )
        if not summary:
            raise _EmptyAnswerError("the model's summary of the document was empty")
        return summary

    def _context(self, document: str, chunk: str, summary: str | None) -> str:
        fields = _WHOLE if summary is None else _SUMMARY
        prompt = CONTEXT_PROMPT.format(
            document=document if summary is None else summary, chunk=chunk, **fields
        )
        context = _clean(self._complete(prompt), self.max_chars)
        if not context:
            raise _EmptyAnswerError("the model's context for the passage was empty")
        return context

    def _fall_back(
        self,
        requests: list[ContextRequest],
        doc_hashes: list[str],
        where: dict[tuple[str, str], list[tuple[int, int]]],
        errors: dict[tuple[str, str], Exception],
        out: list[list[str]],
    ) -> None:
        """Fill the failed passages from the fallback generator, and say how many there were."""
        failed: dict[int, list[int]] = {}
        for key in errors:
            for ri, ci in where[key]:
                failed.setdefault(ri, []).append(ci)
        order = sorted(failed)
        # The fallback sees each affected document with all of its passages, as it would on its
        # own (a heuristic may read the neighbours), and only the failed ones are taken.
        contexts = self.fallback.generate(
            [
                ContextRequest(requests[ri].document, requests[ri].chunks, doc_hashes[ri])
                for ri in order
            ]
        )
        n_failed = 0
        for ri, request_contexts in zip(order, contexts):
            for ci in failed[ri]:
                out[ri][ci] = request_contexts[ci]
                n_failed += 1
        self.counts["fallback"] += n_failed
        first_ri = order[0]
        first_ci = min(failed[first_ri])
        first_key = (doc_hashes[first_ri], requests[first_ri].chunks[first_ci].hash)
        first = errors[first_key]
        logger.warning(
            "%s: the model failed on %d of %d passages, which got %s contexts instead (not "
            "cached, so the next ingest asks again); first error, on %s: %s: %s",
            self.name,
            n_failed,
            sum(len(positions) for positions in where.values()),
            getattr(self.fallback, "name", type(self.fallback).__name__),
            requests[first_ri].chunks[first_ci].id,
            type(first).__name__,
            first,
        )
