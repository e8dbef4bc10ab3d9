"""Setting up data channels cannot hang: bounded, concurrent, fenced and leak-free.

Regression tests for issue 10 ("connection set-up that cannot hang"): the data
server authenticated every peer inline on its one accept thread with no timeout,
so one stalled peer blocked every other channel, and closing it left its accepted
channels open.
"""

from __future__ import annotations

import logging
import queue
import re
import threading

import pytest
from peers import read_until_closed, silent_server, stalled_peer, threads_started_since
from support.waiting import BOUND_S, run_bounded, wait_for

from barrierflow.errors import ConnectionSetupError, StreamCorruptionError
from barrierflow.runtime.mails import ChannelConnected, CreditReceived, OutputChannelLost
from barrierflow.runtime.network.channels import ChannelHello, DataServer, connect_output

SECRET = b"s" * 32
HANDSHAKE_LOGGER = "barrierflow.runtime.network.handshake"


def data_server(mailbox: queue.SimpleQueue, **options) -> DataServer:
    server = DataServer(
        "127.0.0.1",
        SECRET,
        "job",
        3,
        (1, 0),
        {(0, (0, 0)): 0, (0, (0, 1)): 1},
        mailbox.put,
        **options,
    )
    server.start()
    return server


def hello(attempt=3, sender=(0, 0), job="job"):
    return ChannelHello(job, attempt, 0, sender, (1, 0))


def next_mail(mailbox, kind):
    while True:
        mail = mailbox.get(timeout=BOUND_S)
        if isinstance(mail, kind):
            return mail


def quiet(records) -> bool:
    """No traceback anywhere: every refusal is one readable line."""
    return all(record.exc_info is None for record in records)


def test_a_peer_that_never_answers_the_challenge_does_not_delay_a_valid_channel():
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    # A handshake timeout far beyond the bound: only concurrency can let the valid peer in.
    server = data_server(inbox, handshake_timeout_s=60)
    try:
        with stalled_peer(server.address):
            credits: queue.SimpleQueue = queue.SimpleQueue()
            run_bounded(lambda: connect_output(server.address, SECRET, hello(), 0, credits.put))
            assert credits.get(timeout=BOUND_S) == CreditReceived(3, 0, 8)
            assert next_mail(inbox, ChannelConnected).channel == 0
    finally:
        server.close()


def test_a_stalled_peer_is_dropped_after_the_handshake_timeout_with_one_line(caplog):
    caplog.set_level(logging.INFO, logger=HANDSHAKE_LOGGER)
    server = data_server(queue.SimpleQueue(), handshake_timeout_s=0.2)
    try:
        with stalled_peer(server.address) as peer:
            read_until_closed(peer)
        assert wait_for(lambda: any("no answer in time" in r.message for r in caplog.records))
        assert len(caplog.records) == 1 and quiet(caplog.records)
    finally:
        server.close()


def test_a_peer_with_another_secret_is_refused_quietly_and_the_server_keeps_serving(caplog):
    caplog.set_level(logging.INFO, logger=HANDSHAKE_LOGGER)
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    server = data_server(inbox)
    try:
        host, port = server.address
        with pytest.raises(ConnectionSetupError, match=re.escape(f"{host}:{port}")):
            connect_output(server.address, b"other job" * 4, hello(), 0, lambda mail: None)
        assert wait_for(lambda: any("authentication" in r.message for r in caplog.records))
        assert quiet(caplog.records)
        connect_output(server.address, SECRET, hello(), 0, lambda mail: None)
        assert next_mail(inbox, ChannelConnected).channel == 0
    finally:
        server.close()


@pytest.mark.parametrize(
    ("stranger", "reason"),
    [(hello(job="old-job"), "job old-job"), (hello(attempt=2), "attempt 2")],
    ids=["another job", "another attempt"],
)
def test_a_channel_of_another_job_or_attempt_is_refused_by_number(caplog, stranger, reason):
    caplog.set_level(logging.INFO, logger=HANDSHAKE_LOGGER)
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    server = data_server(inbox)
    try:
        with pytest.raises(StreamCorruptionError, match=reason):
            connect_output(server.address, SECRET, stranger, 0, lambda mail: None)
        assert wait_for(lambda: any(reason in r.message for r in caplog.records))
        assert quiet(caplog.records)
        connect_output(server.address, SECRET, hello(), 0, lambda mail: None)
        assert next_mail(inbox, ChannelConnected).channel == 0
    finally:
        server.close()


def test_connecting_to_a_peer_that_never_answers_fails_within_the_deadline_naming_it():
    with (
        silent_server() as (host, port),
        pytest.raises(ConnectionSetupError, match=re.escape(f"{host}:{port}")),
    ):
        run_bounded(
            lambda: connect_output((host, port), SECRET, hello(), 0, lambda m: None, timeout_s=0.2)
        )


def test_closing_the_server_ends_its_threads_and_every_channel_at_once():
    before = set(threading.enumerate())
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    server = data_server(inbox, handshake_timeout_s=60)
    lost: queue.SimpleQueue = queue.SimpleQueue()
    connect_output(server.address, SECRET, hello(), 0, lost.put)
    assert next_mail(inbox, ChannelConnected).channel == 0
    with stalled_peer(server.address) as peer:
        assert wait_for(lambda: threads_started_since(before, "channel-handshake"))
        server.close()
        assert threads_started_since(before, "channel-accept", "channel-handshake") == []
        read_until_closed(peer)  # the stalled handshake ended with the server
    assert next_mail(lost, OutputChannelLost) == OutputChannelLost(3, 0)
    assert wait_for(lambda: threads_started_since(before, "channel-") == [])


def test_connections_beyond_the_pending_set_ups_are_closed_at_once_with_a_line(caplog):
    # issue 21: every incoming connection got a thread before it authenticated, without bound
    from barrierflow.runtime.network import handshake

    caplog.set_level(logging.WARNING, logger=HANDSHAKE_LOGGER)
    admitted: queue.SimpleQueue = queue.SimpleQueue()
    acceptor = handshake.Acceptor(
        "127.0.0.1",
        SECRET,
        lambda hello: admitted.put,
        name="limited",
        timeout_s=60,
        max_pending=2,
    )
    acceptor.start()
    try:
        with stalled_peer(acceptor.address), stalled_peer(acceptor.address):
            assert wait_for(lambda: len(acceptor._handshakes) == 2)
            with stalled_peer(acceptor.address) as third:
                assert read_until_closed(third) == b""  # closed at once: no challenge even
            lines = [r.message for r in caplog.records if "at once" in r.message]
            assert len(lines) == 1 and "2 set-ups under way" in lines[0], lines
        assert wait_for(lambda: not acceptor._handshakes)
        conn = run_bounded(lambda: handshake.connect(acceptor.address, SECRET, b"hi"))
        assert admitted.get(timeout=BOUND_S) is not None  # room again once they ended
        conn.close()
    finally:
        acceptor.close()
