"""Connection set-up that cannot hang: bounded, concurrent, authenticated and fenced.

Every barrierflow connection (a task's RPC connection to the JobMaster, a data
channel between two tasks) is set up in the same steps, all within
`HANDSHAKE_TIMEOUT_S` on both ends:

1. mutual HMAC challenge over the job's secret, before anything is unpickled: the
   server proves nothing to a stranger and learns nothing from one;
2. the client's hello, saying which job (and attempt, edge, ...) it belongs to;
3. the server's answer: admitted, or refused with a readable reason.

Only then does the socket become a `multiprocessing.connection.Connection`. The
server side (`Acceptor`) accepts on one thread and runs each handshake on its own
short-lived thread, so a peer that stalls costs one thread for a few seconds and
delays no one; it is then dropped with one log line. A peer with another secret
(a late task of an earlier job reaching a reused port) is refused with one line,
never a traceback.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import os
import selectors
import socket
import struct
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection

from barrierflow._clock import SYSTEM_CLOCK, Clock
from barrierflow.errors import ConnectionSetupError
from barrierflow.runtime.network.connections import close_connection

log = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT_S = 5.0
"""How long one connection's set-up may take on either end: TCP connect, challenge both
ways, hello and answer. A peer that takes longer is dropped."""

_CLOSE_JOIN_S = 2.0
MAX_PENDING_HANDSHAKES = 256
"""Connections set up at once, each on its own thread, before they authenticated; one more
is closed at once (with a log line), so unauthenticated peers cannot spawn threads without
bound. Far above what a job's tasks open at once."""
"""How long `Acceptor.close` waits for its threads; they end at once, this only bounds it."""

_MAGIC = b"barrierflow-1"
_NONCE_BYTES = 32
_DIGEST_BYTES = hashlib.sha256().digest_size
_MAX_FRAME = 4096
_HEADER = struct.Struct("!i")  # the length prefix multiprocessing's Connection uses too
_OK = b"OK"
_NO = b"NO "

Admitted = Callable[[Connection], None]
"""What a server does with a connection it admitted (start its reader, post a mail)."""

Admit = Callable[[bytes], Admitted]
"""Decides on a client's hello: returns what to do once admitted, or raises `Refused`."""


class Refused(Exception):
    """The server refused the client's hello; the message is the reason, readable as is.

    Raised by a server's `Admit` function, and by `connect` on the client side.
    """


class Unreachable(ConnectionSetupError):
    """The TCP connection itself could not be opened in time (refused, timed out, no route,
    an unknown host): nothing answered at the address. `reason` says what happened."""

    def __init__(self, address: tuple[str, int], reason: str) -> None:
        super().__init__(f"cannot connect to {address[0]}:{address[1]}: {reason}")
        self.address = address
        self.reason = reason


class _Dropped(Exception):
    """A handshake that cannot go on: no answer in time, closed, or failed authentication."""


# ---- framing -------------------------------------------------------------------------------


def _wait_budget(sock: socket.socket, deadline: float, clock: Clock) -> None:
    remaining = deadline - clock.monotonic()
    if remaining <= 0:
        raise _Dropped("no answer in time")
    sock.settimeout(remaining)


def _recv_exact(sock: socket.socket, size: int, deadline: float, clock: Clock) -> bytes:
    """Exactly `size` bytes, never more: what follows the handshake stays in the socket."""
    data = bytearray()
    try:
        while len(data) < size:
            _wait_budget(sock, deadline, clock)
            chunk = sock.recv(size - len(data))
            if not chunk:
                raise _Dropped("the peer closed the connection")
            data += chunk
    except TimeoutError:
        raise _Dropped("no answer in time") from None
    except OSError as error:
        raise _Dropped(f"the connection broke ({error})") from None
    return bytes(data)


def _recv_frame(sock: socket.socket, deadline: float, clock: Clock) -> bytes:
    (size,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size, deadline, clock))
    if not 0 <= size <= _MAX_FRAME:
        raise _Dropped("not a barrierflow peer (unexpected frame)")
    return _recv_exact(sock, size, deadline, clock)


def _send_frame(sock: socket.socket, data: bytes, deadline: float, clock: Clock) -> None:
    try:
        _wait_budget(sock, deadline, clock)
        sock.sendall(_HEADER.pack(len(data)) + data)
    except TimeoutError:
        raise _Dropped("no answer in time") from None
    except OSError as error:
        raise _Dropped(f"the connection broke ({error})") from None


def _digest(secret: bytes, role: bytes, nonce: bytes) -> bytes:
    """Role-bound, so a digest one side sent can never be replayed as the other side's."""
    return hmac.new(secret, role + nonce, hashlib.sha256).digest()


def _as_connection(sock: socket.socket) -> Connection:
    sock.settimeout(None)  # Connection reads the descriptor directly: it must block
    return Connection(sock.detach())


# ---- client --------------------------------------------------------------------------------


def connect(
    address: tuple[str, int],
    secret: bytes,
    hello: bytes,
    *,
    timeout_s: float = HANDSHAKE_TIMEOUT_S,
    clock: Clock = SYSTEM_CLOCK,
) -> Connection:
    """Connect, authenticate both ways, say `hello`; the admitted connection within `timeout_s`.

    Raises `Refused` when the server refused the hello, `Unreachable` when nothing answered
    at the address, and `ConnectionSetupError` naming the address when the connection
    cannot be set up in time or either side fails authentication.
    """
    host, port = address
    deadline = clock.monotonic() + timeout_s
    try:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    except TimeoutError:
        raise Unreachable((host, port), f"no answer within {timeout_s:g} s") from None
    except OSError as error:
        raise Unreachable((host, port), error.strerror or str(error)) from None
    try:
        challenge = _recv_frame(sock, deadline, clock)
        if not challenge.startswith(_MAGIC) or len(challenge) != len(_MAGIC) + _NONCE_BYTES:
            raise _Dropped("the peer is not a barrierflow endpoint")
        nonce = os.urandom(_NONCE_BYTES)
        answer = _digest(secret, b"client", challenge[len(_MAGIC) :]) + nonce
        _send_frame(sock, answer, deadline, clock)
        proof = _recv_frame(sock, deadline, clock)
        if proof.startswith(_NO):
            raise _Dropped(f"refused: {proof[len(_NO) :].decode(errors='replace')}")
        if not hmac.compare_digest(proof, _OK + _digest(secret, b"server", nonce)):
            raise _Dropped("the peer failed authentication (it serves another job)")
        _send_frame(sock, hello, deadline, clock)
        verdict = _recv_frame(sock, deadline, clock)
        if verdict != _OK:
            raise Refused(verdict[len(_NO) :].decode(errors="replace"))
        return _as_connection(sock)
    except _Dropped as failure:
        sock.close()
        raise ConnectionSetupError(
            f"cannot set up the connection to {host}:{port}: {failure}"
        ) from None
    except BaseException:
        sock.close()
        raise


# ---- server --------------------------------------------------------------------------------


class Acceptor:
    """A listening socket whose connections are set up concurrently and within a bound.

    Accepts on one thread; authenticates each connection, reads its hello and asks
    `admit` on a short-lived thread of its own, so a stalled peer delays nobody and is
    dropped after `timeout_s` with one log line. At most `max_pending` set-ups run at once:
    a connection beyond them is closed at once, so peers that never authenticate cannot
    make threads without bound. `close` ends the accept thread and every
    handshake thread, and closes every admitted connection, before it returns.
    """

    def __init__(
        self,
        host: str,
        secret: bytes,
        admit: Admit,
        *,
        name: str,
        timeout_s: float = HANDSHAKE_TIMEOUT_S,
        clock: Clock = SYSTEM_CLOCK,
        max_pending: int = MAX_PENDING_HANDSHAKES,
    ) -> None:
        self._max_pending = max_pending
        self._turned_away = 0
        self._secret = secret
        self._admit = admit
        self._name = name
        self._timeout_s = timeout_s
        self._clock = clock
        self._listener = socket.create_server((host, 0), backlog=64)
        self._listener.setblocking(False)
        self._address: tuple[str, int] = self._listener.getsockname()[:2]
        self._wake_r, self._wake_w = socket.socketpair()
        self._lock = threading.Lock()
        self._closed = False
        self._handshakes: dict[socket.socket, threading.Thread] = {}
        self._connections: set[Connection] = set()
        self._thread = threading.Thread(
            target=self._accept_loop, name=f"{name}-accept", daemon=True
        )

    @property
    def address(self) -> tuple[str, int]:
        return self._address

    @property
    def open_connections(self) -> int:
        """How many admitted connections are not closed yet."""
        with self._lock:
            return sum(1 for conn in self._connections if not conn.closed)

    def start(self) -> None:
        self._thread.start()

    def forget(self, conn: Connection) -> None:
        """An admitted connection ended (its reader saw the end); close() need not close it."""
        with self._lock:
            self._connections.discard(conn)

    def close(self) -> None:
        """Stop accepting, end every handshake and close every admitted connection; bounded."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            handshakes = dict(self._handshakes)
            connections = list(self._connections)
            self._connections.clear()
        with contextlib.suppress(OSError):  # the accept thread already ended
            self._wake_w.send(b"x")
        for sock in handshakes:  # a handshake thread blocked in recv sees the end at once
            _shut_down(sock)
        for conn in connections:
            close_connection(conn)
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(_CLOSE_JOIN_S)
        elif not self._thread.is_alive():
            self._close_listener()
        for thread in handshakes.values():
            if thread is not threading.current_thread():
                thread.join(_CLOSE_JOIN_S)
        stuck = [t.name for t in [self._thread, *handshakes.values()] if t.is_alive()]
        if stuck and threading.current_thread().name not in stuck:
            log.warning("%s server: threads still running after close: %s", self._name, stuck)

    # ---- the accept thread -----------------------------------------------------------------

    def _accept_loop(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ)
        selector.register(self._wake_r, selectors.EVENT_READ)
        try:
            while not self._closed:
                selector.select()
                if self._closed:
                    return
                try:
                    sock, peer = self._listener.accept()
                except (BlockingIOError, InterruptedError):
                    continue  # the peer gave up before we accepted it
                except OSError as error:
                    if self._closed:
                        return
                    log.warning("%s server: accept failed: %s", self._name, error)
                    continue
                self._start_handshake(sock, peer)
        finally:
            selector.close()
            self._close_listener()

    def _close_listener(self) -> None:
        for sock in (self._listener, self._wake_r, self._wake_w):
            sock.close()

    def _start_handshake(self, sock: socket.socket, peer: tuple[str, int]) -> None:
        thread = threading.Thread(
            target=self._handshake, args=(sock, peer), name=f"{self._name}-handshake", daemon=True
        )
        with self._lock:  # started under the lock: close() only ever joins started threads
            if self._closed:
                sock.close()
                return
            if len(self._handshakes) < self._max_pending:
                self._handshakes[sock] = thread
                thread.start()
                return
            self._turned_away += 1
            turned_away = self._turned_away
        if turned_away == 1 or turned_away % 100 == 0:  # a flood logs a line per hundred
            log.warning("%s server closed a connection from %s:%s at once: %d set-ups under "
                        "way already (%d closed so far)", self._name, peer[0], peer[1],
                        self._max_pending, turned_away)  # fmt: skip
        sock.close()  # after the line: whoever sees the end may look for it

    # ---- one handshake thread per connection ------------------------------------------------

    def _handshake(self, sock: socket.socket, peer: tuple[str, int]) -> None:
        where = f"{peer[0]}:{peer[1]}"
        try:
            admitted = self._authenticate_and_admit(sock)
            with self._lock:  # close() either sees this connection or runs before it exists
                if self._closed:
                    return
                conn = _as_connection(sock)
                self._connections.add(conn)
                try:
                    admitted(conn)
                except Exception:
                    self._connections.discard(conn)
                    close_connection(conn)
                    raise
        except _Dropped as failure:
            if not self._closed:
                log.warning("%s server dropped %s: %s", self._name, where, failure)
        except Refused as refusal:
            log.info("%s server refused a connection from %s: %s", self._name, where, refusal)
        except Exception as error:  # an admitted connection whose start failed
            log.warning("%s server could not admit %s: %r", self._name, where, error)
        finally:
            with self._lock:
                self._handshakes.pop(sock, None)
            sock.close()  # a no-op once the socket became a Connection

    def _authenticate_and_admit(self, sock: socket.socket) -> Admitted:
        """Steps 1-3 of the module docstring; what to do with the connection once admitted."""
        deadline = self._clock.monotonic() + self._timeout_s
        clock, secret = self._clock, self._secret
        nonce = os.urandom(_NONCE_BYTES)
        _send_frame(sock, _MAGIC + nonce, deadline, clock)
        answer = _recv_frame(sock, deadline, clock)
        expected = _digest(secret, b"client", nonce)
        digest, client_nonce = answer[:_DIGEST_BYTES], answer[_DIGEST_BYTES:]
        if len(client_nonce) != _NONCE_BYTES or not hmac.compare_digest(digest, expected):
            _send_frame(sock, _NO + b"authentication failed", deadline, clock)
            raise _Dropped(
                "failed authentication: it does not hold this job's secret "
                "(a task of another job, or not a barrierflow peer)"
            )
        _send_frame(sock, _OK + _digest(secret, b"server", client_nonce), deadline, clock)
        hello = _recv_frame(sock, deadline, clock)
        try:
            admitted = self._admit(hello)
        except Refused as refusal:
            _send_frame(sock, _NO + str(refusal).encode(), deadline, clock)
            raise
        _send_frame(sock, _OK, deadline, clock)
        return admitted


def _shut_down(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed, or became a Connection meanwhile
        sock.shutdown(socket.SHUT_RDWR)
