"""Query embedding through onnxruntime: the same model, exported once, without torch's
per-call overhead.

A question is a dozen word pieces; for so little work PyTorch's eager dispatch is most of the
time. The model's transformer is exported to ONNX (once per model and library versions, cached
on disk) and run by onnxruntime with one thread; mean pooling and normalisation follow in numpy.
Before it is used, the exported model must give the same vectors as the PyTorch model on probe
sentences (cosine >= 0.9999), so queries always match the passages PyTorch embedded; otherwise
the embedder keeps PyTorch and logs why.

An export that passed is marked verified (a ``.ok`` file beside it, for these model files and
these torch and onnxruntime versions, holding the export's SHA-256: an export changed since,
even to a file that still loads, is not trusted). A later process then answers its first question from
the cache (:meth:`OnnxQueryEncoder.cached`) without importing torch or transformers or loading
the PyTorch model: tokenized by the model's ``tokenizer.json`` through ``tokenizers``, whose
ids were checked equal to the model's own tokenizer's at verification.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

__all__ = ["OnnxQueryEncoder", "cache_dir", "fast_tokenizer"]

_PROBES = (
    "How much do I pay now for a month of trams?",
    "Invoice INV-4471-KQ was paid in full by bank transfer on 3 March 2024.",
    "ok",
    "Naïve café in Malmö, 東京 and São Paulo — 😀 CAPITALS, tabs\tand\u200bzero widths",
    "word " * 300,  # past the window: truncated alike
)


def cache_dir() -> Path:
    """Where exported models are kept: ``$PENSIVE_CACHE_DIR`` or ``~/.cache/pensive``."""
    base = os.environ.get("PENSIVE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "pensive",
    )
    return Path(base) / "onnx"


def _supported(st_model: Any) -> str | None:
    """Why the model cannot be exported as transformer + mean pooling (None: it can)."""
    names = [type(m).__name__ for m in st_model]
    if names not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return f"modules {names} (only Transformer, mean Pooling, Normalize are exported)"
    cfg = st_model[1].get_config_dict()
    mode = cfg.get("pooling_mode")
    if mode is None:  # older sentence-transformers: one flag per pooling mode
        on = [k for k, v in cfg.items() if k.startswith("pooling_mode_") and v is True]
        mode = "mean" if on == ["pooling_mode_mean_tokens"] else str(on)
    if mode != "mean":
        return f"pooling {mode!r} (only mean pooling is exported)"
    if getattr(st_model[0], "auto_model", None) is None:
        return "no transformer model to export"
    return None


def _version(package: str) -> str | None:
    """An installed package's version, read from its metadata (nothing imported)."""
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _digest(folder: Path) -> str:
    """A hash of the model's weights and configuration, remembered by file size and time so
    a process does not read 90 MB of weights to find its cached export."""
    files = sorted(
        f for f in folder.glob("*") if f.is_file() and f.suffix in (".safetensors", ".bin", ".json")
    )
    stamp = [[f.name, f.stat().st_size, f.stat().st_mtime_ns] for f in files]
    memo_path = cache_dir() / "digests.json"
    memo: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        memo = json.loads(memo_path.read_text())
    hit = memo.get(str(folder.resolve())) if isinstance(memo, dict) else None
    if isinstance(hit, dict) and hit.get("stamp") == stamp and isinstance(hit.get("digest"), str):
        return str(hit["digest"])
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode())
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    digest = h.hexdigest()
    with contextlib.suppress(OSError):  # an unwritable cache only costs the hashing again
        memo = memo if isinstance(memo, dict) else {}
        memo[str(folder.resolve())] = {"stamp": stamp, "digest": digest}
        _write(memo_path, json.dumps(memo).encode())
    return digest


def _key(folder: Path) -> str:
    """The cache name of a model's export: its files and the torch and onnxruntime versions
    (read from package metadata, so finding the export imports neither)."""
    tag = f"{_digest(folder)} torch {_version('torch')} ort {_version('onnxruntime')} v2"
    return hashlib.sha256(tag.encode()).hexdigest()[:32]


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _mark(model: bytes) -> bytes:
    """The verification mark of an export: its bytes' SHA-256 (a changed file fails it)."""
    return f"verified sha256 {hashlib.sha256(model).hexdigest()}\n".encode()


def _marked(ok: Path, model: bytes) -> bool:
    """Whether ``ok`` marks exactly these bytes as verified."""
    try:
        return ok.read_bytes() == _mark(model)
    except OSError:
        return False


def _stale_mark(ok: Path, model: bytes) -> bool:
    """Whether ``ok`` marks other bytes than these as verified (the file changed since)."""
    try:
        mark = ok.read_bytes()
    except OSError:
        return False
    return mark.startswith(b"verified sha256 ") and mark != _mark(model)


def fast_tokenizer(folder: Path, max_length: int | None) -> Any:
    """The model's ``tokenizer.json`` through ``tokenizers`` (None when either is missing):
    no padding, truncation at ``max_length`` with the special tokens (None: none)."""
    path = folder / "tokenizer.json"
    if not path.exists():
        return None
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return None
    tok = Tokenizer.from_file(str(path))
    tok.no_padding()
    if max_length is None:
        tok.no_truncation()
    else:
        tok.enable_truncation(max_length)
    return tok


def _session(model: bytes | str, threads: int) -> Any:
    """An onnxruntime session of the model (a file's path: read by onnxruntime itself,
    measured 0.26-0.30 s against 0.44-0.56 s for the same file's bytes from Python)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = max(1, threads)
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])


def _export(auto_model: Any, tokenizer: Any, torch: Any) -> bytes:
    class _Hidden(torch.nn.Module):
        def __init__(self, m: Any) -> None:
            super().__init__()
            self.m = m

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.m(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    enc = tokenizer(["a probe", "a longer probe sentence"], padding=True, return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    buf = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on Python control flow
        torch.onnx.export(
            _Hidden(auto_model.eval()),
            tuple(enc[n] for n in names),
            buf,
            input_names=names,
            output_names=["hidden"],
            dynamic_axes={n: {0: "batch", 1: "seq"} for n in [*names, "hidden"]},
            opset_version=17,
            dynamo=False,
        )
    return buf.getvalue()


class OnnxQueryEncoder:
    """One text in, one unit vector out, by onnxruntime on the exported transformer.

    Args:
        session: The onnxruntime session of the exported transformer.
        tokenizer: A ``tokenizers.Tokenizer`` truncating at the model's window, or a
            transformers tokenizer.
        max_length: The model's window, special tokens included.
    """

    def __init__(self, session: Any, tokenizer: Any, max_length: int) -> None:
        self._session = session
        self._tokenizer = tokenizer
        self._max_length = max_length
        self._inputs = {i.name for i in session.get_inputs()}

    @classmethod
    def cached(cls, folder: Path, threads: int, max_length: int) -> OnnxQueryEncoder | None:
        """The encoder from a verified export in the cache, without torch (None when there
        is none, or onnxruntime or tokenizers is missing)."""
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            return None
        try:
            key = _key(folder)
            path, ok = cache_dir() / f"{key}.onnx", cache_dir() / f"{key}.ok"
            if not (path.exists() and ok.exists()):
                return None
            tokenizer = fast_tokenizer(folder, max_length)
            if tokenizer is None:
                return None
            model = path.read_bytes()
            if not _marked(ok, model):  # changed since it was verified (or an older mark)
                log.info("the cached query model %s is not the one verified", path)
                return None
            # onnxruntime reads the file itself, faster than from these bytes
            return cls(_session(str(path), threads), tokenizer, max_length)
        except Exception as exc:  # noqa: BLE001 - any failure: the PyTorch model is loaded
            log.info("no cached query model for %s: %s", folder, exc)
            return None

    @classmethod
    def build(
        cls, folder: Path, st_model: Any, threads: int, reference: Any
    ) -> OnnxQueryEncoder | None:
        """The encoder for ``st_model``, or None (with the reason logged) when it cannot be
        built or does not reproduce ``reference(text)`` (the PyTorch query embedding)."""
        try:
            import onnxruntime  # noqa: F401
            import torch
        except ImportError as exc:
            log.info("query embedding stays on PyTorch: %s", exc)
            return None
        why = _supported(st_model)
        if why:
            log.info("query embedding stays on PyTorch: %s", why)
            return None
        try:
            from transformers import AutoTokenizer

            key = _key(folder)
            path, ok = cache_dir() / f"{key}.onnx", cache_dir() / f"{key}.ok"
            max_length = int(st_model.max_seq_length)
            session = None
            model = b""
            if path.exists():
                try:
                    model = path.read_bytes()
                    if _stale_mark(ok, model):  # (an older, hashless mark: verified below)
                        raise ValueError("it changed since it was verified")
                    session = _session(str(path), threads)
                except Exception as exc:  # noqa: BLE001 - a torn cache file: export again
                    log.warning(
                        "the cached query model %s is unreadable (%s): exporting", path, exc
                    )
            if session is None:
                # its own tokenizer: the batch path's may be in use on another thread
                slow = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
                model = _export(st_model[0].auto_model, slow, torch)
                log.info("exported the query model to ONNX (%.0f MB)", len(model) / 1e6)
                with contextlib.suppress(OSError):  # unwritable: only costs a re-export
                    _write(path, model)
                session = _session(model, threads)
            fast = fast_tokenizer(folder, max_length)
            reference_tok = st_model.tokenizer
            if fast is not None and not all(
                fast.encode(p).ids
                == reference_tok([p], truncation=True, max_length=max_length)["input_ids"][0]
                for p in _PROBES
            ):
                log.info("tokenizer.json tokenizes otherwise than the model: not used")
                fast = None
            tokenizer = fast or AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
            enc = cls(session, tokenizer, max_length)
            for probe in _PROBES:
                cos = float(np.dot(enc(probe), np.asarray(reference(probe), dtype=np.float32)))
                if cos < 0.9999:
                    log.warning("query embedding stays on PyTorch: ONNX gave cosine %.5f", cos)
                    with contextlib.suppress(OSError):
                        ok.unlink()
                    return None
            if fast is not None:  # verified: a later process may start from the cache alone
                with contextlib.suppress(OSError):
                    _write(ok, _mark(model))
            return enc
        except Exception as exc:  # noqa: BLE001 - any failure keeps the PyTorch path
            log.warning("query embedding stays on PyTorch: export failed: %s", exc)
            return None

    @property
    def fast(self) -> bool:
        """Whether it tokenizes through ``tokenizers`` (which batches; see :meth:`embed_batch`)."""
        return hasattr(self._tokenizer, "encode_batch")

    def embed_batch(self, texts: list[str], batch_size: int) -> np.ndarray:
        """Unit vectors of many texts, in order. Texts are sorted by length and cut into
        batches of ``batch_size``, so a batch pads its texts to nearly their own length.

        Raises:
            ValueError: If the encoder has no ``tokenizers`` tokenizer (see :attr:`fast`).
        """
        if not self.fast:
            raise ValueError("batches need the model's tokenizer.json (tokenizers)")
        encs = self._tokenizer.encode_batch(texts)
        lengths = np.fromiter((len(e.ids) for e in encs), dtype=np.int64, count=len(encs))
        order = np.argsort(-lengths, kind="stable")
        out: np.ndarray | None = None
        for start in range(0, len(order), max(1, batch_size)):
            rows = order[start : start + batch_size]
            width = int(lengths[rows[0]])
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            types = np.zeros((len(rows), width), dtype=np.int64)
            for j, i in enumerate(rows.tolist()):
                e = encs[i]
                n = len(e.ids)
                ids[j, :n], mask[j, :n], types[j, :n] = e.ids, e.attention_mask, e.type_ids
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            hidden = self._session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[
                0
            ]
            m = mask[:, :, None].astype(np.float32)
            vecs = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1.0)
            norms = np.linalg.norm(vecs, axis=1, keepdims=True)
            vecs = vecs / np.where(norms > 0, norms, 1.0)
            if out is None:
                out = np.zeros((len(texts), vecs.shape[1]), dtype=np.float32)
            out[rows] = vecs
        assert out is not None
        return out

    def __call__(self, text: str) -> np.ndarray:
        if self.fast:  # tokenizers.Tokenizer
            e = self._tokenizer.encode(text)
            feed = {
                "input_ids": np.asarray([e.ids], dtype=np.int64),
                "attention_mask": np.asarray([e.attention_mask], dtype=np.int64),
                "token_type_ids": np.asarray([e.type_ids], dtype=np.int64),
            }
            feed = {k: v for k, v in feed.items() if k in self._inputs}
        else:
            enc = self._tokenizer(
                [text], return_tensors="np", truncation=True, max_length=self._max_length
            )
            feed = {k: np.asarray(v, dtype=np.int64) for k, v in enc.items() if k in self._inputs}
        if "token_type_ids" in self._inputs and "token_type_ids" not in feed:
            feed["token_type_ids"] = np.zeros_like(feed["input_ids"])
        hidden = self._session.run(None, feed)[0][0]
        mask = feed["attention_mask"][0].astype(np.float32)[:, None]
        vec = (hidden * mask).sum(axis=0) / max(float(mask.sum()), 1.0)
        norm = float(np.linalg.norm(vec))
        return (vec / norm if norm > 0 else vec).astype(np.float32)
