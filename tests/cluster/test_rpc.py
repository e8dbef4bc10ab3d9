"""The JobMaster's RPC endpoint: only peers that know the job's secret get to send messages."""

from __future__ import annotations

import queue

import pytest

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
    kind, conn, message = mailbox.get(timeout=5)
    assert (kind, message) == ("task_message", ("hello", 1))
    conn.send("deploy")
    assert inbox.get(timeout=5) == RpcReceived("deploy")
    client.close()
    assert mailbox.get(timeout=5)[0] == "task_lost"
    assert inbox.get(timeout=5) == RpcLost()


def test_a_peer_without_the_secret_is_refused_before_any_message_is_read(server):
    endpoint, mailbox = server
    with pytest.raises(Exception):  # noqa: B017 - AuthenticationError or a reset connection
        RpcClient(endpoint.address, b"wrong" * 8, lambda mail: None).send("payload")
    with pytest.raises(queue.Empty):
        mailbox.get(timeout=0.3)
