"""PostgresSink against a real PostgreSQL (support/pg_server.py): modes, the transaction steps,
recovery by the restored state (also after a change of parallelism, and across lineages),
configuration errors and rows that do not fit the table."""

from __future__ import annotations

import json
import re
import uuid

import pytest

from barrierflow.connectors.base import SinkContext
from barrierflow.connectors.postgres import PostgresSink, gid_of, gid_prefix
from barrierflow.errors import SinkError, SinkUnavailableError

psycopg = pytest.importorskip("psycopg")

UID = "pg-sink"


@pytest.fixture
def pg(postgres_server):
    with psycopg.connect(postgres_server, autocommit=True) as connection:
        yield connection


@pytest.fixture
def job():
    """A job name no other test uses: its transactions' gids are its own."""
    return f"job-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def counts(pg):
    name = f"counts_{uuid.uuid4().hex[:8]}"
    pg.execute(f"CREATE TABLE {name} (word text PRIMARY KEY, n bigint NOT NULL CHECK (n >= 0))")
    return name


@pytest.fixture
def events(pg):
    name = f"events_{uuid.uuid4().hex[:8]}"
    pg.execute(f"CREATE TABLE {name} (id serial, word varchar(8) NOT NULL, n integer, meta jsonb)")
    return name


def context(job, subtask=0, parallelism=1, restored=None, lineage=""):
    return SinkContext(UID, subtask, parallelism, 0, "d", job, restored, lineage=lineage)


def writer_of(sink, job, subtask=0, parallelism=1, restored=None, states=(), lineage=""):
    writer = sink.create_writer(context(job, subtask, parallelism, restored, lineage))
    writer.restore(list(states))
    return writer


def upsert(dsn, table, **settings):
    builder = PostgresSink.builder().set_dsn(dsn).set_table(table).set_key_columns(["word"])
    for name, value in settings.items():
        getattr(builder, f"set_{name}")(value)
    return builder.build()


def insert(dsn, table, **settings):
    builder = PostgresSink.builder().set_dsn(dsn).set_table(table)
    for name, value in settings.items():
        getattr(builder, f"set_{name}")(value)
    return builder.build()


def table_rows(pg, table, columns="word, n"):
    return sorted(pg.execute(f"SELECT {columns} FROM {table}").fetchall())


def prepared(pg, job):
    return sorted(
        gid
        for (gid,) in pg.execute("SELECT gid FROM pg_prepared_xacts").fetchall()
        if gid.startswith(gid_prefix(job, UID))
    )


def crash(sink):
    """The process of a writer dies: its connections go, its prepared transactions stay."""
    sink._close_connections()


# ---------------------------------------------------------------- modes and batching


def test_inserted_rows_become_visible_when_their_checkpoint_commits(
    postgres_server, pg, job, events
):
    sink = insert(postgres_server, events)
    writer = writer_of(sink, job)
    writer.write_batch([{"word": "ant", "n": 1}, {"word": "bee", "n": 2, "meta": {"a": [1]}}])
    writer.pre_commit(1)
    writer.write_batch([{"word": "cat"}])

    assert table_rows(pg, events) == []
    assert len(prepared(pg, job)) == 1
    writer.commit(1)
    assert table_rows(pg, events, "word, n, meta") == [("ant", 1, None), ("bee", 2, {"a": [1]})]
    assert prepared(pg, job) == []
    writer.pre_commit(2)
    writer.commit(2)
    assert table_rows(pg, events) == [("ant", 1), ("bee", 2), ("cat", None)]
    writer.close()


def test_upserts_keep_the_last_row_per_key_within_and_across_checkpoints(
    postgres_server, pg, job, counts
):
    sink = upsert(postgres_server, counts)
    writer = writer_of(sink, job)
    writer.write_batch([{"word": "ant", "n": 1}, {"word": "bee", "n": 1}])
    writer.write_batch([{"word": "ant", "n": 2}])
    writer.pre_commit(1)
    writer.commit(1)
    assert table_rows(pg, counts) == [("ant", 2), ("bee", 1)]
    writer.write_batch([{"word": "bee", "n": 5}, {"word": "cat", "n": 1}, {"word": "bee", "n": 7}])
    writer.pre_commit(2)
    writer.commit(2)
    assert table_rows(pg, counts) == [("ant", 2), ("bee", 7), ("cat", 1)]
    writer.close()


def test_many_rows_go_in_batches_of_mixed_columns(postgres_server, pg, job, events):
    sink = insert(postgres_server, events, batch_size=7)
    writer = writer_of(sink, job)
    rows = [{"word": f"w{i}", "n": i} if i % 3 else {"word": f"w{i}"} for i in range(100)]
    for start in range(0, 100, 9):
        writer.write_batch(rows[start : start + 9])
    writer.pre_commit(1)
    assert table_rows(pg, events) == []
    writer.commit(1)
    expected = sorted((f"w{i}", i if i % 3 else None) for i in range(100))
    assert table_rows(pg, events) == expected
    writer.close()


def test_an_interval_without_rows_prepares_nothing(postgres_server, pg, job, counts):
    writer = writer_of(upsert(postgres_server, counts), job)
    writer.pre_commit(1)
    assert prepared(pg, job) == []
    writer.commit(1)
    writer.close()


# ---------------------------------------------------------------- the transaction steps


def test_commit_twice_is_harmless(postgres_server, pg, job, events):
    sink = insert(postgres_server, events)
    writer = writer_of(sink, job)
    handle = sink.begin_transaction()
    sink.write(handle, [{"word": "ant", "n": 1}])
    handle = sink.pre_commit(handle, 1)
    sink.commit(handle)
    sink.commit(handle)
    assert table_rows(pg, events) == [("ant", 1)]
    writer.close()


def test_committing_a_transaction_that_was_rolled_back_is_an_error(
    postgres_server, pg, job, events
):
    sink = insert(postgres_server, events)
    writer = writer_of(sink, job)
    handle = sink.begin_transaction()
    sink.write(handle, [{"word": "ant", "n": 1}])
    handle = sink.pre_commit(handle, 1)
    pg.execute(f"ROLLBACK PREPARED '{handle.gid}'")
    with pytest.raises(SinkError, match="rolled back instead of committed"):
        sink.commit(handle)
    writer.close()


def test_abort_discards_an_open_and_a_prepared_transaction(postgres_server, pg, job, events):
    sink = insert(postgres_server, events, batch_size=1)
    writer = writer_of(sink, job)
    first = sink.begin_transaction()
    sink.write(first, [{"word": "ant", "n": 1}])
    first = sink.pre_commit(first, 1)
    second = sink.begin_transaction()
    sink.write(second, [{"word": "bee", "n": 1}])  # sent: batch size 1
    sink.abort(second)
    sink.abort(first)
    sink.abort(first)  # idempotent
    assert prepared(pg, job) == []
    assert table_rows(pg, events) == []
    writer.close()


def test_a_normal_end_leaves_no_prepared_transaction(postgres_server, pg, job, counts):
    writer = writer_of(upsert(postgres_server, counts), job)
    writer.write_batch([{"word": "ant", "n": 1}])
    writer.pre_commit(1)
    writer.commit(1)
    writer.close()
    assert prepared(pg, job) == []
    assert table_rows(pg, counts) == [("ant", 1)]


# ---------------------------------------------------------------- recovery


def test_restore_commits_completed_checkpoints_and_rolls_back_later_ones(
    postgres_server, pg, job, counts
):
    sink = upsert(postgres_server, counts)
    writer = writer_of(sink, job)
    writer.write_batch([{"word": "ant", "n": 1}])
    writer.pre_commit(1)
    state = writer.snapshot_state()  # checkpoint 1 completes, its notification never arrives
    writer.write_batch([{"word": "ant", "n": 2}, {"word": "bee", "n": 1}])
    writer.pre_commit(2)  # checkpoint 2 never completes
    crash(sink)
    assert len(prepared(pg, job)) == 2

    again = upsert(postgres_server, counts)
    writer = writer_of(again, job, restored=1, states=[state])
    assert prepared(pg, job) == []
    assert table_rows(pg, counts) == [("ant", 1)]
    writer.write_batch([{"word": "ant", "n": 2}, {"word": "bee", "n": 1}])  # replayed
    writer.pre_commit(2)
    writer.commit(2)
    assert table_rows(pg, counts) == [("ant", 2), ("bee", 1)]
    writer.close()


def test_a_key_held_by_the_uncommitted_previous_checkpoint_waits_for_the_next_transaction(
    postgres_server, pg, job, counts
):
    writer = writer_of(upsert(postgres_server, counts), job)
    writer.write_batch([{"word": "ant", "n": 1}])
    writer.pre_commit(1)  # its completion is not delivered before the next barrier
    writer.write_batch([{"word": "ant", "n": 2}, {"word": "bee", "n": 1}])
    writer.pre_commit(2)  # "ant" is locked by transaction 1: carried, not waited for
    writer.commit(2)
    assert table_rows(pg, counts) == [("ant", 1), ("bee", 1)]
    writer.pre_commit(3)
    writer.commit(3)
    assert table_rows(pg, counts) == [("ant", 2), ("bee", 1)]
    writer.close()


@pytest.mark.parametrize("restored", [2, 3])
def test_carried_rows_are_written_once_after_a_restore(postgres_server, pg, job, counts, restored):
    sink = upsert(postgres_server, counts)
    writer = writer_of(sink, job)
    writer.write_batch([{"word": "ant", "n": 1}])
    writer.pre_commit(1)
    writer.write_batch([{"word": "ant", "n": 2}, {"word": "bee", "n": 1}])
    writer.pre_commit(2)  # carries ant=2
    states = {2: writer.snapshot_state()}
    writer.commit(1)
    writer.write_batch([{"word": "ant", "n": 3}])
    writer.pre_commit(3)
    states[3] = writer.snapshot_state()
    crash(sink)

    writer = writer_of(
        upsert(postgres_server, counts), job, restored=restored, states=[states[restored]]
    )
    writer.pre_commit(4)  # (records after the restored barrier would be replayed here)
    writer.commit(4)
    # restored 2: ant=2 was carried by transaction 2 and is written now; restored 3: it was
    # in transaction 3, committed on restore, and is not written again over ant=3
    expected_ant = {2: 2, 3: 3}[restored]
    assert table_rows(pg, counts) == [("ant", expected_ant), ("bee", 1)]
    assert prepared(pg, job) == []
    writer.close()


@pytest.mark.parametrize("with_states", [True, False], ids=["states", "leftovers-only"])
def test_restore_after_a_change_of_parallelism_decides_every_leftover_by_the_restored_state(
    postgres_server, pg, job, events, with_states
):
    """What the restored states list is committed; every other leftover is rolled back by
    the subtask that owns it (old subtask j's by j mod 2), whatever its checkpoint id: an id
    at or below the restored one is no proof (another lineage may have used it)."""
    states = []
    for subtask in range(3):
        sink = insert(postgres_server, events)
        writer = writer_of(sink, job, subtask, 3)
        writer.write_batch([{"word": f"s{subtask}c1", "n": subtask}])
        writer.pre_commit(1)
        states.append(writer.snapshot_state())
        writer.write_batch([{"word": f"s{subtask}c2", "n": subtask}])
        writer.pre_commit(2)
        crash(sink)
    assert len(prepared(pg, job)) == 6

    for subtask in range(2):  # old state i goes to new subtask i % 2
        mine = [s for i, s in enumerate(states) if i % 2 == subtask] if with_states else []
        writer_of(insert(postgres_server, events), job, subtask, 2, restored=1, states=mine)

    assert prepared(pg, job) == []
    expected = [("s0c1", 0), ("s1c1", 1), ("s2c1", 2)] if with_states else []
    assert table_rows(pg, events) == expected


def test_a_savepoint_moved_to_new_storage_commits_what_it_lists_and_nothing_by_id(
    postgres_server, pg, job, events
):
    """A run of lineage 'aa' takes savepoint 10 (its rows prepared, listed as pending); the
    job moves to new storage (lineage 'bb') and a failure hits before its first checkpoint
    completed, leaving a prepared transaction behind. Before the fix the new run numbered
    from 1 and the sweep committed its leftover of checkpoint 1 as "at or below the restored
    10": its rows came again with the replay. Whatever the numbering, the sink now decides
    by what the restored state lists, so even such an id is rolled back."""
    sink = insert(postgres_server, events)
    old = writer_of(sink, job, lineage="aa")
    old.write_batch([{"word": "saved", "n": 10}])
    old.pre_commit(10)
    savepoint = old.snapshot_state()
    old.write_batch([{"word": "old-11", "n": 11}])
    old.pre_commit(11)  # the old run went on after the savepoint, then died
    crash(sink)

    sink = insert(postgres_server, events)
    moved = writer_of(sink, job, restored=10, states=[savepoint], lineage="bb")
    assert prepared(pg, job) == []  # 10 committed as listed, the old run's 11 rolled back
    moved.write_batch([{"word": "new-1", "n": 1}])
    moved.pre_commit(1)
    assert prepared(pg, job) == [gid_of(job, UID, 0, 1, "bb")]
    crash(sink)  # before checkpoint 1 completed

    writer_of(insert(postgres_server, events), job, restored=10, states=[savepoint], lineage="bb")
    assert prepared(pg, job) == []
    assert table_rows(pg, events) == [("saved", 10)]


def test_a_fresh_start_rolls_back_every_leftover_of_the_job(postgres_server, pg, job, counts):
    sink = upsert(postgres_server, counts)
    writer = writer_of(sink, job)
    writer.write_batch([{"word": "ant", "n": 1}])
    writer.pre_commit(1)
    crash(sink)
    other_job = writer_of(upsert(postgres_server, counts), job + "-other")
    assert len(prepared(pg, job)) == 1  # another job's start leaves it alone

    writer_of(upsert(postgres_server, counts), job)
    assert prepared(pg, job) == []
    assert table_rows(pg, counts) == []
    other_job.close()


# ---------------------------------------------------------------- configuration errors


def test_a_database_that_is_down_at_start_is_named(job):
    from support.pg_server import _free_port

    port = _free_port()
    sink = insert(f"postgresql://postgres@127.0.0.1:{port}/postgres", "counts")
    where = f"127.0.0.1:{port}/postgres"
    with pytest.raises(SinkUnavailableError, match=f"cannot connect to PostgreSQL at {where}"):
        sink.prepare()  # a SinkError that is transient: restarts wait for the database


def test_a_missing_table_is_named(postgres_server):
    with pytest.raises(SinkError, match="table no_such_table does not exist"):
        insert(postgres_server, "no_such_table").prepare()


def test_missing_key_columns_are_named(postgres_server, counts):
    sink = PostgresSink.builder().set_dsn(postgres_server).set_table(counts)
    with pytest.raises(SinkError, match=r"key columns \['name'\] are not in the table"):
        sink.set_key_columns(["name"]).build().prepare()


def test_upserts_need_a_unique_index_on_the_key_columns(postgres_server, events):
    sink = PostgresSink.builder().set_dsn(postgres_server).set_table(events)
    with pytest.raises(SinkError, match="unique index on exactly the key columns"):
        sink.set_key_columns(["word"]).build().prepare()


def test_a_server_without_prepared_transactions_is_told_what_to_set():
    from support.pg_server import running_postgres

    with running_postgres(max_prepared_transactions=0) as dsn:
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute("CREATE TABLE counts (word text PRIMARY KEY, n bigint)")
        sink = PostgresSink.builder().set_dsn(dsn).set_table("counts").build()
        expected = r"set max_prepared_transactions > 0 in postgresql\.conf"
        with pytest.raises(SinkError, match=expected):
            sink.prepare()


def test_a_database_that_goes_away_mid_run_fails_the_attempt_naming_the_sink(
    postgres_server, pg, job, events
):
    sink = insert(postgres_server, events)
    writer = writer_of(sink, job)
    writer.write_batch([{"word": "ant", "n": 1}])
    writer.pre_commit(1)
    writer.commit(1)
    writer.write_batch([{"word": "bee", "n": 1}])
    pg.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE pid <> pg_backend_pid() AND datname = current_database() "
        "AND backend_type = 'client backend' AND query NOT ILIKE '%%pg_terminate_backend%%'"
    )
    with pytest.raises(SinkError, match=f"PostgresSink '{UID}' \\(table {events}\\): cannot"):
        writer.pre_commit(2)
    writer.abort()


# ---------------------------------------------------------------- rows that do not fit

BAD_ROWS = [
    ({"word": "ant", "colour": "red"}, "no column 'colour'"),
    ({"word": "ant", "n": "many"}, "column 'n' \\(integer\\) cannot take str"),
    ({"word": "much-too-long"}, "too long for column 'word'"),
    ({"n": 1}, "column 'word' may not be null"),
    (("ant", 1), "must be a dict"),
    ({"word": "ant", "n": 2**40}, "out of range"),
]


@pytest.mark.parametrize("row, problem", BAD_ROWS, ids=[p for _, p in BAD_ROWS])
def test_a_row_that_does_not_fit_fails_the_job_naming_sink_table_and_row(
    postgres_server, job, events, row, problem
):
    writer = writer_of(insert(postgres_server, events), job)
    with pytest.raises(SinkError) as failure:
        writer.write_batch([{"word": "ok"}, row])
    message = str(failure.value)
    assert f"PostgresSink '{UID}' (table {events})" in message
    assert repr(row) in message
    assert re.search(problem, message)
    writer.abort()


def test_a_missing_key_column_is_a_bad_row_in_upsert_mode(postgres_server, job, counts):
    writer = writer_of(upsert(postgres_server, counts), job)
    with pytest.raises(SinkError, match="key column 'word' is missing"):
        writer.write_batch([{"n": 1}])
    writer.abort()


def test_a_long_bad_row_is_shortened_in_the_error(postgres_server, job, events):
    writer = writer_of(insert(postgres_server, events), job)
    with pytest.raises(SinkError) as failure:
        writer.write_batch([{"word": "x" * 5000}])
    assert "..." in str(failure.value) and len(str(failure.value)) < 600
    writer.abort()


def test_a_row_the_server_rejects_fails_the_job_by_default(postgres_server, job, counts):
    writer = writer_of(upsert(postgres_server, counts), job)
    writer.write_batch([{"word": "ant", "n": 1}, {"word": "bee", "n": -1}])
    with pytest.raises(SinkError, match=r"violates check constraint.*'word': 'bee'"):
        writer.pre_commit(1)
    writer.abort()


def test_bad_rows_go_to_the_dead_letter_table_in_the_same_transaction(
    postgres_server, pg, job, counts
):
    dead = f"{counts}_rejected"
    sink = upsert(postgres_server, counts, dead_letter_table=dead, batch_size=2)
    sink.prepare()
    writer = writer_of(sink, job)
    rows = [
        {"word": "ant", "n": 1},
        {"word": "bee", "n": -1},  # the server rejects it (check constraint)
        {"word": "cat", "n": "x"},  # the sink rejects it before sending
        {"word": "dog", "n": 3},
        ("eel", 4),
    ]
    writer.write_batch(rows)
    writer.pre_commit(1)
    assert table_rows(pg, dead, "row, error") == []  # nothing visible before the commit
    writer.commit(1)

    assert table_rows(pg, counts) == [("ant", 1), ("dog", 3)]
    letters = pg.execute(f"SELECT sink, row, error, failed_at FROM {dead}").fetchall()
    by_row = {json.dumps(row, sort_keys=True): error for _, row, error, _ in letters}
    assert {sink_uid for sink_uid, *_ in letters} == {UID}
    assert all(failed_at is not None for *_, failed_at in letters)
    bee, cat = json.dumps(rows[1], sort_keys=True), json.dumps(rows[2], sort_keys=True)
    assert set(by_row) == {bee, cat, json.dumps(["eel", 4])}
    assert "check constraint" in by_row[bee]
    assert "cannot take str" in by_row[cat]
    writer.close()


def test_a_key_written_by_two_subtasks_fails_after_the_lock_timeout(
    postgres_server, pg, job, counts
):
    first = writer_of(upsert(postgres_server, counts), job, 0, 2)
    second = writer_of(upsert(postgres_server, counts, lock_timeout_ms=200), job, 1, 2)
    first.write_batch([{"word": "ant", "n": 1}])
    first.pre_commit(1)
    second.write_batch([{"word": "ant", "n": 2}])
    with pytest.raises(SinkError, match="should be keyed by them"):
        second.pre_commit(1)
    second.abort()
    first.commit(1)
    first.close()
    assert table_rows(pg, counts) == [("ant", 1)]


# ---------------------------------------------------------------- handles and busy transactions


def old_shape(handle):
    """A handle as releases before the typed handle stored it: a loose dict, no version,
    "checkpoint" and "carry" only when set."""
    state = {"seq": handle["seq"], "gid": handle["gid"], "xid": handle["xid"]}
    for name in ("checkpoint", "carry"):
        if handle.get(name) is not None:
            state[name] = handle[name]
    return state


def test_a_checkpoint_with_handles_of_the_old_dict_shape_restores(postgres_server, pg, job, counts):
    sink = upsert(postgres_server, counts)
    writer = writer_of(sink, job)
    writer.write_batch([{"word": "ant", "n": 1}])
    writer.pre_commit(1)
    new = writer.snapshot_state()
    assert new["pending"][0][1]["v"] == 2 and new["open"]["v"] == 2
    old = {
        "v": 1,
        "pending": [[1, old_shape(new["pending"][0][1])]],
        "open": old_shape(new["open"]),
    }
    assert "v" not in old["pending"][0][1] and "checkpoint" in old["pending"][0][1]
    crash(sink)

    again = upsert(postgres_server, counts)
    writer = writer_of(again, job, restored=1, states=[old])
    assert prepared(pg, job) == []
    assert table_rows(pg, counts) == [("ant", 1)]
    writer.close()


def test_a_handle_in_an_unknown_shape_is_a_restore_error():
    from barrierflow.connectors.postgres import PostgresTransaction
    from barrierflow.errors import StateRestoreError

    with pytest.raises(StateRestoreError, match="unknown PostgreSQL transaction handle"):
        PostgresTransaction.of_state({"v": 9, "seq": 1})
    with pytest.raises(StateRestoreError, match="malformed"):
        PostgresTransaction.of_state({"gid": "bf-x"})


class BusyConnection:
    """A control connection on which every COMMIT/ROLLBACK PREPARED finds the transaction
    busy (another session is finishing it), until `free` is set."""

    def __init__(self):
        self.free = False
        self.statements = 0
        self.closed = False

    def execute(self, statement, *args):
        self.statements += 1
        if not self.free:
            raise psycopg.errors.ObjectNotInPrerequisiteState("prepared transaction is busy")
        return self

    def close(self):
        self.closed = True


def test_a_busy_prepared_transaction_is_tried_again_on_later_calls_and_bounded_by_the_clock():
    """No sleep on the mailbox thread: the commit says busy, the writer keeps the transaction
    pending (and in its snapshot) and tries again on its next call; the sink's clock bounds
    how long it may stay busy."""
    from barrierflow._clock import ManualClock
    from barrierflow.connectors.postgres import PostgresTransaction
    from barrierflow.connectors.two_phase_commit import TwoPhaseCommitWriter
    from barrierflow.errors import TransactionBusyError

    clock = ManualClock()
    sink = insert("postgresql://localhost/db", "events")
    sink._context = SinkContext(UID, 0, 1, 0, "d", "job", clock=clock)
    connection = sink._control = BusyConnection()
    handle = PostgresTransaction(seq=1, gid="bf-gid", xid=None, checkpoint=1)

    with pytest.raises(TransactionBusyError):
        sink.commit(handle)
    clock.advance(10_001)
    with pytest.raises(SinkError, match="stays busy"):
        sink.commit(handle)

    writer = TwoPhaseCommitWriter(sink, sink._context)
    writer._pending = [(1, handle)]
    sink._busy_since.clear()
    writer.commit(1)  # busy: kept
    assert writer._pending == [(1, handle)]
    assert writer.snapshot_state()["pending"] == [[1, handle.as_state()]]
    connection.free = True
    tried = connection.statements
    writer.write_batch([])  # the next call tries again
    assert connection.statements == tried + 1
    assert writer._pending == []
