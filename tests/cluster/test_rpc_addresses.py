"""A task that cannot reach the JobMaster fails fast with one line naming the fix; and the
per-job secret guards every endpoint on a non-loopback or wildcard bind as on loopback."""

from __future__ import annotations

import queue
import socket
import time

import pytest

from barrierflow.cluster.addresses import RPC_ADVERTISED_KEY, RPC_BIND_KEY
from barrierflow.cluster.mails import TaskMessageReceived
from barrierflow.cluster.rpc import RpcClient, RpcServer
from barrierflow.errors import ConnectionSetupError, JobMasterUnreachableError
from barrierflow.runtime.network import handshake
from barrierflow.runtime.network.channels import ChannelHello, DataServer, connect_output

SECRET = b"k" * 32
BOUND_S = 5.0


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on (bound once, then closed)."""
    with socket.create_server((host, 0)) as sock:
        return sock.getsockname()[1]


def non_loopback_address() -> str | None:
    """An IPv4 address of this machine other than loopback, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks a route
            address = probe.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def test_a_refused_connection_names_the_executor_the_address_and_the_settings():
    port = free_port()
    started = time.monotonic()
    with pytest.raises(JobMasterUnreachableError) as raised:
        RpcClient(("127.0.0.1", port), SECRET, lambda mail: None, executor_host="worker-7")
    assert time.monotonic() - started < BOUND_S
    message = str(raised.value)
    assert message.startswith(
        f"executor on host worker-7 cannot reach the JobMaster at 127.0.0.1:{port} ("
    )
    assert "refused" in message.lower()
    assert f"set {RPC_ADVERTISED_KEY} (and {RPC_BIND_KEY}) to an address the executors" in message
    assert "\n" not in message
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_a_loopback_address_the_server_does_not_bind_is_refused_fast():
    # what the e2e test relies on: the JobMaster binds 127.0.0.1, a task is told 127.0.0.2
    server = RpcServer("127.0.0.1", SECRET, lambda mail: None)
    try:
        started = time.monotonic()
        with pytest.raises(JobMasterUnreachableError, match=r"at 127\.0\.0\.2:"):
            RpcClient(("127.0.0.2", server.address[1]), SECRET, lambda mail: None)
        assert time.monotonic() - started < BOUND_S
    finally:
        server.close()


def test_no_answer_within_the_timeout_is_unreachable_and_bounded(monkeypatch):
    def never_answers(address, timeout):
        raise TimeoutError("timed out")

    monkeypatch.setattr(handshake.socket, "create_connection", never_answers)
    with pytest.raises(JobMasterUnreachableError, match=r"\(no answer within 0.5 s\); set"):
        RpcClient(("10.0.0.1", 4000), SECRET, lambda mail: None, timeout_s=0.5)


def test_without_a_host_the_message_names_this_machine():
    with pytest.raises(JobMasterUnreachableError, match=f"on host {socket.gethostname()} "):
        RpcClient(("127.0.0.1", free_port()), SECRET, lambda mail: None)


def test_a_server_that_answers_but_refuses_is_no_unreachable_error():
    # an endpoint of another job on the advertised port: reachable, so not the address fix
    server = RpcServer("127.0.0.1", b"other" * 8, lambda mail: None)
    try:
        with pytest.raises(ConnectionSetupError) as raised:
            RpcClient(server.address, SECRET, lambda mail: None)
        assert not isinstance(raised.value, JobMasterUnreachableError)
    finally:
        server.close()


# ---- the secret on every bind ------------------------------------------------------------------


def test_the_rpc_endpoint_on_a_non_loopback_address_admits_only_the_job_s_secret():
    address = non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    mailbox: queue.SimpleQueue = queue.SimpleQueue()
    server = RpcServer(address, SECRET, mailbox.put, job_id="job")
    try:
        assert server.address[0] == address
        with pytest.raises(ConnectionSetupError, match="authentication"):
            RpcClient(server.address, b"wrong" * 8, lambda mail: None, job_id="job")
        with pytest.raises(queue.Empty):
            mailbox.get(timeout=0.3)
        client = RpcClient(server.address, SECRET, lambda mail: None, job_id="job")
        client.send("hello")
        mail = mailbox.get(timeout=BOUND_S)
        assert isinstance(mail, TaskMessageReceived) and mail.message == "hello"
        client.close()
    finally:
        server.close()


def test_a_data_server_on_a_wildcard_admits_only_the_job_s_secret():
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    server = DataServer("0.0.0.0", SECRET, "job", 0, (1, 0), {(0, (0, 0)): 0}, inbox.put)
    server.start()
    try:
        assert server.address[0] == "0.0.0.0"
        target = (non_loopback_address() or "127.0.0.1", server.address[1])
        hello = ChannelHello("job", 0, 0, (0, 0), (1, 0))
        with pytest.raises(ConnectionSetupError, match="authentication"):
            connect_output(target, b"wrong" * 8, hello, 0, lambda mail: None)
        conn = connect_output(target, SECRET, hello, 0, lambda mail: None)
        conn.close()
    finally:
        server.close()
