"""TCP channels between tasks, with credit-based flow control.

Every connection is set up by `handshake`: it first proves it knows the job's
secret (an HMAC challenge both ways, before anything is unpickled), then says
which job, attempt, edge and subtasks it connects; a receiver refuses any job or
attempt but its own, so a zombie of an earlier deployment can never feed a newer
one. Each step is bounded and each connection is set up on its own thread.

Helper threads only move bytes: they read frames and put them in the task's
mailbox. Everything else happens on the mailbox thread.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from multiprocessing.connection import Connection

import msgpack

from barrierflow.errors import StreamCorruptionError
from barrierflow.runtime.channel_state import is_buffer_frame, is_channel_state_frame
from barrierflow.runtime.mails import (
    ChannelConnected,
    CreditReceived,
    InputChannelLost,
    InputFailed,
    InputReceived,
    OutputChannelLost,
    OutputFailed,
    Post,
)
from barrierflow.runtime.network import codec, handshake
from barrierflow.runtime.network.connections import close_connection

log = logging.getLogger(__name__)

INITIAL_CREDIT = 8
"""Buffers a receiver can hold per channel; the sender queues the rest."""


@dataclass(frozen=True)
class ChannelHello:
    """What a sender says right after authenticating."""

    job_id: str
    attempt: int
    edge_id: int
    sender: tuple[int, int]
    receiver: tuple[int, int]

    def encode(self) -> bytes:
        return msgpack.packb(
            [self.job_id, self.attempt, self.edge_id, list(self.sender), list(self.receiver)]
        )

    @staticmethod
    def decode(data: bytes) -> ChannelHello:
        job_id, attempt, edge_id, sender, receiver = msgpack.unpackb(data)
        return ChannelHello(job_id, attempt, edge_id, tuple(sender), tuple(receiver))


class DataServer:
    """Accepts the input channels of one task (helper threads), refusing strangers.

    Each connection is set up by `handshake.Acceptor`: bounded, on its own thread, and
    admitted only for this job and attempt and a channel not yet connected. Closing the
    server ends its threads and closes every channel it admitted.
    """

    def __init__(
        self,
        host: str,
        secret: bytes,
        job_id: str,
        attempt: int,
        receiver: tuple[int, int],
        channel_index: dict[tuple[int, tuple[int, int]], int],
        post: Post,
        *,
        handshake_timeout_s: float = handshake.HANDSHAKE_TIMEOUT_S,
    ) -> None:
        self._job_id = job_id
        self._attempt = attempt
        self._receiver = receiver
        self._channel_index = channel_index
        self._lock = threading.Lock()
        self._connected: set[int] = set()
        self._post = post
        self._acceptor = handshake.Acceptor(
            host, secret, self._admit, name="channel", timeout_s=handshake_timeout_s
        )

    @property
    def address(self) -> tuple[str, int]:
        return self._acceptor.address

    def start(self) -> None:
        self._acceptor.start()

    def close(self) -> None:
        """Stop accepting, end every handshake and close every admitted channel."""
        self._acceptor.close()

    def _admit(self, data: bytes) -> handshake.Admitted:
        """Handshake threads: admit a channel of this job and attempt, once."""
        try:
            hello = ChannelHello.decode(data)
        except Exception:
            raise handshake.Refused("not a channel hello") from None
        channel = self._channel_index.get((hello.edge_id, hello.sender))
        with self._lock:
            if hello.job_id != self._job_id:
                problem = f"a channel of job {hello.job_id}, this task runs job {self._job_id}"
            elif hello.attempt != self._attempt:
                problem = f"attempt {hello.attempt}, this task runs attempt {self._attempt}"
            elif hello.receiver != self._receiver or channel is None:
                problem = f"unexpected channel {hello}"
            elif channel in self._connected:
                problem = f"channel {channel} is already connected"
            else:
                self._connected.add(channel)
                return functools.partial(self._start_channel, channel)
        raise handshake.Refused(problem)

    def _start_channel(self, channel: int, conn: Connection) -> None:
        conn.send_bytes(codec.encode_credit(INITIAL_CREDIT))
        self._post(ChannelConnected(self._attempt, channel, conn))
        threading.Thread(
            target=_read_frames,
            args=(conn, self._attempt, channel, self._post),
            name=f"channel-in-{channel}",
            daemon=True,
        ).start()


def _read_frames(conn: Connection, attempt: int, channel: int, post: Post) -> None:
    """Posts InputReceived with the decoded element and its raw bytes, which an unaligned
    checkpoint persists as channel state without encoding them again; InputChannelLost or
    InputFailed (logged once, with its traceback) when it ends."""
    try:
        while True:
            frame = conn.recv_bytes()
            post(InputReceived(attempt, channel, codec.decode(frame), frame))
    except (EOFError, OSError):
        post(InputChannelLost(attempt, channel))
    except Exception as error:
        log.error("reader of input channel %d failed", channel, exc_info=True)
        close_connection(conn)
        post(InputFailed(attempt, channel, error))


def connect_output(
    address: tuple[str, int],
    secret: bytes,
    hello: ChannelHello,
    index: int,
    post: Post,
    *,
    timeout_s: float = handshake.HANDSHAKE_TIMEOUT_S,
) -> Connection:
    """Open the channel to one downstream subtask; credit arrives as mails.

    Set-up takes at most `timeout_s`, else a ConnectionSetupError names the address; a
    downstream that refuses the hello (another attempt) raises StreamCorruptionError.
    """
    host, port = address
    try:
        conn = handshake.connect((host, port), secret, hello.encode(), timeout_s=timeout_s)
    except handshake.Refused as refusal:
        raise StreamCorruptionError(
            f"downstream {host}:{port} refused the channel: {refusal}"
        ) from None

    def read_credit() -> None:
        """Post each credit; on any end post a mail, so the task never waits on a dead
        reader: the channel lost, or (an unreadable credit, a bug) OutputFailed, logged once
        with its traceback."""
        try:
            while True:
                credit = codec.decode_credit(conn.recv_bytes(64))
                post(CreditReceived(hello.attempt, index, credit))
        except (EOFError, OSError, TypeError):  # TypeError: this task closed it meanwhile
            post(OutputChannelLost(hello.attempt, index))
        except Exception as error:
            log.error("credit reader of output channel %d failed", index, exc_info=True)
            close_connection(conn)
            post(OutputFailed(hello.attempt, index, error))

    threading.Thread(target=read_credit, name=f"channel-out-{index}", daemon=True).start()
    return conn


class OutputChannel:
    """The sending end of one channel: writes only with credit, queues the rest in order.

    Mailbox thread only. Events need no credit but never overtake queued buffers, except a
    priority event (the barrier of an unaligned checkpoint), which overtakes them all.
    `bytes_sent` counts every frame handed to the channel (sent or queued), for the metrics.
    """

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self.credit = 0
        self.bytes_sent = 0
        self._queue: deque[tuple[bool, bytes]] = deque()

    @property
    def backlog(self) -> int:
        return len(self._queue)

    def send_buffer(self, frame: bytes) -> None:
        self.bytes_sent += len(frame)
        if self.credit > 0 and not self._queue:
            self.credit -= 1
            self._conn.send_bytes(frame)
        else:
            self._queue.append((True, frame))

    def send_event(self, frame: bytes) -> None:
        self.bytes_sent += len(frame)
        if self._queue:
            self._queue.append((False, frame))
        else:
            self._conn.send_bytes(frame)

    def send_priority_event(self, frame: bytes) -> list[bytes]:
        """Write `frame` now, ahead of everything queued; return the queued frames it overtook
        that belong to the checkpoint's output channel state, oldest first.

        Flink's unaligned barrier: it needs no credit and overtakes every buffer waiting here.
        The overtaken frames stay queued and are still sent afterwards, in their order, as
        credit allows. The semantics are exact because of where they end up:

        - upstream (this task), they were produced before the snapshot, so the restored
          operator state will not produce them again;
        - downstream, they arrive after the barrier, so the downstream snapshot and input
          channel state of this checkpoint do not contain them either.

        So they are in flight across the checkpoint: the task persists the returned frames as
        this channel's output channel state, and a task restored from the checkpoint re-sends
        them on this channel before any new output (`send_recovered`). Sending them now too
        is no duplicate: a run that goes on delivers them once, now; a run restored from the
        checkpoint delivers them once, re-sent, after the downstream's restored state.

        Returned are the stream frames only: record batches, and watermarks or stream status
        queued as events. Barriers and cancellation markers of older checkpoints queued here
        are overtaken too but are not state (`channel_state.is_channel_state_frame`). Flush
        the partly filled record buffers first, so that they are either sent or overtaken.
        """
        overtaken = [queued for _, queued in self._queue if is_channel_state_frame(queued)]
        self.bytes_sent += len(frame)
        self._conn.send_bytes(frame)
        return overtaken

    def send_recovered(self, frames: Iterable[bytes]) -> None:
        """Re-send this channel's recovered output channel state, in order, before any new
        output: record batches as buffers (under credit), other stream frames as events."""
        for frame in frames:
            if is_buffer_frame(frame):
                self.send_buffer(frame)
            else:
                self.send_event(frame)

    def add_credit(self, buffers: int) -> None:
        self.credit += buffers
        queue = self._queue
        while queue:
            is_buffer, frame = queue[0]
            if is_buffer:
                if self.credit == 0:
                    return
                self.credit -= 1
            queue.popleft()
            self._conn.send_bytes(frame)

    def close(self) -> None:
        close_connection(self._conn)
