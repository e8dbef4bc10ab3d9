"""Channels over real loopback sockets: authentication, attempt fencing, credit, order."""

from __future__ import annotations

import queue

import pytest

from barrierflow.errors import StreamCorruptionError
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.elements import CheckpointBarrier
from barrierflow.runtime.mails import (
    ChannelConnected,
    CreditReceived,
    InputFailed,
    InputReceived,
    OutputFailed,
)
from barrierflow.runtime.network import codec
from barrierflow.runtime.network.channels import (
    INITIAL_CREDIT,
    ChannelHello,
    DataServer,
    OutputChannel,
    connect_output,
)

SECRET = b"s" * 32


@pytest.fixture
def receiver():
    mailbox: queue.SimpleQueue = queue.SimpleQueue()
    server = DataServer(
        "127.0.0.1", SECRET, "job", 3, (1, 0), {(0, (0, 0)): 0, (0, (0, 1)): 1}, mailbox.put
    )
    server.start()
    yield server, mailbox
    server.close()


def hello(attempt=3, sender=(0, 0), job="job"):
    return ChannelHello(job, attempt, 0, sender, (1, 0))


def next_mail(mailbox, kind):
    while True:
        mail = mailbox.get(timeout=5)
        if isinstance(mail, kind):
            return mail


def test_an_admitted_channel_receives_initial_credit_and_frames_in_order(receiver):
    server, inbox = receiver
    credits: queue.SimpleQueue = queue.SimpleQueue()
    conn = connect_output(server.address, SECRET, hello(), 0, credits.put)
    assert credits.get(timeout=5) == CreditReceived(3, 0, INITIAL_CREDIT)
    channel = OutputChannel(conn)
    channel.add_credit(INITIAL_CREDIT)
    channel.send_buffer(codec.encode_batch([1, 2]))
    channel.send_event(codec.encode_event(CheckpointBarrier(7, 99)))
    channel.send_buffer(codec.encode_batch([3]))
    assert next_mail(inbox, ChannelConnected).channel == 0
    received = [next_mail(inbox, InputReceived) for _ in range(3)]
    assert {(m.attempt, m.channel) for m in received} == {(3, 0)}
    assert [m.element for m in received] == [
        RecordBatch([1, 2]),
        CheckpointBarrier(7, 99),
        RecordBatch([3]),
    ]


def test_a_zombie_of_an_older_attempt_is_refused(receiver):
    server, inbox = receiver
    with pytest.raises(StreamCorruptionError, match="attempt 2"):
        connect_output(server.address, SECRET, hello(attempt=2), 0, lambda mail: None)
    with pytest.raises(queue.Empty):
        inbox.get(timeout=0.3)


def test_a_peer_without_the_job_secret_is_refused_before_anything_is_read(receiver):
    server, inbox = receiver
    with pytest.raises(Exception):  # noqa: B017 - AuthenticationError or a closed connection
        connect_output(server.address, b"wrong" * 8, hello(), 0, lambda mail: None)
    with pytest.raises(queue.Empty):
        inbox.get(timeout=0.3)


def test_the_same_channel_cannot_connect_twice(receiver):
    server, _ = receiver
    connect_output(server.address, SECRET, hello(), 0, lambda mail: None)
    with pytest.raises(StreamCorruptionError, match="already connected"):
        connect_output(server.address, SECRET, hello(), 0, lambda mail: None)


class _Recorder:
    def __init__(self):
        self.sent = []

    def send_bytes(self, frame):
        self.sent.append(frame)


def test_a_sender_without_credit_queues_buffers_and_events_behind_them():
    wire = _Recorder()
    channel = OutputChannel(wire)
    channel.send_buffer(b"D1")
    channel.send_event(b"B1")
    channel.send_buffer(b"D2")
    assert wire.sent == [] and channel.backlog == 3
    channel.add_credit(1)
    assert wire.sent == [b"D1", b"B1"]
    channel.add_credit(5)
    assert wire.sent == [b"D1", b"B1", b"D2"] and channel.credit == 4


def test_events_pass_immediately_when_nothing_is_queued():
    wire = _Recorder()
    channel = OutputChannel(wire)
    channel.send_event(b"B1")
    assert wire.sent == [b"B1"]


# ---- readers never die silently (issue 21): a malformed frame over a real socket pair -------


def test_a_malformed_credit_frame_fails_the_sender_with_one_logged_traceback(receiver, caplog):
    server, inbox = receiver
    credits: queue.SimpleQueue = queue.SimpleQueue()
    connect_output(server.address, SECRET, hello(), 0, credits.put)
    assert credits.get(timeout=5) == CreditReceived(3, 0, INITIAL_CREDIT)
    connected = next_mail(inbox, ChannelConnected)
    connected.connection.send_bytes(b"not a credit frame")
    failed = credits.get(timeout=5)
    assert isinstance(failed, OutputFailed) and (failed.attempt, failed.channel) == (3, 0)
    assert isinstance(failed.error, StreamCorruptionError)
    logged = [r for r in caplog.records if "credit reader of output channel 0" in r.message]
    assert len(logged) == 1 and logged[0].exc_info is not None


def test_a_malformed_data_frame_fails_the_receiver_with_one_logged_traceback(receiver, caplog):
    server, inbox = receiver
    credits: queue.SimpleQueue = queue.SimpleQueue()
    conn = connect_output(server.address, SECRET, hello(), 0, credits.put)
    next_mail(inbox, ChannelConnected)
    conn.send_bytes(b"\x7fgarbage")
    failed = next_mail(inbox, InputFailed)
    assert (failed.attempt, failed.channel) == (3, 0)
    logged = [r for r in caplog.records if "reader of input channel 0" in r.message]
    assert len(logged) == 1 and logged[0].exc_info is not None
