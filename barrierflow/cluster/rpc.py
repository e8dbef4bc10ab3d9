"""The authenticated connection between the JobMaster and its tasks.

Connections are set up by `runtime.network.handshake`: both ends prove they know
the job's secret (HMAC challenge) before anything is unpickled, then the task
names its job and the JobMaster refuses another job's task at once; every step is
bounded, and each connection is set up on its own thread, so a stalled peer delays
no other task. The messages themselves carry their attempt, and the JobMaster
refuses other attempts by number. Reader threads only turn received messages into
mails. The server keeps every connection it admitted, so closing it ends every
task's connection: no task outlives its job's endpoint.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, Protocol

import msgpack

from barrierflow.cluster.addresses import RPC_ADVERTISED_KEY, RPC_BIND_KEY
from barrierflow.cluster.mails import Mail, TaskConnectionLost, TaskMessageReceived
from barrierflow.errors import ConnectionSetupError, JobMasterUnreachableError
from barrierflow.runtime.mails import RpcLost, RpcReceived
from barrierflow.runtime.network import handshake
from barrierflow.runtime.network.connections import close_connection

log = logging.getLogger(__name__)

_RPC = "rpc"
"""The first field of an RPC hello, so a data channel's hello can never pass for one."""


def _encode_hello(job_id: str | None) -> bytes:
    return msgpack.packb([_RPC, job_id or ""])


def _decode_hello(data: bytes) -> str:
    """The job id an RPC hello names; raises Refused for anything else."""
    try:
        kind, job_id = msgpack.unpackb(data)
    except Exception:
        raise handshake.Refused("not an RPC hello") from None
    if kind != _RPC or not isinstance(job_id, str):
        raise handshake.Refused("not an RPC hello")
    return job_id


class RpcEndpoint(Protocol):
    """The JobMaster's RPC endpoint (rpc.RpcServer): tasks connect to `address`."""

    address: tuple[str, int]

    def close(self) -> None:
        """Stop listening and close every task's connection."""
        ...


RpcFactory = Callable[..., RpcEndpoint]
"""(host, secret, post, *, job_id) -> the RPC endpoint tasks of job `job_id` connect to."""


class RpcServer:
    """The JobMaster's endpoint. Posts TaskMessageReceived and TaskConnectionLost mails.

    With a `job_id`, a task that names another job is refused at once (without one, any
    task holding the secret is admitted).
    """

    def __init__(
        self,
        host: str,
        secret: bytes,
        post: Callable[[Mail], None],
        *,
        job_id: str | None = None,
        handshake_timeout_s: float = handshake.HANDSHAKE_TIMEOUT_S,
    ) -> None:
        self._post = post
        self._job_id = job_id
        self._acceptor = handshake.Acceptor(
            host, secret, self._admit, name="rpc", timeout_s=handshake_timeout_s
        )
        self._acceptor.start()

    @property
    def address(self) -> tuple[str, int]:
        return self._acceptor.address

    @property
    def open_connections(self) -> int:
        """How many admitted connections are not closed yet (tests)."""
        return self._acceptor.open_connections

    def close(self) -> None:
        """Stop listening, end every handshake and close every admitted connection."""
        self._acceptor.close()

    def _admit(self, hello: bytes) -> handshake.Admitted:
        job_id = _decode_hello(hello)
        if self._job_id is not None and job_id != self._job_id:
            raise handshake.Refused(
                f"a task of job {job_id or '(unnamed)'}, this JobMaster runs job {self._job_id}"
            )
        return self._start_reading

    def _start_reading(self, conn: Connection) -> None:
        threading.Thread(target=self._read, args=(conn,), name="rpc-read", daemon=True).start()

    def _read(self, conn: Connection) -> None:
        try:
            while True:
                self._post(TaskMessageReceived(conn, conn.recv()))
        except (EOFError, OSError, TypeError):  # TypeError: closed by the JobMaster meanwhile
            pass
        except Exception:  # an unreadable message, a bug: the task is lost, and why is logged
            log.error("RPC reader of a task connection failed; the task counts as lost",
                      exc_info=True)  # fmt: skip
        self._acceptor.forget(conn)
        close_connection(conn)
        self._post(TaskConnectionLost(conn))


def unreachable_message(executor_host: str, address: tuple[str, int], reason: str) -> str:
    """The one line a task whose JobMaster does not answer fails with: where, and the fix.

    >>> unreachable_message("worker-1", ("10.0.0.2", 41000), "Connection refused")[:72]
    'executor on host worker-1 cannot reach the JobMaster at 10.0.0.2:41000 ('
    """
    return (
        f"executor on host {executor_host} cannot reach the JobMaster at "
        f"{address[0]}:{address[1]} ({reason}); set {RPC_ADVERTISED_KEY} (and {RPC_BIND_KEY}) "
        f"to an address the executors can reach"
    )


class RpcClient:
    """A task's connection to the JobMaster. Posts RpcReceived(message) and RpcLost().

    Connecting, authenticating and being admitted take at most `timeout_s`. When nothing
    answers at the address (refused, timed out, no route) a JobMasterUnreachableError
    names the executor's host, the address and the settings to fix; any other set-up
    failure is a ConnectionSetupError naming the address and what went wrong.
    """

    def __init__(
        self,
        address: tuple[str, int],
        secret: bytes,
        post: Callable[[Any], None],
        *,
        job_id: str | None = None,
        timeout_s: float = handshake.HANDSHAKE_TIMEOUT_S,
        executor_host: str | None = None,
    ) -> None:
        host, port = address
        try:
            self._conn = handshake.connect(
                (host, port), secret, _encode_hello(job_id), timeout_s=timeout_s
            )
        except handshake.Unreachable as unreachable:
            where = executor_host or socket.gethostname()
            raise JobMasterUnreachableError(
                unreachable_message(where, (host, port), unreachable.reason)
            ) from None
        except handshake.Refused as refusal:
            raise ConnectionSetupError(
                f"the JobMaster at {host}:{port} refused this task: {refusal}"
            ) from None
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
        """Post each message; on any end post RpcLost, so the task never waits on a dead
        reader (an unexpected error is logged once, with its traceback)."""
        try:
            while True:
                self._post(RpcReceived(self._conn.recv()))
        except (EOFError, OSError, TypeError):  # TypeError: closed by this task meanwhile
            pass
        except Exception:  # an unreadable message, a bug: the connection is lost to the task
            log.error("RPC reader of the JobMaster connection failed; the connection counts "
                      "as lost", exc_info=True)  # fmt: skip
            close_connection(self._conn)
        self._post(RpcLost())
