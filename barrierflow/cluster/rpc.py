"""The authenticated connection between the JobMaster and its tasks.

Both ends prove they know the job's secret (HMAC challenge) before anything is
unpickled. Reader threads only turn received messages into mails. The server
keeps every connection it accepted, so closing it ends every task's connection:
no task outlives its job's endpoint.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

from barrierflow.cluster.mails import Mail, TaskConnectionLost, TaskMessageReceived
from barrierflow.runtime.mails import RpcLost, RpcReceived
from barrierflow.runtime.network.connections import close_connection

log = logging.getLogger(__name__)


class RpcServer:
    """The JobMaster's endpoint. Posts TaskMessageReceived and TaskConnectionLost mails."""

    def __init__(self, host: str, secret: bytes, post: Callable[[Mail], None]) -> None:
        self._listener = Listener((host, 0), family="AF_INET", authkey=secret)
        self._post = post
        self._closed = False
        self._lock = threading.Lock()
        self._connections: set[Connection] = set()
        threading.Thread(target=self._accept_loop, name="rpc-accept", daemon=True).start()

    @property
    def address(self) -> tuple[str, int]:
        return self._listener.address

    @property
    def open_connections(self) -> int:
        """How many accepted connections are not closed yet (tests)."""
        with self._lock:
            return sum(1 for conn in self._connections if not conn.closed)

    def close(self) -> None:
        """Stop listening and close every accepted connection."""
        with self._lock:
            self._closed = True
            connections = list(self._connections)
            self._connections.clear()
        with contextlib.suppress(OSError):
            self._listener.close()
        for conn in connections:
            close_connection(conn)

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                conn = self._listener.accept()
            except OSError:
                if self._closed:
                    return
                log.warning("refused an RPC connection", exc_info=True)
                continue
            except Exception:  # failed authentication: a stranger, not a task
                log.warning("refused an RPC connection that failed authentication", exc_info=True)
                continue
            with self._lock:
                closed = self._closed
                if not closed:
                    self._connections.add(conn)
            if closed:
                close_connection(conn)
                return
            threading.Thread(target=self._read, args=(conn,), name="rpc-read", daemon=True).start()

    def _read(self, conn: Connection) -> None:
        try:
            while True:
                self._post(TaskMessageReceived(conn, conn.recv()))
        except (EOFError, OSError, TypeError):  # TypeError: closed by the JobMaster meanwhile
            pass
        except Exception as error:  # an unreadable message: treat the task as lost
            log.warning("unreadable RPC message: %s", error)
        with self._lock:
            self._connections.discard(conn)
        close_connection(conn)
        self._post(TaskConnectionLost(conn))


class RpcClient:
    """A task's connection to the JobMaster. Posts RpcReceived(message) and RpcLost()."""

    def __init__(
        self, address: tuple[str, int], secret: bytes, post: Callable[[Any], None]
    ) -> None:
        self._conn = Client(tuple(address), family="AF_INET", authkey=secret)
        self._lock = threading.Lock()
        self._post = post
        threading.Thread(target=self._read, name="rpc-read", daemon=True).start()

    def send(self, message: Any) -> None:
        """Thread-safe: the mailbox thread and the upload thread both send."""
        with self._lock:
            self._conn.send(message)

    def close(self) -> None:
        close_connection(self._conn)

    def _read(self) -> None:
        try:
            while True:
                self._post(RpcReceived(self._conn.recv()))
        except (EOFError, OSError, TypeError):  # TypeError: closed by this task meanwhile
            self._post(RpcLost())
