"""The authenticated connection between the JobMaster and its tasks.

Both ends prove they know the job's secret (HMAC challenge) before anything is
unpickled. Reader threads only turn received messages into mails.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

from barrierflow.runtime.mails import RpcLost, RpcReceived
from barrierflow.runtime.network.connections import close_connection

log = logging.getLogger(__name__)


class RpcServer:
    """The JobMaster's endpoint. Posts ("task_message", conn, message) and ("task_lost", conn)."""

    def __init__(self, host: str, secret: bytes, post: Callable[[tuple[Any, ...]], None]) -> None:
        self._listener = Listener((host, 0), family="AF_INET", authkey=secret)
        self._post = post
        self._closed = False
        threading.Thread(target=self._accept_loop, name="rpc-accept", daemon=True).start()

    @property
    def address(self) -> tuple[str, int]:
        return self._listener.address

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()

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
            threading.Thread(target=self._read, args=(conn,), name="rpc-read", daemon=True).start()

    def _read(self, conn: Connection) -> None:
        try:
            while True:
                self._post(("task_message", conn, conn.recv()))
        except (EOFError, OSError, TypeError):  # TypeError: closed by the JobMaster meanwhile
            self._post(("task_lost", conn))
        except Exception as error:  # an unreadable message: treat the task as lost
            log.warning("unreadable RPC message: %s", error)
            self._post(("task_lost", conn))


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
