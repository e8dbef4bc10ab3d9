"""PostgresSink in `barrierflow chaos`: `committed_output` is every committed row of the table,
and each run of a check writes its own empty copy of the table the job names."""

from __future__ import annotations

import pickle
import uuid
from pathlib import Path

import msgpack
import pytest

from barrierflow.chaos.run_placement import check_run
from barrierflow.connectors.base import SinkContext
from barrierflow.connectors.postgres import PostgresSink
from barrierflow.errors import SinkError

psycopg = pytest.importorskip("psycopg")


@pytest.fixture
def pg(postgres_server):
    with psycopg.connect(postgres_server, autocommit=True) as connection:
        yield connection


@pytest.fixture
def counts(pg):
    name = f"counts_{uuid.uuid4().hex[:8]}"
    pg.execute(f"CREATE TABLE {name} (word text PRIMARY KEY, n bigint NOT NULL CHECK (n >= 0))")
    return name


def upsert(dsn: str, table: str, dead_letters: str | None = None) -> PostgresSink:
    builder = PostgresSink.builder().set_dsn(dsn).set_table(table).set_key_columns(["word"])
    if dead_letters:
        builder.set_dead_letter_table(dead_letters)
    return builder.build()


def write(sink: PostgresSink, job: str, batches: list[list[dict]], commit: bool = True):
    """One checkpoint per batch; the last one left prepared unless `commit`."""
    writer = sink.create_writer(SinkContext("pg", 0, 1, 0, "d", job, None))
    writer.restore([])
    for checkpoint, batch in enumerate(batches, start=1):
        writer.write_batch(batch)
        writer.pre_commit(checkpoint)
        if commit or checkpoint < len(batches):
            writer.commit(checkpoint)
    return writer


def test_committed_output_is_every_committed_row_and_no_prepared_one(postgres_server, counts):
    sink = upsert(postgres_server, counts)
    sink.prepare()
    assert sink.committed_output() == []
    writer = write(
        sink,
        f"job-{uuid.uuid4().hex[:8]}",
        [[{"word": "a", "n": 1}, {"word": "b", "n": 2}], [{"word": "a", "n": 3}]],
        commit=False,
    )
    assert sorted(sink.committed_output(), key=lambda r: r["word"]) == [
        {"word": "a", "n": 1},
        {"word": "b", "n": 2},
    ]
    writer.commit(2)
    writer.close()
    assert sorted(sink.committed_output(), key=lambda r: r["word"]) == [
        {"word": "a", "n": 3},
        {"word": "b", "n": 2},
    ]


def test_committed_output_of_a_missing_table_names_it(postgres_server):
    with pytest.raises(SinkError, match="no_such_table"):
        upsert(postgres_server, "no_such_table").committed_output()


def test_each_chaos_run_writes_its_own_copy_of_the_table(postgres_server, pg, counts, tmp_path):
    pg.execute(f"INSERT INTO {counts} VALUES ('kept', 7)")
    job = f"job-{uuid.uuid4().hex[:8]}"
    outputs = {}
    for run in ("reference", "chaos"):
        with check_run(Path(tmp_path / run)):
            sink = upsert(postgres_server, counts, dead_letters=f"{counts}_bad")
        assert (sink.table, sink.dead_letter_table) == (f"{counts}__{run}", f"{counts}_bad__{run}")
        sink.prepare()
        # The copy has the template's key, so upserts work; rejected rows go to its own table.
        write(sink, job, [[{"word": "x", "n": 1}, {"word": "x", "n": 2}, {"word": "y", "n": -1}]])
        outputs[run] = sink.committed_output()
    assert outputs == {"reference": [{"word": "x", "n": 2}], "chaos": [{"word": "x", "n": 2}]}
    assert pg.execute(f"SELECT word, n FROM {counts}").fetchall() == [("kept", 7)]
    for run in ("reference", "chaos"):
        bad = pg.execute(f"SELECT row->>'word' FROM {counts}_bad__{run}").fetchall()
        assert bad == [("y",)]


def test_a_later_check_starts_from_an_empty_copy(postgres_server, pg, counts, tmp_path):
    job = f"job-{uuid.uuid4().hex[:8]}"
    for _ in range(2):
        with check_run(Path(tmp_path / "chaos")):
            sink = upsert(postgres_server, counts)
        sink.prepare()
        assert sink.committed_output() == []
        write(sink, job, [[{"word": "x", "n": 1}]])
        assert sink.committed_output() == [{"word": "x", "n": 1}]


def test_outside_chaos_the_sink_writes_the_table_it_names(postgres_server, counts):
    sink = upsert(postgres_server, counts)
    assert (sink.table, sink.template_table) == (counts, None)


def test_a_roll_back_in_place_rolls_back_what_the_failed_attempt_prepared_after_the_restore(
    postgres_server, pg, counts
):
    """Found by `barrierflow chaos` with a PostgreSQL job: the same sink object, opened
    again for the next attempt, must decide the earlier attempt's leftovers again. Otherwise
    a transaction prepared for a checkpoint that never completed stays prepared, and a later
    restore from a higher checkpoint commits it: its rows land twice."""
    job, table = f"job-{uuid.uuid4().hex[:8]}", f"{counts}_log"
    pg.execute(f"CREATE TABLE {table} (word text NOT NULL, n bigint NOT NULL)")
    sink = PostgresSink.builder().set_dsn(postgres_server).set_table(table).build()
    sink.prepare()
    first = sink.create_writer(SinkContext("pg", 0, 1, 0, "d0", job, None))
    first.restore([])
    first.write_batch([{"word": "a", "n": 1}])
    first.pre_commit(1)
    state = msgpack.unpackb(msgpack.packb(first.snapshot_state()), raw=False)  # as checkpointed
    first.commit(1)
    first.write_batch([{"word": "b", "n": 2}])
    first.pre_commit(2)  # prepared; checkpoint 2 never completes: the attempt fails
    first.abort()

    again = sink.create_writer(SinkContext("pg", 0, 1, 1, "d1", job, 1))  # the same object
    again.restore([state])
    again.write_batch([{"word": "b", "n": 2}])  # replayed
    again.pre_commit(3)
    again.commit(3)
    again.close()
    # A later failure kills the process: a fresh copy of the sink restores checkpoint 3.
    fresh = pickle.loads(pickle.dumps(sink)).create_writer(SinkContext("pg", 0, 1, 2, "d2", job, 3))
    fresh.restore([])
    fresh.close()
    assert sorted(pg.execute(f"SELECT word, n FROM {table}").fetchall()) == [("a", 1), ("b", 2)]
