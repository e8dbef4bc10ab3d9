"""A keyed running count into PostgreSQL (support/pg_server.py) with a task killed mid-run: the
upserted table holds exactly the final counts, the inserted table every (word, n) once, and
no prepared transaction is left behind."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest

from barrierflow.connectors.postgres import PostgresSink, gid_prefix

from .jobs import (
    generated_words,
    recovering_environment,
    running_count_rows,
    running_counts,
    wait_for_attempt,
    word_of,
)

pytestmark = pytest.mark.spark

RECORDS = 12_000


def test_a_running_count_upserted_into_postgres_survives_a_killed_task_exactly(
    spark, tmp_path, postgres_server
):
    psycopg = pytest.importorskip("psycopg")
    counts, events = f"counts_{uuid.uuid4().hex[:8]}", f"events_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_server, autocommit=True) as pg:
        pg.execute(f"CREATE TABLE {counts} (word text PRIMARY KEY, n bigint NOT NULL)")
        pg.execute(f"CREATE TABLE {events} (word text NOT NULL, n bigint NOT NULL)")

    env = recovering_environment(tmp_path / "checkpoints")
    rows = (
        running_counts(generated_words(env, RECORDS, 4000, gate=tmp_path / "failed"))
        .map(lambda pair: {"word": pair[0], "n": pair[1]})
        .uid("row")
    )
    upsert = (
        PostgresSink.builder()
        .set_dsn(postgres_server)
        .set_table(counts)
        .set_key_columns(["word"])
        .build()
    )
    rows.sink_to(upsert).uid("counts")
    rows.sink_to(PostgresSink.builder().set_dsn(postgres_server).set_table(events).build()).uid(
        "events"
    )
    job_name = f"pg-{counts}"
    job = env.execute_async(job_name)
    assert job.wait_for_completed_checkpoints(2, timeout=120)  # deploying on a busy machine
    counting = next(v.vertex_id for v in job.job_graph.vertices if "Reduce" in v.name)
    job.inject_failure("executor", counting, 1)
    wait_for_attempt(job, 1, timeout=60)
    (tmp_path / "failed").touch()  # the rest of the input runs at full pace
    result = job.wait(timeout=120)

    assert result.restarts >= 1
    words = [word_of(i) for i in range(RECORDS)]
    with psycopg.connect(postgres_server, autocommit=True) as pg:
        assert dict(pg.execute(f"SELECT word, n FROM {counts}").fetchall()) == Counter(words)
        inserted = Counter(pg.execute(f"SELECT word, n FROM {events}").fetchall())
        assert inserted == running_count_rows(words)
        left = [gid for (gid,) in pg.execute("SELECT gid FROM pg_prepared_xacts").fetchall()]
    ours = [gid_prefix(name, uid) for name in ("", job_name) for uid in ("counts", "events")]
    assert [gid for gid in left if gid.startswith(tuple(ours))] == []
