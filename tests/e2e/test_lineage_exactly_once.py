"""Exactly once through a job's moves and fallbacks (issue 21, items 1 and 6), on Spark with a
FileSink, a DeltaSink and a PostgresSink in insert mode (tests/support/pg_server.py) side by side.

- A savepoint restored into an empty checkpoint folder (a job moved to new storage), with a
  failure before and one after the first new checkpoint: every sink holds exactly the rows
  of a failure-free run. Before the fix the run numbered its checkpoints from 1 again: Delta
  refused the commits (its table held those versions), PostgreSQL committed leftovers by id.
- Three retained checkpoints, the newest damaged after the job ended: the rerun falls back;
  FileSink and Delta take back what the damaged checkpoint committed (exactly once), and
  the PostgreSQL insert sink stops the rerun with one line naming the choices; with
  --allow-fallback-duplicates it goes on, every row at least once.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections import Counter
from pathlib import Path

import pytest

from barrierflow import RestartStrategies, StreamExecutionEnvironment
from barrierflow.connectors.delta import DeltaSink
from barrierflow.connectors.files import FileSink
from barrierflow.connectors.postgres import PostgresSink, gid_of, gid_prefix
from barrierflow.errors import JobExecutionError, StateRestoreError

from .jobs import generated_words, running_count_rows, running_counts, word_of

pytestmark = pytest.mark.spark

psycopg = pytest.importorskip("psycopg")
deltalake = pytest.importorskip("deltalake")

RECORDS = 6_000
RATE = 2_000
SLOW_RATE = 400
"""The first run's pace: it must still run when its stop with savepoint arrives."""
TIMEOUT_S = 300
"""Generous: deploying takes a minute on a loaded two-core machine."""


def expected() -> Counter:
    return running_count_rows(word_of(i) for i in range(RECORDS))


class Outputs:
    """The three sinks' places: a FileSink folder, a Delta table, a PostgreSQL table."""

    def __init__(self, tmp_path: Path, dsn: str) -> None:
        self.dsn = dsn
        self.files = tmp_path / "out"
        self.delta = tmp_path / "delta"
        self.table = f"events_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(dsn, autocommit=True) as pg:
            pg.execute(f"CREATE TABLE {self.table} (word text NOT NULL, n bigint NOT NULL)")

    def file_rows(self) -> Counter:
        """The rows of the committed part files (not those in hidden folders)."""
        rows: Counter = Counter()
        for part in sorted(self.files.glob("part-*")):
            for line in part.read_text().splitlines():
                row = json.loads(line)
                rows[(row["word"], row["n"])] += 1
        return rows

    def delta_rows(self) -> Counter:
        table = DeltaSink.for_path(str(self.delta))
        return Counter((row["word"], row["n"]) for row in table.committed_output())

    def postgres_rows(self) -> Counter:
        with psycopg.connect(self.dsn, autocommit=True) as pg:
            return Counter(pg.execute(f"SELECT word, n FROM {self.table}").fetchall())

    def prepared(self) -> list[str]:
        with psycopg.connect(self.dsn, autocommit=True) as pg:
            return [gid for (gid,) in pg.execute("SELECT gid FROM pg_prepared_xacts").fetchall()]


def job(
    outputs: Outputs,
    checkpoints: Path,
    *,
    interval_ms: int = 300,
    retained: int = 1,
    postgres: bool = True,
    rate: int = RATE,
) -> StreamExecutionEnvironment:
    """A paced keyed running count into a FileSink, a DeltaSink and (`postgres`) a
    PostgresSink without key columns (inserts): the counting at parallelism 1 and each sink
    at 2 (eight slots)."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.enable_checkpointing(interval_ms)
    config = env.get_checkpoint_config()
    config.set_checkpoint_storage(str(checkpoints))
    config.set_max_retained_checkpoints(retained)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 100))
    counts = running_counts(generated_words(env, RECORDS, rate))
    rows = counts.map(lambda pair: {"word": pair[0], "n": pair[1]}).uid("row")
    rows.sink_to(FileSink.for_rows(str(outputs.files))).uid("files").set_parallelism(2)
    rows.sink_to(DeltaSink.for_path(str(outputs.delta))).uid("delta").set_parallelism(2)
    if postgres:
        sink = PostgresSink.builder().set_dsn(outputs.dsn).set_table(outputs.table).build()
        rows.sink_to(sink).uid("pg").set_parallelism(2)
    return env


def test_a_savepoint_moved_to_an_empty_folder_stays_exactly_once_through_two_failures(
    spark, tmp_path, postgres_server
):
    outputs = Outputs(tmp_path, postgres_server)
    name = f"moved-{outputs.table}"
    first = job(outputs, tmp_path / "checkpoints", rate=SLOW_RATE).execute_async(name)
    assert first.wait_for_completed_checkpoints(2, timeout=TIMEOUT_S)
    savepoint = first.stop_with_savepoint(False, str(tmp_path / "savepoints")).result()
    assert 0 < sum(outputs.file_rows().values()) < RECORDS

    # A prepared transaction of a crashed attempt, named as a run numbering from 1 again
    # named its first checkpoint's: no restored state lists it, so it must be rolled back,
    # not committed because its id is below the savepoint's.
    with psycopg.connect(postgres_server, autocommit=True) as pg:
        pg.execute("BEGIN")
        pg.execute(f"INSERT INTO {outputs.table} VALUES ('stray', 1)")
        pg.execute(f"PREPARE TRANSACTION '{gid_of(name, 'pg', 0, 1)}'")

    # Moved to new storage: an empty checkpoint folder; checkpoints far apart, so that the
    # first failure comes before the first new checkpoint.
    moved = job(outputs, tmp_path / "new-storage", interval_ms=1500)
    moved.set_savepoint_restore_settings(savepoint)
    client = moved.execute_async(name)
    assert client.wait_until_running(0, timeout=TIMEOUT_S)
    restored = client.restored_from
    client.inject_failure("exception", sink_vertex(client), 0)
    assert client.wait_until_running(1, timeout=TIMEOUT_S)
    assert client.restored_from == restored, "a checkpoint completed before the first failure"
    assert client.wait_for_completed_checkpoints(1, timeout=TIMEOUT_S)
    new_ids = client.completed_checkpoints
    assert min(new_ids) > restored  # ids never go back
    client.inject_failure("exception", sink_vertex(client), 1)
    client.wait(timeout=TIMEOUT_S)

    assert outputs.file_rows() == expected()
    assert outputs.delta_rows() == expected()
    assert outputs.postgres_rows() == expected()
    assert [gid for gid in outputs.prepared() if gid.startswith(gid_prefix(name, "pg"))] == []


def sink_vertex(client) -> int:
    return next(v.vertex_id for v in client.job_graph.vertices if "Sink" in v.name)


def damage(folder: Path) -> Path:
    """Overwrite the middle of the largest state file of a checkpoint folder."""
    target = max((p for p in folder.iterdir() if p.name != "_metadata"), key=os.path.getsize)
    data = bytearray(target.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(64)
    target.write_bytes(bytes(data))
    return target


def test_a_fallback_past_a_damaged_checkpoint_takes_back_files_and_delta_and_stops_inserts(
    spark, tmp_path, postgres_server, caplog
):
    outputs = Outputs(tmp_path, postgres_server)
    name = f"fallback-{outputs.table}"
    checkpoints = tmp_path / "checkpoints"
    # Ends FINISHED, all committed, with an intact checkpoint below its final one to fall
    # back to (paced so a periodic checkpoint completes first, even on a loaded machine).
    job(outputs, checkpoints, retained=3, rate=SLOW_RATE).execute(name)
    assert outputs.file_rows() == expected()
    folder = checkpoints / name
    completed = sorted(
        (p for p in folder.glob("chk-*") if (p / "_metadata").exists()),
        key=lambda p: int(p.name[4:]),
    )
    assert len(completed) >= 2, f"the first run completed only {completed}"
    newest = completed[-1]
    # The part files the newest checkpoint committed (none when the input had ended before
    # it began): the fallback must move exactly these aside.
    committed_by_newest = sorted(
        p.name for p in (tmp_path / "out").glob(f"part-*-ck{newest.name[4:]}-*")
    )
    damaged = damage(newest)

    # The insert sink cannot take back what the damaged checkpoint committed: one line.
    # (A task finds the damaged state file: the job fails as its next attempt chooses.)
    with pytest.raises(JobExecutionError) as raised:
        job(outputs, checkpoints, retained=3).execute(name)
    assert isinstance(raised.value.__cause__, StateRestoreError)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"job '{name}' failed: checkpoint {newest.name[4:]} is damaged (")
    assert f"file://{damaged}" in message
    assert "'pg'" not in message and "(uid pg, PostgresSink" in message
    assert "uid delta" not in message and "uid files" not in message
    assert "--from-savepoint PATH" in message and "--allow-fallback-duplicates" in message
    assert outputs.file_rows() == expected()  # nothing taken back: no fallback happened
    assert outputs.delta_rows() == expected()

    # Allowed explicitly: the rerun goes on, with a warning. File and Delta take back what
    # the damaged checkpoint committed (exactly once); inserted rows may come twice.
    env = job(outputs, checkpoints, retained=3)
    env.get_checkpoint_config().set_allow_fallback_duplicates(True)
    with caplog.at_level(logging.WARNING, logger="barrierflow.cluster.jobmaster.job_restore"):
        client = env.execute_async(name)
        client.wait(timeout=TIMEOUT_S)
    assert client.restored_from == int(newest.name[4:]) - 1
    assert "with duplicates allowed" in caplog.text
    assert outputs.file_rows() == expected()
    assert outputs.delta_rows() == expected()
    abandoned = sorted(p.name for p in (tmp_path / "out" / ".abandoned").glob("part-*"))
    assert abandoned == committed_by_newest  # moved aside, not deleted
    inserted = outputs.postgres_rows()
    assert set(inserted) == set(expected())
    assert all(inserted[row] >= count for row, count in expected().items())
