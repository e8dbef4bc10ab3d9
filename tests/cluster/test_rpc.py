"""The JobMaster's RPC endpoint: only peers that know the job's secret get to send messages."""

from __future__ import annotations

import logging
import queue
import re
import socket
import threading

import pytest
from support.waiting import BOUND_S, run_bounded, wait_for

from barrierflow.cluster.mails import TaskConnectionLost, TaskMessageReceived
from barrierflow.cluster.rpc import RpcClient, RpcServer
from barrierflow.errors import ConnectionSetupError
from barrierflow.runtime.mails import RpcLost, RpcReceived

SECRET = b"k" * 32


@pytest.fixture
def server():
    mailbox: queue.SimpleQueue = queue.SimpleQueue()
    endpoint = RpcServer("127.0.0.1", SECRET, mailbox.put)
    yield endpoint, mailbox
    endpoint.close()


def test_a_task_with_the_secret_reaches_the_jobmaster_and_hears_back(server):
    endpoint, mailbox = server
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    client = RpcClient(endpoint.address, SECRET, inbox.put)
    client.send(("hello", 1))
    mail = mailbox.get(timeout=5)
    assert isinstance(mail, TaskMessageReceived) and mail.message == ("hello", 1)
    mail.conn.send("deploy")
    assert inbox.get(timeout=5) == RpcReceived("deploy")
    client.close()
    lost = mailbox.get(timeout=5)
    assert isinstance(lost, TaskConnectionLost) and lost.conn is mail.conn
    assert endpoint.open_connections == 0


def test_closing_the_endpoint_closes_every_task_connection(server):
    # Regression (issue 9, defect 1): close() closed only the listener, so tasks ran on.
    endpoint, mailbox = server
    inboxes = [queue.SimpleQueue() for _ in range(3)]
    clients = [RpcClient(endpoint.address, SECRET, inbox.put) for inbox in inboxes]
    for index, client in enumerate(clients):
        client.send(index)
    for _ in clients:
        assert isinstance(mailbox.get(timeout=5), TaskMessageReceived)
    endpoint.close()
    for inbox in inboxes:
        assert inbox.get(timeout=5) == RpcLost()


def test_a_peer_without_the_secret_is_refused_before_any_message_is_read(server):
    endpoint, mailbox = server
    with pytest.raises(Exception):  # noqa: B017 - AuthenticationError or a reset connection
        RpcClient(endpoint.address, b"wrong" * 8, lambda mail: None).send("payload")
    with pytest.raises(queue.Empty):
        mailbox.get(timeout=0.3)


# ---- connection set-up that cannot hang (issue 10) -------------------------------------------
# The endpoint authenticated every task inline on its one accept thread with no timeout, so one
# stalled peer kept every other task waiting for its challenge, and close() left that thread
# blocked in accept().

HANDSHAKE_LOGGER = "barrierflow.runtime.network.handshake"


def new_threads(before, *prefixes):
    return [t for t in threading.enumerate() if t not in before and t.name.startswith(prefixes)]


def assert_closed_by_server(sock):
    sock.settimeout(BOUND_S)
    try:
        while sock.recv(4096):
            pass
    except ConnectionResetError:
        pass


def quiet(records) -> bool:
    return all(record.exc_info is None for record in records)


def round_trip(endpoint, mailbox) -> None:
    """A task connects, says hello, and hears back: the endpoint is serving."""
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    client = run_bounded(lambda: RpcClient(endpoint.address, SECRET, inbox.put, job_id="job"))
    client.send("hello")
    mail = mailbox.get(timeout=BOUND_S)
    assert isinstance(mail, TaskMessageReceived) and mail.message == "hello"
    mail.conn.send("ack")
    assert inbox.get(timeout=BOUND_S) == RpcReceived("ack")
    client.close()


def test_a_peer_that_never_answers_the_challenge_does_not_delay_another_task():
    mailbox: queue.SimpleQueue = queue.SimpleQueue()
    # A handshake timeout far beyond the bound: only concurrency can let the task in.
    endpoint = RpcServer("127.0.0.1", SECRET, mailbox.put, job_id="job", handshake_timeout_s=60)
    try:
        with socket.create_connection(endpoint.address):
            round_trip(endpoint, mailbox)
    finally:
        endpoint.close()


def test_a_stalled_peer_is_dropped_after_the_handshake_timeout_with_one_line(caplog):
    caplog.set_level(logging.INFO, logger=HANDSHAKE_LOGGER)
    endpoint = RpcServer("127.0.0.1", SECRET, lambda mail: None, handshake_timeout_s=0.2)
    try:
        with socket.create_connection(endpoint.address) as peer:
            assert_closed_by_server(peer)
        assert wait_for(lambda: any("no answer in time" in r.message for r in caplog.records))
        assert len(caplog.records) == 1 and quiet(caplog.records)
    finally:
        endpoint.close()


def test_a_task_of_another_job_with_its_own_secret_is_refused_quietly(caplog):
    caplog.set_level(logging.INFO, logger=HANDSHAKE_LOGGER)
    mailbox: queue.SimpleQueue = queue.SimpleQueue()
    endpoint = RpcServer("127.0.0.1", SECRET, mailbox.put, job_id="job")
    try:
        host, port = endpoint.address
        with pytest.raises(ConnectionSetupError, match=re.escape(f"{host}:{port}")):
            RpcClient(endpoint.address, b"old job" * 5, lambda mail: None, job_id="old")
        assert wait_for(lambda: any("authentication" in r.message for r in caplog.records))
        assert quiet(caplog.records)
        round_trip(endpoint, mailbox)
    finally:
        endpoint.close()


def test_a_task_naming_another_job_is_refused_at_once_by_its_id(caplog):
    caplog.set_level(logging.INFO, logger=HANDSHAKE_LOGGER)
    mailbox: queue.SimpleQueue = queue.SimpleQueue()
    endpoint = RpcServer("127.0.0.1", SECRET, mailbox.put, job_id="job")
    try:
        with pytest.raises(ConnectionSetupError, match="job old-job"):
            RpcClient(endpoint.address, SECRET, lambda mail: None, job_id="old-job")
        assert wait_for(lambda: any("job old-job" in r.message for r in caplog.records))
        assert quiet(caplog.records)
        with pytest.raises(queue.Empty):
            mailbox.get_nowait()
        round_trip(endpoint, mailbox)
    finally:
        endpoint.close()


def test_connecting_to_a_jobmaster_that_never_answers_fails_within_the_deadline_naming_it():
    with socket.create_server(("127.0.0.1", 0)) as silent:
        host, port = silent.getsockname()[:2]
        with pytest.raises(ConnectionSetupError, match=re.escape(f"{host}:{port}")):
            run_bounded(lambda: RpcClient((host, port), SECRET, lambda m: None, timeout_s=0.2))


def test_closing_the_endpoint_ends_its_threads_and_every_connection_at_once():
    before = set(threading.enumerate())
    mailbox: queue.SimpleQueue = queue.SimpleQueue()
    endpoint = RpcServer("127.0.0.1", SECRET, mailbox.put, handshake_timeout_s=60)
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    client = RpcClient(endpoint.address, SECRET, inbox.put)
    client.send("registered")
    assert isinstance(mailbox.get(timeout=BOUND_S), TaskMessageReceived)
    with socket.create_connection(endpoint.address) as stalled:
        assert wait_for(lambda: new_threads(before, "rpc-handshake"))
        endpoint.close()
        assert new_threads(before, "rpc-accept", "rpc-handshake") == []
        assert_closed_by_server(stalled)
    assert inbox.get(timeout=BOUND_S) == RpcLost()
    assert endpoint.open_connections == 0
    assert wait_for(lambda: new_threads(before, "rpc-") == [])


# ---- readers never die silently (issue 21): a malformed frame over a real socket pair -------


def test_a_malformed_frame_to_a_task_posts_rpc_lost_and_logs_one_traceback(server, caplog):
    endpoint, mailbox = server
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    client = RpcClient(endpoint.address, SECRET, inbox.put)
    client.send("hello")
    mail = mailbox.get(timeout=5)
    mail.conn.send_bytes(b"\x80\x05not a pickle")
    assert inbox.get(timeout=5) == RpcLost()
    logged = [r for r in caplog.records if "RPC reader of the JobMaster" in r.message]
    assert len(logged) == 1 and logged[0].exc_info is not None
    assert isinstance(mailbox.get(timeout=5), TaskConnectionLost)  # the task's end closed


def test_a_malformed_frame_to_the_jobmaster_loses_the_task_and_logs_one_traceback(server, caplog):
    endpoint, mailbox = server
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    client = RpcClient(endpoint.address, SECRET, inbox.put)
    client._conn.send_bytes(b"\x80\x05not a pickle")
    lost = mailbox.get(timeout=5)
    assert isinstance(lost, TaskConnectionLost)
    logged = [r for r in caplog.records if "RPC reader of a task connection" in r.message]
    assert len(logged) == 1 and logged[0].exc_info is not None
    assert inbox.get(timeout=5) == RpcLost()
    client.close()
