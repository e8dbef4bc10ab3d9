"""What the REST endpoint gives a stranger (issue 21): no credentials in any URI it serves,
nothing to a page of another site whose name resolves to the endpoint (DNS rebinding), and
no thread per connection without bound."""

from __future__ import annotations

import http.client
import socket
import time
from dataclasses import replace

import pytest
from test_rest import JOB_ID, job_view, tracker_with_checkpoints

from barrierflow.cluster.jobmaster.views import FailureEntry
from barrierflow.cluster.rest import server as rest
from barrierflow.cluster.rest.actions import JobControl
from barrierflow.cluster.rest.server import RestServer, route

CONTROL = JobControl(object(), "t")  # type: ignore[arg-type]  # reads only
SECRETS = ("AKIAKEY", "s3cr3t", "hunter2")


def leaky_view():
    view = job_view(tracker_with_checkpoints())
    return replace(
        view,
        config={"storage": {"checkpoints": "s3://b/jobs?access_key=AKIAKEY&secret_key=s3cr3t"}},
        checkpoint_config={"checkpoint_storage": "s3a://AKIAKEY:s3cr3t@bucket/jobs"},
        exceptions=(FailureEntry(1, 0, "cannot read ftp://admin:hunter2@host/chk-3/_metadata"),),
    )


@pytest.mark.parametrize("path", ["/config", "/checkpoints/config", "/exceptions"])
def test_no_uri_served_carries_its_credentials(path):
    status, body = route(
        leaky_view(), f"/jobs/{JOB_ID}{path}", authorization="Bearer t", control=CONTROL
    )
    assert status == 200
    assert not [s for s in SECRETS if s in str(body)], body
    assert "***" in str(body)


def request(server: RestServer, path: str, host: str | None) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection(*server.address, timeout=10)
    try:
        connection.putrequest("GET", path, skip_host=True)
        if host is not None:
            connection.putheader("Host", host)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@pytest.fixture
def served():
    server = RestServer("127.0.0.1", 0, lambda: job_view(tracker_with_checkpoints()), CONTROL)
    yield server
    server.close()


@pytest.mark.parametrize("path", ["/", "/overview", f"/jobs/{JOB_ID}", "/metrics"])
def test_a_host_that_is_not_this_endpoint_is_refused(served, path):
    port = served.address[1]
    status, body = request(served, path, f"rebound.example:{port}")
    assert status == 421 and b"rebound.example" in body
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LocalHost:{port}"):
        assert request(served, path, host)[0] == 200, host


def test_connections_beyond_the_limit_are_closed_at_once_with_a_line(monkeypatch, caplog):
    monkeypatch.setattr(rest, "MAX_CONNECTIONS", 2)
    server = RestServer("127.0.0.1", 0, lambda: job_view(tracker_with_checkpoints()))
    try:
        silent = [socket.create_connection(server.address, timeout=10) for _ in range(2)]
        extra = socket.create_connection(server.address, timeout=10)
        assert extra.recv(1024) == b""  # closed before it sent a byte
        extra.close()
        assert any("closed a connection" in r.message for r in caplog.records)
        for sock in silent:
            sock.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the two slots come back as their threads end
            try:
                if request(server, "/overview", None)[0] == 200:
                    break
            except (ConnectionError, http.client.HTTPException):
                time.sleep(0.05)  # polling the server's state, bounded
        else:
            pytest.fail("the endpoint never served again after the silent connections closed")
    finally:
        server.close()


def test_a_silent_connection_holds_its_thread_no_longer_than_the_request_timeout(monkeypatch):
    monkeypatch.setattr(rest, "REQUEST_TIMEOUT_S", 0.3)
    monkeypatch.setattr(rest._Handler, "timeout", 0.3)
    server = RestServer("127.0.0.1", 0, lambda: job_view(tracker_with_checkpoints()))
    try:
        with socket.create_connection(server.address, timeout=10) as silent:
            assert silent.recv(1024) == b""  # the server gave up on it
    finally:
        server.close()


_ANSWER_AS_THE_PROCESS_ENDS = """
import sys, threading, time
from barrierflow.cluster.rest.server import RestServer

entered, release = threading.Event(), threading.Event()

def view():
    entered.set()
    release.wait()
    time.sleep(0.5)  # a slow answer, still being written when close() is called
    return None

server = RestServer("127.0.0.1", 0, view)
print(server.address[1], flush=True)
entered.wait()
release.set()
server.close()
sys.exit(0)  # the handler threads are daemons: an unfinished answer dies here
"""


def test_an_answer_being_written_when_the_endpoint_closes_reaches_its_client():
    # issue 22's clean run: a stop's result was read just as the job ended, and the driver
    # process exited before the answer was written ("Remote end closed connection").
    import subprocess
    import sys
    import urllib.error
    import urllib.request

    child = subprocess.Popen(
        [sys.executable, "-c", _ANSWER_AS_THE_PROCESS_ENDS], stdout=subprocess.PIPE, text=True
    )
    try:
        port = int(child.stdout.readline())
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/jobs", timeout=30)
        assert answer.value.code == 503  # no job view yet: a whole answer, not a cut connection
    finally:
        child.wait(timeout=30)
