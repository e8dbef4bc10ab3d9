"""A fault-injecting S3 for tests: a loopback HTTP proxy in front of moto's server that
answers `503 SlowDown` to chosen requests and passes everything else through.

`S3FaultProxy(upstream).fail("GET", r"/chk-7/_metadata$", count=4)` makes the next four
GET requests whose path (with its query) matches the regex fail as S3 does when it throttles;
`uri(path)` spells a location through the proxy, so the driver and every Spark worker reach
the bucket through it. Each rule counts what it failed (`failed`), so a test can wait for a
fault to have happened and check it did. Standard library only (http.server, http.client);
it binds 127.0.0.1 only.

What reaches barrierflow (tests/test_s3_fault_proxy.py shows it): pyarrow's S3 client
retries a 503 SlowDown on its own, again and again, but for a GET of an object smaller
than the error body, where one 503 surfaces at once (the SDK writes the error body into
the read buffer: "AWS Error INTERNAL_FAILURE ... Failed to flush response stream"). A 403
AccessDenied (a permission fluke) is never retried by the client: it is how a test makes
a read, a DELETE or a copy fail in barrierflow's hands.
"""

from __future__ import annotations

import http.client
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from support.s3_server import S3Server

ANSWERS = {
    503: ("Slow Down", "SlowDown", "Please reduce your request rate."),
    403: ("Forbidden", "AccessDenied", "Access Denied"),
}
"""What a struck request gets, by status: reason, S3 error code, message."""


def error_body(status: int) -> bytes:
    _, code, message = ANSWERS[status]
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
        f"<Message>{message}</Message><RequestId>fault-proxy</RequestId></Error>"
    ).encode()


HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade"}


@dataclass
class Rule:
    """Fail `count` requests of `method` whose path matches `pattern`, from the `nth` on."""

    method: str
    pattern: re.Pattern[str]
    nth: int
    count: int
    status: int = 503
    seen: int = 0
    failed: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def strikes(self, method: str, path: str) -> bool:
        if method != self.method or not self.pattern.search(path):
            return False
        with self.lock:
            self.seen += 1
            if self.nth <= self.seen < self.nth + self.count:
                self.failed += 1
                return True
        return False


class S3FaultProxy:
    """The proxy; `close()` it when done (the fixture does)."""

    def __init__(self, upstream: S3Server) -> None:
        self.upstream = upstream
        self.rules: list[Rule] = []
        self.requests: list[tuple[str, str]] = []
        """(method, path) of every request seen, in order."""
        host, port = upstream.endpoint.rsplit(":", 1)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _handle(self) -> None:
                body = self._body()
                proxy.requests.append((self.command, self.path))
                struck = [r for r in list(proxy.rules) if r.strikes(self.command, self.path)]
                if struck:
                    body = error_body(struck[0].status)
                    self.send_response(struck[0].status, ANSWERS[struck[0].status][0])
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(body)
                    return
                connection = http.client.HTTPConnection(host, int(port), timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                    connection.request(self.command, self.path, body=body, headers=headers)
                    response = connection.getresponse()
                    data = response.read()
                    self.send_response(response.status, response.reason)
                    for name, value in response.getheaders():
                        if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                            self.send_header(name, value)
                    declared = response.getheader("Content-Length")
                    size = declared if self.command == "HEAD" and declared else str(len(data))
                    self.send_header("Content-Length", size)
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    connection.close()

            def _body(self) -> bytes:
                """The request's body, de-chunked (the SDK streams uploads chunked)."""
                if "chunked" not in self.headers.get("Transfer-Encoding", "").lower():
                    length = int(self.headers.get("Content-Length") or 0)
                    return self.rfile.read(length) if length else b""
                chunks = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass  # trailers
                        return b"".join(chunks)
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self._server.server_address[1]}"

    def uri(self, path: str) -> str:
        """`path` in the upstream's bucket, reached through the proxy."""
        plain = self.upstream.uri(path)
        return plain.replace(
            f"endpoint_override={self.upstream.endpoint}", f"endpoint_override={self.endpoint}"
        )

    def fail(
        self, method: str, pattern: str, nth: int = 1, count: int = 1, status: int = 503
    ) -> Rule:
        """Answer `status` (503 SlowDown, or 403 AccessDenied) to `count` requests of
        `method` whose path and query match the regex `pattern`, from its `nth` match on
        (matches count from now)."""
        rule = Rule(method, re.compile(pattern), nth, count, status)
        self.rules.append(rule)
        return rule

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def s3_faults(s3_server: S3Server) -> Iterator[S3FaultProxy]:
    """A fault proxy in front of the session's S3 server, for one test."""
    proxy = S3FaultProxy(s3_server)
    try:
        yield proxy
    finally:
        proxy.close()
