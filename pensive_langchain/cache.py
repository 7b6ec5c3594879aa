"""LangChain LLM cache with Pensive's near-miss-safe keys (see :mod:`pensive_core.llm_cache`)."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

from langchain_core._api import LangChainBetaWarning
from langchain_core.caches import RETURN_VAL_TYPE, BaseCache
from langchain_core.load import dumpd, loads

from pensive_core.errors import InputError
from pensive_core.llm_cache import LLMCache

__all__ = ["PensiveCache"]

FILENAME = "llm_cache.sqlite"


def _prompt_parts(prompt: str) -> str | list[tuple[str, str]]:
    """A chat model's prompt (LangChain's JSON of messages) as ``(exact, text)`` parts.

    Only each message's text content is normalised; its type and every other field are matched
    exactly. Any other prompt is one text.
    """
    if not prompt.startswith("[{"):
        return prompt
    try:
        messages = json.loads(prompt)
    except ValueError:
        return prompt
    parts: list[tuple[str, str]] = []
    for m in messages:
        kwargs = m.get("kwargs") if isinstance(m, dict) and m.get("lc") else None
        if not isinstance(kwargs, dict) or "content" not in kwargs:
            return prompt  # not a list of serialised messages
        content = kwargs["content"]
        text = content if isinstance(content, str) else ""
        rest = {k: v for k, v in kwargs.items() if k != "content" or not isinstance(v, str)}
        parts.append((json.dumps([m.get("id"), rest], sort_keys=True, ensure_ascii=False), text))
    return parts


class PensiveCache(BaseCache):
    """LLM and chat model responses cached in SQLite, keyed like Pensive's L1 query cache.

    A prompt that differs only in case, whitespace or punctuation is served from the cache; one
    whose numbers, dates, identifiers, names or negations differ ("Q3 2024" and "Q4 2024") never
    is. For chat models only the messages' text is normalised: roles and every other field must
    match. The model and its parameters (``llm_string``) must match exactly. Generations are
    stored as LangChain's JSON serialisation, never pickled.

    Args:
        pensive: A Pensive store; the cache lives in its folder (``llm_cache.sqlite``).
        path: Or a SQLite file (or a folder to put ``llm_cache.sqlite`` in).

    Raises:
        InputError: If neither ``pensive`` nor ``path`` is given.

    Example:
        >>> from langchain_core.globals import set_llm_cache
        >>> set_llm_cache(PensiveCache(store))  # doctest: +SKIP
    """

    def __init__(self, pensive: Any = None, *, path: str | os.PathLike[str] | None = None) -> None:
        if path is None:
            if pensive is None or getattr(pensive, "path", None) is None:
                raise InputError(
                    "PensiveCache needs pensive (a Pensive store) or path (a SQLite file), "
                    f"got pensive={pensive!r}, path=None"
                )
            storage = getattr(getattr(pensive, "components", None), "storage", None)
            if storage is not None and getattr(storage, "shared", False):
                # a store several replicas share keeps the cache where they all see it
                self._cache = LLMCache(records=storage.open_llm_cache_records())
                return
            file = Path(pensive.path) / FILENAME
        else:
            file = Path(path).expanduser()
            if file.is_dir():
                file = file / FILENAME
        self._cache = LLMCache(file)

    @property
    def path(self) -> Path | None:
        """The SQLite file (None when the store's engine keeps the cache, as Postgres does)."""
        return self._cache.path

    def lookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        """The cached generations for this prompt (or a variant of it) and model, or None."""
        value = self._cache.get(_prompt_parts(prompt), llm_string)
        if value is None:
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LangChainBetaWarning)
            return [loads(json.dumps(g), allowed_objects="core") for g in value]

    def update(self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE) -> None:
        """Store the generations for this prompt and model."""
        self._cache.put(_prompt_parts(prompt), llm_string, [dumpd(g) for g in return_val])

    def clear(self, **kwargs: Any) -> None:
        """Forget every cached response (only one model's with ``llm_string=...``)."""
        self._cache.clear(kwargs.get("llm_string"))

    def close(self) -> None:
        """Close the SQLite file."""
        self._cache.close()

    def stats(self) -> dict[str, Any]:
        """Entries, hits and misses."""
        return self._cache.stats()

    def __len__(self) -> int:
        return len(self._cache)

    def __repr__(self) -> str:
        return f"PensiveCache(path={str(self.path)!r})"
