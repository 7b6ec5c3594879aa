"""An embedding worker process, and the parent's pool of them (``[embedder] workers``).

A worker is ``python -m pensive_core.embedders.worker MODEL_DIR THREADS BATCH_SIZE``. It loads
the sentence-transformers model once, then answers requests on its stdin/stdout until stdin
closes. Nothing is pickled: the wire is length-framed JSON one way and raw float32 the other.

- request: 4-byte big-endian length, then UTF-8 JSON ``{"texts": [...]}``;
- reply: one kind byte, a 4-byte big-endian length, then the payload: ``V`` carries the
  ``(n, dim)`` little-endian float32 vectors row by row, ``E`` a UTF-8 JSON
  ``{"error": "..."}``.

The worker writes nothing else to the protocol stream: its file descriptor 1 is pointed at
stderr before the model is imported, so a library's stray print cannot corrupt a reply.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from ..errors import EmbedderError

__all__ = ["WorkerPool", "split_balanced"]

log = logging.getLogger(__name__)

_LEN = struct.Struct(">I")
_VECTORS, _ERROR = b"V", b"E"
_STDERR_TAIL = 2000  # bytes of a failed worker's stderr quoted in the error
_STOP_WAIT_S = 5.0


def split_balanced(lengths: Sequence[int], parts: int) -> list[tuple[int, int]]:
    """Cut ``range(len(lengths))`` into ``parts`` contiguous ``(start, stop)`` slices of about
    equal total length (a slice may be empty when there are fewer items than parts)."""
    n = len(lengths)
    if parts <= 1 or n == 0:
        return [(0, n)]
    cum = np.concatenate([[0.0], np.cumsum(np.asarray(lengths, dtype=np.float64) + 1.0)])
    cuts = [0]
    for target in cum[-1] * np.arange(1, parts) / parts:  # +1 above: no text is free
        i = int(np.searchsorted(cum, target))  # cum[i - 1] < target <= cum[i]
        if i > 0 and target - cum[i - 1] < cum[i] - target:
            i -= 1  # the cut nearer the target
        cuts.append(max(i, cuts[-1]))
    cuts.append(n)
    return list(zip(cuts[:-1], cuts[1:]))


def _read_exact(stream: IO[bytes], n: int) -> bytes | None:
    """``n`` bytes, or None at end of stream (the other side is gone)."""
    chunks, got = [], 0
    while got < n:
        chunk = stream.read(n - got)
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


# -- the parent side ---------------------------------------------------------------------------


class _Worker:
    def __init__(self, index: int, argv: list[str], env: dict[str, str]) -> None:
        self.index = index
        # a file, not a pipe: a chatty worker can never block on it; it lives as the worker does
        self.stderr = tempfile.TemporaryFile(prefix="pensive-embed-worker-")  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.stderr,
                env=env,
                close_fds=True,
                start_new_session=True,  # Ctrl-C reaches the parent, which then stops workers
            )
        except BaseException:
            self.stderr.close()
            raise

    def hang_up(self) -> None:
        """Close the worker's input: it exits once its current request is answered."""
        stdin = self.proc.stdin
        with contextlib.suppress(OSError, ValueError):
            if stdin is not None and not stdin.closed:
                stdin.close()

    def stop(self) -> None:
        proc = self.proc
        self.hang_up()
        if proc.stdout is not None:
            proc.stdout.close()  # a reply still being written fails at once (broken pipe)
        try:
            proc.wait(timeout=_STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        self.stderr.close()

    def failure(self, what: str) -> EmbedderError:
        """The error for a worker that broke: its exit code and the tail of its stderr."""
        proc = self.proc
        try:
            code: int | None = proc.wait(timeout=_STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            code = None
        tail = ""
        try:
            self.stderr.seek(0, os.SEEK_END)
            size = self.stderr.tell()
            self.stderr.seek(max(0, size - _STDERR_TAIL))
            tail = self.stderr.read().decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            pass
        if code is None:
            status = "is still running"
        elif code < 0:
            try:
                status = f"was killed by {signal.Signals(-code).name} (exit code {code})"
            except ValueError:
                status = f"exited with code {code}"
        else:
            status = f"exited with code {code}"
        return EmbedderError(
            f"embedding worker {self.index} (pid {proc.pid}) {what}; it {status}. "
            f"stderr tail: {tail or '(empty)'}"
        )


class WorkerPool:
    """``count`` embedding worker processes over one model folder, started on first use.

    Args:
        model: The sentence-transformers model folder.
        count: Worker processes.
        threads: torch threads in each worker.
        batch_size: Passages per forward pass in each worker.
        dim: The vector dimension every reply must have.
    """

    def __init__(self, model: Path, count: int, threads: int, batch_size: int, dim: int) -> None:
        self.model = Path(model)
        self.count = count
        self.threads = max(1, threads)
        self.batch_size = batch_size
        self.dim = dim
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()

    @property
    def pids(self) -> list[int]:
        """The running workers' process ids (empty before the first use and after close)."""
        return [w.proc.pid for w in self._workers]

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        n = str(self.threads)
        env.update(OMP_NUM_THREADS=n, MKL_NUM_THREADS=n, TOKENIZERS_PARALLELISM="false")
        # the worker imports this very package, wherever it was imported from here
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        return env

    def _start(self) -> None:
        argv = [
            sys.executable,
            "-m",
            "pensive_core.embedders.worker",
            str(self.model),
            str(self.threads),
            str(self.batch_size),
        ]
        env = self._env()
        try:
            for i in range(self.count):
                self._workers.append(_Worker(i, argv, env))
        except OSError as exc:
            self._stop_all()
            raise EmbedderError(f"could not start an embedding worker: {exc}") from exc

    def _stop_all(self) -> None:
        workers, self._workers = self._workers, []
        for w in workers:  # every worker is told first, so they exit side by side
            w.hang_up()
        for w in workers:
            try:
                w.stop()
            except Exception:  # stopping is best effort; a kill is the last word
                log.debug("embedding worker %d did not stop cleanly", w.index, exc_info=True)

    def close(self) -> None:
        """Stop every worker (they restart on the next :meth:`embed`)."""
        with self._lock:
            self._stop_all()

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts`` across the workers, in order, as one float32 ``(n, dim)`` array.

        Raises:
            EmbedderError: A worker died or answered with an error; every worker is stopped
                and the next call starts fresh ones.
        """
        with self._lock:
            if not self._workers:
                self._start()
            slices = split_balanced([len(t) for t in texts], len(self._workers))
            jobs = [(w, a, b) for w, (a, b) in zip(self._workers, slices) if b > a]
            try:
                for w, a, b in jobs:  # every request first, so the workers run at once
                    self._send(w, texts[a:b])
                out = np.empty((len(texts), self.dim), dtype=np.float32)
                for w, a, b in jobs:
                    out[a:b] = self._receive(w, b - a)
                return out
            except BaseException:
                self._stop_all()  # replies may be pending: no worker is reused out of step
                raise

    def _send(self, w: _Worker, texts: list[str]) -> None:
        body = json.dumps({"texts": texts}).encode("ascii")  # ASCII: lone surrogates survive
        stdin = w.proc.stdin
        assert stdin is not None
        try:
            stdin.write(_LEN.pack(len(body)) + body)
            stdin.flush()
        except (BrokenPipeError, ValueError, OSError) as exc:
            raise w.failure("stopped taking requests") from exc

    def _receive(self, w: _Worker, n: int) -> np.ndarray:
        stdout = w.proc.stdout
        assert stdout is not None
        head = _read_exact(stdout, 1 + _LEN.size)
        if head is None:
            raise w.failure("closed its output before replying")
        kind, size = head[:1], _LEN.unpack(head[1:])[0]
        body = _read_exact(stdout, size)
        if body is None:
            raise w.failure("closed its output mid-reply")
        if kind == _ERROR:
            try:
                msg = str(json.loads(body.decode("utf-8")).get("error"))
            except (ValueError, AttributeError):
                msg = body[:_STDERR_TAIL].decode("utf-8", "replace")
            raise EmbedderError(f"embedding worker {w.index} (pid {w.proc.pid}) failed: {msg}")
        if kind != _VECTORS or size != n * self.dim * 4:
            raise w.failure(
                f"sent a malformed reply (kind {kind!r}, {size} bytes for {n} x {self.dim})"
            )
        return np.frombuffer(body, dtype="<f4").reshape(n, self.dim)


def stop_pool(pool: WorkerPool) -> None:
    """Finalizer hook: stop ``pool``'s workers (at garbage collection or interpreter exit)."""
    pool.close()


# -- the worker side ---------------------------------------------------------------------------


def _reply(out: IO[bytes], kind: bytes, payload: bytes) -> None:
    out.write(kind + _LEN.pack(len(payload)) + payload)
    out.flush()


def main(argv: list[str] | None = None) -> int:
    """Serve embedding requests on stdin/stdout until stdin closes."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print(
            "usage: python -m pensive_core.embedders.worker MODEL_DIR THREADS BATCH_SIZE",
            file=sys.stderr,
        )
        return 2
    model_dir, threads, batch_size = args[0], int(args[1]), int(args[2])
    folder = Path(model_dir)
    if not (folder / "config.json").exists() and not (folder / "modules.json").exists():
        print(f"{folder} is not a sentence-transformers model folder", file=sys.stderr)
        return 1  # before the slow imports: the parent hears of it at once
    # the protocol gets a private copy of stdout; fd 1 then goes to stderr for stray prints
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    inp = sys.stdin.buffer

    import torch

    torch.set_num_threads(max(1, threads))
    with contextlib.suppress(RuntimeError):  # already set, or parallel work already ran
        torch.set_num_interop_threads(1)
    from sentence_transformers import SentenceTransformer

    from .sentence_transformers import quiet_transformers

    with quiet_transformers():
        model = SentenceTransformer(model_dir, device="cpu", local_files_only=True)

    while True:
        head = _read_exact(inp, _LEN.size)
        if head is None:
            return 0  # the parent closed our input: done
        body = _read_exact(inp, _LEN.unpack(head)[0])
        if body is None:
            return 0
        try:
            request: Any = json.loads(body.decode("utf-8"))
            texts = request["texts"]
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                raise ValueError("'texts' must be a list of strings")
            vecs = model.encode(
                texts,
                batch_size=batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            payload = np.ascontiguousarray(vecs, dtype="<f4").tobytes()
        except Exception as exc:  # reported to the parent; the worker keeps serving
            _reply(out, _ERROR, json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())
            continue
        try:
            _reply(out, _VECTORS, payload)
        except BrokenPipeError:
            return 0  # the parent is gone


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    os._exit(code)  # skip torch's slow interpreter teardown: the parent waits on this exit
