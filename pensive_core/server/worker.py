"""The server's one writer: every store of every namespace, opened for writing in a process of
its own, so a long ingest never holds the server's interpreter lock.

The server keeps read-only handles for queries (they see each commit of this writer at their
next query) and sends this process the work that changes a store: ingest, delete and
conversation turns. Messages are JSON over a socket pair: nothing is ever unpickled.
Ingest and delete run in order on one thread; conversation operations on another, so a turn is
not queued behind a long ingest. Ingests of one namespace queued right behind each other run as
one change with one commit (:meth:`Pensive.ingest_many <pensive_core.Pensive.ingest_many>`),
each answered with its own report: under many small ingests, each no longer waits for every
earlier one's commit. If the process dies (killed, out of memory), every request in
flight fails with ``worker_crashed`` and a new process is started: opening a store recovers
whatever an interrupted ingest left behind.
"""

from __future__ import annotations

import json
import logging
import queue
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ..errors import PensiveError
from ..memory.templates import served_choice

__all__ = ["Writer", "WorkerError"]

log = logging.getLogger(__name__)

_STOP = "stop"

#: At most this many queued ingest requests of one namespace run as one change (one commit)
GROUP_REQUESTS = 64
#: ... and they stop being joined once they hold this many documents: a burst of small
#: ingests shares one commit, while the first of them is not kept waiting on a long group
GROUP_DOCUMENTS = 2_000


class WorkerError(PensiveError):
    """The writer process failed a request.

    Args:
        kind: The exception class name raised in the worker (``InputError``, ...), or
            ``WorkerCrashed`` when the process died with the request in flight.
        message: Its message.
    """

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


class Writer:
    """A writer process serving the stores under ``root`` (one per namespace).

    Args:
        root: The server's store folder (namespaces live under it).
        config: The config every store is opened with (a dict shaped like ``pensive.toml``).
        start_timeout_s: How long to wait for the process to start.
    """

    def __init__(
        self, root: Path, config: Mapping[str, Any] | None, start_timeout_s: float = 300.0
    ) -> None:
        self.root = Path(root)
        self._config = json.dumps(dict(config or {}))
        self._timeout = start_timeout_s
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[Future[Any], Callable[[int], None] | None]] = {}
        self._next = 0
        self._closing = False
        self._conn: Any = None
        self._proc: Any = None
        self.restarts = 0
        self.ready = threading.Event()

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the process and wait until it answers.

        The process is ``python -m pensive_core.server.worker`` (not multiprocessing: nothing
        of the caller's ``__main__`` is re-run), talking over a socket pair.

        Raises:
            WorkerError: If it does not start, or cannot open the default store.
        """
        ours, theirs = socket.socketpair()
        proc = subprocess.Popen(
            [sys.executable, "-m", "pensive_core.server.worker", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            # its own session: a Ctrl-C or SIGTERM meant for the server (its process group)
            # does not kill the writer mid-ingest; it exits when the server says so or is gone
            start_new_session=True,
        )
        theirs.close()
        conn = Connection(ours.detach())
        try:
            conn.send_bytes(json.dumps({"root": str(self.root), "config": self._config}).encode())
            if not conn.poll(self._timeout):
                raise WorkerError("WorkerCrashed", "the writer process did not start in time")
            hello = json.loads(conn.recv_bytes())
        except (EOFError, OSError):
            proc.wait(5)
            conn.close()
            raise WorkerError(
                "WorkerCrashed", f"the writer process exited at start (code {proc.returncode})"
            ) from None
        except WorkerError:
            proc.kill()
            proc.wait(5)
            conn.close()
            raise
        if not hello.get("ready"):
            proc.wait(30)
            conn.close()
            raise WorkerError(hello.get("type", "Error"), hello.get("message", "start failed"))
        self._conn, self._proc = conn, proc
        self.ready.set()
        threading.Thread(target=self._receive, args=(conn, proc), daemon=True).start()

    @property
    def alive(self) -> bool:
        """Whether the process is running and answering."""
        return self.ready.is_set() and self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The process id (None before start)."""
        return None if self._proc is None else self._proc.pid

    def close(self, timeout_s: float = 30.0) -> None:
        """Let the process finish what it was given, close its stores and exit."""
        self._closing = True
        self.ready.clear()
        conn, proc = self._conn, self._proc
        if conn is None:
            return
        try:
            with self._lock:
                conn.send_bytes(json.dumps({"op": _STOP}).encode())
        except OSError:
            pass
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            log.warning("the writer process did not stop in %.0f s; killing it", timeout_s)
            proc.kill()
            proc.wait(5)
        conn.close()

    # -- requests -------------------------------------------------------------------------------
    def call(
        self, op: str, progress: Callable[[int], None] | None = None, **args: Any
    ) -> Future[Any]:
        """Send a request; the future resolves to its JSON result or raises WorkerError."""
        fut: Future[Any] = Future()
        with self._lock:
            if not self.alive:
                fut.set_exception(WorkerError("NotReady", "the writer process is not running"))
                return fut
            self._next += 1
            rid = self._next
            self._pending[rid] = (fut, progress)
            try:
                self._conn.send_bytes(json.dumps({"id": rid, "op": op, **args}).encode())
            except (OSError, ValueError) as exc:
                del self._pending[rid]
                fut.set_exception(WorkerError("WorkerCrashed", f"cannot reach the writer: {exc}"))
        return fut

    def _receive(self, conn: Any, proc: Any) -> None:
        while True:
            try:
                msg = json.loads(conn.recv_bytes())
            except (EOFError, OSError):
                break
            rid = msg.get("id")
            with self._lock:
                entry = self._pending.get(rid)
                if entry is not None and "progress" not in msg:
                    del self._pending[rid]
            if entry is None:
                continue
            fut, progress = entry
            if "progress" in msg:
                if progress is not None:
                    progress(int(msg["progress"]))
            elif msg.get("ok"):
                fut.set_result(msg.get("result"))
            else:
                fut.set_exception(WorkerError(msg.get("type", "Error"), msg.get("message", "")))
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        with self._lock:
            self.ready.clear()
            pending, self._pending = self._pending, {}
        for fut, _ in pending.values():
            fut.set_exception(
                WorkerError("WorkerCrashed", f"the writer process died (code {proc.returncode})")
            )
        if not self._closing:
            log.error("the writer process died (code %s); restarting it", proc.returncode)
            self._restart()

    def _restart(self) -> None:
        delay = 0.2
        while not self._closing:
            try:
                self.start()
                self.restarts += 1
                return
            except Exception as exc:  # noqa: BLE001 - keep trying; readiness reports it
                log.error("restarting the writer failed: %s", exc)
                time.sleep(delay)
                delay = min(delay * 2, 10.0)


# -- the child process -------------------------------------------------------------------------
def _child_main(conn: Any) -> None:
    """Entry point of the writer process."""
    from ..namespaces import namespace_path

    start = json.loads(conn.recv_bytes())
    root, config = start["root"], json.loads(start["config"])
    send_lock = threading.Lock()
    stores: dict[str, Any] = {}
    stores_lock = threading.Lock()

    def send(msg: dict[str, Any]) -> None:
        data = json.dumps(msg, default=str).encode()
        with send_lock:
            conn.send_bytes(data)

    def store(ns: str) -> Any:
        from ..engine import Pensive

        with stores_lock:
            p = stores.get(ns)
            if p is None:
                first = next(iter(stores.values()), None)
                # the first store (the default namespace) loaded the model at start: share it,
                # unless it was re-embedded since (its model is then not the others' model)
                moved = first is not None and first.components.archive.get_meta("reembedded")
                shared = None if first is None or moved else first.embedder
                p = Pensive(namespace_path(root, ns), config=config, embedder=shared)
                if p.components.invalidation is not None:
                    # "idle": an ingest is answered at its commit; the cached answers it
                    # dropped are answered again once no write waits (owed(), below)
                    mode = p.config.server.cache_refresh
                    p.components.invalidation.defer = mode != "commit"
                    p.components.invalidation.owe = mode == "idle"
                stores[ns] = p
            return p

    def answer(msg: dict[str, Any], outcome: Any) -> None:
        """Send a request its result, or the exception it failed with."""
        if not isinstance(outcome, Exception):
            send({"id": msg["id"], "ok": True, "result": outcome})
            return
        if not isinstance(outcome, PensiveError):
            trace = "".join(traceback.format_exception(outcome))
            log.error("writer: %s failed:\n%s", msg.get("op"), trace)
        send(
            {"id": msg["id"], "ok": False, "type": type(outcome).__name__, "message": str(outcome)}
        )

    def owed(q: queue.Queue[dict[str, Any] | None]) -> None:
        """Answer again the cached answers the last commits dropped, until a request waits
        (benchmarks/reliability: done inside each commit, it held every queued ingest
        ~250 ms, answers the next commit would drop again)."""
        with stores_lock:
            open_ = list(stores.values())
        for p in open_:
            inv = p.components.invalidation
            if inv is None or not inv.owed:
                continue
            try:
                inv.refresh_owed(stop=lambda: not q.empty())
            except Exception as exc:  # noqa: BLE001 - a cache refresh never fails a writer
                log.warning("writer: cached answers not refreshed: %s", exc)

    def run(q: queue.Queue[dict[str, Any] | None], refresh: bool) -> None:
        ahead: list[dict[str, Any] | None] = []  # taken from the queue, not yet handled
        while True:
            if refresh and not ahead and q.empty():
                owed(q)
            msg = ahead.pop() if ahead else q.get()
            if msg is None:
                return
            if msg["op"] == "ingest":
                group = _queued_ingests(q, msg, ahead)
                for m in group:
                    send({"id": m["id"], "progress": 0})  # started: the job is running
                for m, outcome in zip(group, _ingest(group, store, send)):
                    answer(m, outcome)
                continue
            rid = msg["id"]
            if not msg["op"].startswith("chat."):
                send({"id": rid, "progress": 0})  # started: the job is running
            try:

                def progress(n: int, rid: int = rid) -> None:
                    send({"id": rid, "progress": n})

                answer(msg, _handle(msg, store, progress))
            except Exception as exc:  # noqa: BLE001 - every failure goes back to the caller
                answer(msg, exc)

    try:
        p = store("default")  # a config that contradicts the store fails here, at start
        embedder = p.embedder  # the model loads now: ready means ready to ingest fast
        embedder = getattr(embedder, "inner", embedder)  # the model behind the query cache
        if p.config.embedder.batch_threads == 0 and hasattr(embedder, "batch_threads"):
            # beside the server's query threads, one torch thread per batch measured 0.8-0.95 s
            # per small ingest against 1.7-2.1 s with every core (threads spin against queries)
            embedder.batch_threads = 1
        warm = getattr(embedder, "warm", None)
        if warm is not None:  # the export (or the model) ready before the first ingest
            warm()
    except Exception as exc:  # noqa: BLE001
        send({"ready": False, "type": type(exc).__name__, "message": str(exc)})
        return
    writes: queue.Queue[dict[str, Any] | None] = queue.Queue()
    chats: queue.Queue[dict[str, Any] | None] = queue.Queue()
    threads = [
        threading.Thread(target=run, args=(q, q is writes), daemon=True) for q in (writes, chats)
    ]
    for t in threads:
        t.start()
    send({"ready": True})
    try:
        while True:
            try:
                msg = json.loads(conn.recv_bytes())
            except (EOFError, OSError):
                break  # the server is gone: finish what was given and close
            if msg.get("op") == _STOP:
                break
            (chats if msg["op"].startswith("chat.") else writes).put(msg)
    finally:
        for q in (writes, chats):
            q.put(None)
        for t in threads:
            t.join()
        with stores_lock:
            for p in stores.values():
                p.close()


def _queued_ingests(
    q: queue.Queue[dict[str, Any] | None], first: dict[str, Any], ahead: list[Any]
) -> list[dict[str, Any]]:
    """``first`` (an ingest request) and the ingests of the same namespace and
    ``archive_only`` queued right behind it, up to :data:`GROUP_REQUESTS` requests or
    :data:`GROUP_DOCUMENTS` documents: they run as one change. The first other message
    taken goes to ``ahead``, to be handled next: nothing is handled out of order."""
    group = [first]
    n_docs = len(first.get("documents") or ())
    while len(group) < GROUP_REQUESTS and n_docs < GROUP_DOCUMENTS:
        try:
            msg = q.get_nowait()
        except queue.Empty:
            break
        if (
            msg is None
            or msg["op"] != "ingest"
            or msg["ns"] != first["ns"]
            or bool(msg.get("archive_only")) != bool(first.get("archive_only"))
        ):
            ahead.append(msg)
            break
        group.append(msg)
        n_docs += len(msg.get("documents") or ())
    return group


def _ingest(
    msgs: list[dict[str, Any]], store: Callable[[str], Any], send: Callable[[dict[str, Any]], None]
) -> list[Any]:
    """Ingest requests of one namespace as one change with one commit
    (:meth:`Pensive.ingest_many <pensive_core.Pensive.ingest_many>`); returns each request's
    result (its report), or the exception it failed with (a request with a malformed
    document fails alone, before anything is ingested)."""
    from ..errors import IngestGroupsError
    from ..types import Document

    outcomes: list[Any] = [None] * len(msgs)
    groups: list[list[Document]] = []
    at: list[int] = []  # the request of each group
    for i, msg in enumerate(msgs):
        try:
            groups.append(
                [
                    Document(d["id"], d["text"], d.get("metadata") or {}, d.get("timestamp"))
                    for d in msg["documents"]
                ]
            )
            at.append(i)
        except Exception as exc:  # noqa: BLE001 - that request's outcome
            outcomes[i] = exc
    if not groups:
        return outcomes

    def progress(group: int, n: int) -> None:
        send({"id": msgs[at[group]]["id"], "progress": n})

    try:
        p = store(msgs[0]["ns"])
        done: list[Any] = p.ingest_many(
            *groups, progress=progress, archive_only=bool(msgs[0].get("archive_only"))
        )
    except IngestGroupsError as exc:
        done = exc.outcomes
    except Exception as exc:  # noqa: BLE001 - every request's outcome
        done = [exc] * len(groups)
    for i, out in zip(at, done):
        if isinstance(out, Exception):
            outcomes[i] = out
        else:
            outcomes[i] = {k: v for k, v in out.__dict__.items() if k != "errors"}
    return outcomes


def _handle(
    msg: dict[str, Any], store: Callable[[str], Any], progress: Callable[[int], None]
) -> Any:
    from ..memory.turns import check_turn
    from ..timeutil import ensure_utc
    from ..wire import hit_json, turn_json

    op, ns = msg["op"], msg["ns"]
    p = store(ns)
    if op == "open":
        return {"commit": p.commit_number}
    if op == "delete":
        return {"chunks": p.delete(msg["doc_id"])}
    if op == "reembed":
        return p.reembed(  # type: ignore[no-any-return]
            msg["embedder"],
            batch_size=msg["batch_size"],
            discard_old=msg["discard_old"],
            rollback=msg["rollback"],
            progress=lambda done, total: progress(done),
        )
    if op == "chat.list":
        return p.conversations(namespace="default", user=msg.get("user"))
    if op == "chat.add":
        # checked before the session is opened: a refused turn creates no session either
        check_turn(
            {
                "role": msg["role"],
                "text": msg["text"],
                "timestamp": msg.get("timestamp"),
                "metadata": msg.get("metadata"),
            }
        )
    # only a new turn creates a session: reading, recalling or clearing an unknown one is
    # NotFoundError (404), and leaves no folder or registry row behind
    conv = p.conversation(msg["session"], user=msg.get("user"), create=op == "chat.add")
    if op == "chat.add":
        turn = conv.add(msg["role"], msg["text"], msg.get("timestamp"), msg.get("metadata"))
        return turn_json(turn)
    if op == "chat.turns":
        return [turn_json(t) for t in conv.turns(msg.get("limit"))]
    if op == "chat.recall":
        as_of = ensure_utc(msg.get("as_of"))
        hits = conv.recall(msg["query"], msg.get("k", 5), scope=msg.get("scope"), as_of=as_of)
        return [hit_json(h) for h in hits]
    if op == "chat.context":
        strategy, template = served_choice(msg.get("strategy"), msg.get("template"))
        built = conv.build(
            msg["query"], msg.get("token_budget", 2000), strategy=strategy, template=template
        )
        return {"text": built.text, "tokens": built.tokens, "budget": built.budget}
    if op == "chat.clear":
        return {"cleared": conv.clear()}
    raise PensiveError(f"unknown writer operation {op!r}")


if __name__ == "__main__":
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server stops it by message (or EOF)
    _handler = logging.StreamHandler()
    _handler.setLevel(logging.WARNING)  # some libraries set DEBUG on their own loggers
    _handler.setFormatter(logging.Formatter("pensive-writer %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[_handler])
    _child_main(Connection(int(sys.argv[1])))
