"""Closing a connection so that its peer, and a reader thread blocked on it, notice at once.

Closing a socket's file descriptor does not wake a thread blocked in `recv` on
it, and the peer sees no end of stream while that read is pending. Shutting the
socket down first ends both, so a cancelled task or a closed channel is noticed
on the other side immediately.
"""

from __future__ import annotations

import contextlib
import socket
from multiprocessing.connection import Connection


def close_connection(conn: Connection) -> None:
    """Shut down and close; safe to call twice and on a connection the peer already closed."""
    with (
        contextlib.suppress(OSError, ValueError),
        socket.socket(fileno=socket.dup(conn.fileno())) as sock,
    ):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        conn.close()
