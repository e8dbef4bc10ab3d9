"""The JobMaster's RPC endpoint: only peers that know the job's secret get to send messages."""

from __future__ import annotations

import queue

import pytest

from barrierflow.cluster.mails import TaskConnectionLost, TaskMessageReceived
from barrierflow.cluster.rpc import RpcClient, RpcServer
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
