"""An S3-compatible server for tests: moto's standalone server, one per test session.

`s3_server` starts `python -m moto.server` on 127.0.0.1 and a free port, waits (bounded)
until it answers, and creates a bucket. Its `uri(path)` is an `s3://` URI that pyarrow's
S3 filesystem resolves on its own, on the driver and in every Spark worker alike:
credentials in the user-info part and the endpoint in the query
(`s3://KEY:SECRET@bucket/path?endpoint_override=127.0.0.1:PORT&scheme=http&region=...`),
so no process needs AWS settings in its environment. Tests using it are skipped when
moto is not installed (`pip install 'moto[server]'`, in the `test` extras).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

ACCESS_KEY = "testing"
SECRET_KEY = "testing"
REGION = "us-east-1"
BUCKET = "barrierflow-tests"
START_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class S3Server:
    """A running S3-compatible server with one bucket."""

    endpoint: str
    """`host:port`."""
    bucket: str = BUCKET

    def uri(self, path: str) -> str:
        """The URI of `path` in the bucket (a folder or a file)."""
        query = f"endpoint_override={self.endpoint}&scheme=http&region={REGION}"
        return f"s3://{ACCESS_KEY}:{SECRET_KEY}@{self.bucket}/{path.strip('/')}?{query}"

    def fresh_uri(self, prefix: str = "t") -> str:
        """The URI of a folder no test used before."""
        return self.uri(f"{prefix}-{uuid.uuid4().hex[:12]}")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_until_up(process: subprocess.Popen, url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"moto server exited with {process.returncode} before answering")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"moto server did not answer at {url} in {timeout_s}s") from None
            time.sleep(0.1)  # polling a server's readiness, bounded by the deadline


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    pytest.importorskip("moto.server", reason="needs moto[server] (pip install 'moto[server]')")
    from pyarrow import fs as pafs

    port = _free_port()
    env = {**os.environ, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        _wait_until_up(process, f"http://127.0.0.1:{port}/moto-api/", START_TIMEOUT_S)
        # Never let pyarrow look for credentials on a cloud metadata endpoint.
        os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
        server = S3Server(f"127.0.0.1:{port}")
        filesystem, _ = pafs.FileSystem.from_uri(server.uri("") + "&allow_bucket_creation=true")
        filesystem.create_dir(server.bucket)
        yield server
    finally:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
        if process.poll() is None:
            process.kill()
            process.wait()
