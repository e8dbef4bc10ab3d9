"""Misbehaving peers on real loopback sockets, for connection set-up tests."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from support.waiting import BOUND_S


def stalled_peer(address: tuple[str, int]) -> socket.socket:
    """Connects and then never says anything (a task frozen mid-handshake)."""
    return socket.create_connection(address, timeout=BOUND_S)


def read_until_closed(sock: socket.socket, timeout: float = BOUND_S) -> bytes:
    """Everything the server sends until it closes the connection; fails if it never does."""
    sock.settimeout(timeout)
    received = b""
    try:
        while chunk := sock.recv(4096):
            received += chunk
    except ConnectionResetError:
        pass
    except TimeoutError:
        raise AssertionError(f"the server kept the connection open for {timeout} s") from None
    return received


@contextmanager
def silent_server() -> Iterator[tuple[str, int]]:
    """An address whose kernel completes the TCP handshake but which never answers."""
    with socket.create_server(("127.0.0.1", 0), backlog=8) as listener:
        yield listener.getsockname()[:2]


def threads_started_since(before: set[threading.Thread], *prefixes: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t not in before and t.name.startswith(prefixes)]


def all_ended(threads: list[threading.Thread], timeout: float = BOUND_S) -> bool:
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return not any(t.is_alive() for t in threads)
