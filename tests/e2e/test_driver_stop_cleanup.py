"""A driver stopped between PREPARE and COMMIT (issue 21, item 4): SIGTERM stops the job in
order and its sinks are cleaned up; after SIGKILL `barrierflow cleanup` does the same. Either
way no prepared transaction and no staged file is left, and a rerun commits every record
exactly once, into PostgreSQL (insert mode) and a FileSink alike.

The job file runs in a driver process of its own (`barrierflow run`). One branch of the job
takes its snapshots slowly, so each checkpoint stays seconds between the sinks' PREPARE (at
the barrier) and their COMMIT (once every task acknowledged): the test waits until
pg_prepared_xacts shows a transaction of a checkpoint after completed ones, then strikes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from barrierflow.api.job_file import command_line_settings, run_job_file
from barrierflow.chaos import kill_process_tree
from barrierflow.connectors.postgres import gid_prefix, parse_gid

from .conftest import read_rows

pytestmark = [pytest.mark.spark, pytest.mark.chaos]

RECORDS = 6_000
RATE = 400
"""About 15 s of input: the strike comes after a few checkpoints, the rest after the rerun
(which reads it at full speed: only the struck driver needs time to strike in)."""
SLOW_SNAPSHOT_S = 1.5
WAIT_S = 300.0
"""A driver starts Spark, then deploys: over a minute each on a busy 2-core machine."""

JOB = textwrap.dedent(
    f"""
    import sys
    import time

    from barrierflow import StreamExecutionEnvironment, WatermarkStrategy
    from barrierflow.connectors.datagen import DataGeneratorSource
    from barrierflow.connectors.discarding import DiscardingSink
    from barrierflow.connectors.files import FileSink
    from barrierflow.connectors.postgres import PostgresSink
    from barrierflow.functions import CheckpointedFunction, MapFunction


    class SlowSnapshot(MapFunction, CheckpointedFunction):
        # its snapshot holds every checkpoint back {SLOW_SNAPSHOT_S} s after the sinks prepared

        def initialize_state(self, context):
            pass

        def snapshot_state(self, context):
            time.sleep({SLOW_SNAPSHOT_S})

        def map(self, value):
            return value


    def row(n):
        return {{"n": n}}


    dsn, table, out, job_name = sys.argv[1:5]
    rate = None if sys.argv[5:] == ["--full-speed"] else {RATE}
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.enable_checkpointing(200)
    numbers = env.from_source(
        DataGeneratorSource(int, {RECORDS}, records_per_second=rate),
        WatermarkStrategy.no_watermarks(),
        "numbers",
    ).uid("numbers")
    numbers.rebalance().map(SlowSnapshot()).uid("slow").sink_to(DiscardingSink()).uid("drop")
    numbers.map(row).uid("row").sink_to(
        PostgresSink.builder().set_dsn(dsn).set_table(table).build()
    ).uid("pg")
    numbers.sink_to(FileSink.for_rows(out)).uid("files")
    env.execute(job_name)
    """
)


class StoppedDriver:
    """One test's job file, its table and folders, and what the driver left."""

    def __init__(self, tmp_path: Path, dsn: str) -> None:
        import psycopg

        self.tmp_path, self.dsn = tmp_path, dsn
        self.table = f"numbers_{uuid.uuid4().hex[:8]}"
        self.job_name = f"stopped-{self.table}"
        self.out = tmp_path / "out"
        self.job_file = tmp_path / "job.py"
        self.job_file.write_text(JOB)
        self.prefix = gid_prefix(self.job_name, "pg")
        with psycopg.connect(dsn, autocommit=True) as pg:
            pg.execute(f"CREATE TABLE {self.table} (n bigint NOT NULL)")

    @property
    def args(self) -> list[str]:
        return [self.dsn, self.table, str(self.out), self.job_name]

    def __enter__(self) -> StoppedDriver:
        self.drivers: list[subprocess.Popen] = []
        return self

    def __exit__(self, *exc: object) -> None:
        for driver in self.drivers:  # a failed test leaves no driver running
            if driver.poll() is None:
                kill_process_tree(driver.pid)
                driver.communicate()

    def start_driver(self) -> subprocess.Popen:
        command = [
            str(Path(sys.executable).parent / "barrierflow"), "run", str(self.job_file),
            "--master", "local[8]", "--checkpoint-dir", str(self.tmp_path / "checkpoints"),
            "--progress", "off", *self.args,
        ]  # fmt: skip
        driver = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            cwd=self.tmp_path, start_new_session=True,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        )  # fmt: skip
        self.drivers.append(driver)
        return driver

    def prepared(self) -> list[str]:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as pg:
            rows = pg.execute(
                "SELECT gid FROM pg_prepared_xacts WHERE starts_with(gid, %s)", (self.prefix,)
            ).fetchall()
        return [gid for (gid,) in rows]

    def wait_between_prepare_and_commit(self, driver: subprocess.Popen) -> int:
        """Until a transaction of checkpoint 3 or later is prepared (so earlier checkpoints
        completed and committed), the driver still running; returns that checkpoint."""
        deadline = time.monotonic() + WAIT_S
        while True:
            assert driver.poll() is None, driver.communicate()[1][-3000:]
            ids = [parsed[2] for gid in self.prepared() if (parsed := parse_gid(gid, self.prefix))]
            if ids and max(ids) >= 3:
                return max(ids)
            assert time.monotonic() < deadline, "no transaction was prepared in time"
            time.sleep(0.05)  # polling the database's view, bounded by the deadline

    def staged_files(self) -> list[str]:
        return [name for _, _, names in os.walk(self.out / ".staging") for name in names]

    def committed(self) -> tuple[Counter, Counter]:
        """(the table's rows, the FileSink's committed rows), each as a multiset."""
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as pg:
            table = Counter(n for (n,) in pg.execute(f"SELECT n FROM {self.table}").fetchall())
        return table, read_rows(self.out)

    def rerun(self) -> None:
        """The job file again, in this process (the test session's Spark), to its end, its
        input unpaced."""
        with command_line_settings(checkpoint_dir=str(self.tmp_path / "checkpoints")):
            run_job_file(self.job_file, [*self.args, "--full-speed"])


def assert_exactly_once(job: StoppedDriver) -> None:
    table, files = job.committed()
    expected = Counter(range(RECORDS))
    assert table == expected, (len(table), sum(table.values()))
    assert files == expected, (len(files), sum(files.values()))


def assert_no_duplicates(job: StoppedDriver) -> None:
    table, files = job.committed()
    assert all(count == 1 for count in table.values()) and all(c == 1 for c in files.values())


def test_sigterm_between_prepare_and_commit_stops_in_order_then_a_rerun_is_exactly_once(
    spark, tmp_path, postgres_server
):
    pytest.importorskip("psycopg")
    with StoppedDriver(tmp_path, postgres_server) as job:
        driver = job.start_driver()
        checkpoint = job.wait_between_prepare_and_commit(driver)
        signalled = time.monotonic()
        driver.send_signal(signal.SIGTERM)
        _, stderr = driver.communicate(timeout=WAIT_S)
        print(f"SIGTERM to exit: {time.monotonic() - signalled:.1f} s; the driver said:")
        print("\n".join(line for line in stderr.splitlines() if "barrierflow:" in line))

        assert driver.returncode == 143, stderr[-3000:]
        said = [line for line in stderr.splitlines() if "stopped by SIGTERM:" in line]
        assert len(said) == 1 and "sinks cleaned up" in said[0], stderr[-3000:]
        assert "Traceback" not in stderr, stderr[-3000:]
        assert job.prepared() == [], f"prepared for checkpoint {checkpoint}, left behind"
        assert job.staged_files() == []
        assert_no_duplicates(job)

        job.rerun()
        assert_exactly_once(job)
        assert job.prepared() == [] and job.staged_files() == []


def test_sigkill_leaves_what_barrierflow_cleanup_resolves_then_a_rerun_is_exactly_once(
    spark, tmp_path, postgres_server
):
    pytest.importorskip("psycopg")
    with StoppedDriver(tmp_path, postgres_server) as job:
        driver = job.start_driver()
        job.wait_between_prepare_and_commit(driver)
        kill_process_tree(driver.pid)
        driver.communicate(timeout=WAIT_S)
        assert job.prepared() != [] and job.staged_files() != []  # what a killed driver leaves

        cleanup = subprocess.run(
            [str(Path(sys.executable).parent / "barrierflow"), "cleanup", str(job.job_file),
             "--checkpoint-dir", str(tmp_path / "checkpoints"), *job.args],
            capture_output=True, text=True, cwd=tmp_path, timeout=WAIT_S,
        )  # fmt: skip

        assert cleanup.returncode == 0, cleanup.stderr[-3000:]
        [said] = [line for line in cleanup.stdout.splitlines() if line.startswith("cleaned up")]
        assert all(f" {uid}" in said for uid in ("pg", "files", "drop")), cleanup.stdout
        assert "Spark" not in cleanup.stderr  # the job was defined, never run
        assert job.prepared() == [] and job.staged_files() == []
        assert_no_duplicates(job)

        job.rerun()
        assert_exactly_once(job)
