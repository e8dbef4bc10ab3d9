"""Issue 13's acceptance: NATS JetStream -> keyed running count -> PostgreSQL (upsert) and Delta
Lake, exactly once while task processes are killed at random moments; and a database that
goes away mid-run fails attempts until it is back, then the job finishes exactly once.

The servers are real (support/nats_server.py, support/pg_server.py) and the APIs are the ones the
issue names. The input is deterministic, so the expected contents are computed independently
of the job: the upserted table holds each word's total, the Delta table one row per
(word, n) for n = 1..total (`running_count_rows`).
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from support.pg_server import postgres_server_process

from barrierflow import RestartStrategies, StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.chaos import FailureInjector, plan_failures
from barrierflow.connectors.nats import NatsSource
from barrierflow.connectors.postgres import PostgresSink, gid_prefix

from .jobs import (
    delta_app_transactions,
    recovering_environment,
    running_count_rows,
    running_counts,
    wait_for_attempt,
    word_of,
)

pytestmark = pytest.mark.spark

SUBJECTS = ("a", "b", "c")
PACE_S = 0.004
"""Each event costs this much in the map, so a bounded input lasts long enough to be hit."""


def publish_words(server, stream: str, count: int) -> list[str]:
    """`count` events {"word", "i"} over the stream's subjects; returns the words."""
    words = [word_of(i) for i in range(count)]
    server.create_stream(stream, [f"{stream}.{s}" for s in SUBJECTS])
    server.publish(
        (f"{stream}.{SUBJECTS[i % len(SUBJECTS)]}", {"word": word, "i": i})
        for i, word in enumerate(words)
    )
    return words


def paced_word(event: dict) -> str:
    time.sleep(PACE_S)  # the job's work per event (a paced input, not a wait for a state)
    return event["word"]


def counting_job(
    tmp_path: Path, nats_url: str, stream: str, restarts: int, delay_ms: int
) -> tuple[StreamExecutionEnvironment, object]:
    """The keyed running count of the issue's acceptance test, rows {"word", "n"}."""
    env = recovering_environment(tmp_path / "checkpoints")
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(restarts, delay_ms))
    source = (
        NatsSource.builder()
        .set_servers(nats_url)
        .set_stream(stream)
        .set_value_only_deserializer(json.loads)
        .set_bounded()
        .build()
    )
    events = env.from_source(source, WatermarkStrategy.no_watermarks(), "events").uid("events")
    rows = (
        running_counts(events.map(paced_word).uid("word"))
        .map(lambda pair: {"word": pair[0], "n": pair[1]})
        .uid("row")
    )
    return env, rows


def schema_dsn(server_dsn: str, psycopg) -> str:
    """A fresh schema on the session's server, and a DSN whose search path is it, so the
    table can be called "counts" as the issue writes it without meeting other tests'."""
    schema = f"acceptance_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_dsn, autocommit=True) as pg:
        pg.execute(f"CREATE SCHEMA {schema}")
        pg.execute(f"CREATE TABLE {schema}.counts (word text PRIMARY KEY, n bigint NOT NULL)")
    return f"{server_dsn}?options=-csearch_path%3D{schema}"


def upsert_sink(dsn: str) -> PostgresSink:
    return PostgresSink.builder().set_dsn(dsn).set_table("counts").set_key_columns(["word"]).build()


def pg_contents(dsn: str, psycopg) -> tuple[dict, list[str]]:
    """The table's rows as {word: n}, and every prepared transaction's gid."""
    with psycopg.connect(dsn, autocommit=True) as pg:
        table = dict(pg.execute("SELECT word, n FROM counts").fetchall())
        prepared = [gid for (gid,) in pg.execute("SELECT gid FROM pg_prepared_xacts")]
    return table, prepared


def completed_checkpoints(checkpoints: Path, job_name: str) -> set[int]:
    """The ids the job's persisted checkpoint history lists as COMPLETED."""
    history = checkpoints / job_name / "_checkpoint_history.jsonl"
    records = [json.loads(line) for line in history.read_text().splitlines() if line.strip()]
    return {r["id"] for r in records if r["status"] == "COMPLETED"}


def test_nats_to_postgres_and_delta_is_exactly_once_with_tasks_killed_at_random(
    spark, tmp_path, nats_server, postgres_server
):
    psycopg = pytest.importorskip("psycopg")
    deltalake = pytest.importorskip("deltalake")
    from barrierflow.connectors.delta import DeltaSink

    stream = nats_server.fresh_name("events")
    words = publish_words(nats_server, stream, 3_000)
    dsn = schema_dsn(postgres_server, psycopg)
    table = tmp_path / "delta-counts"
    env, rows = counting_job(tmp_path, nats_server.url, stream, restarts=30, delay_ms=100)
    rows.sink_to(upsert_sink(dsn)).uid("counts-db")
    rows.sink_to(DeltaSink.for_path(str(table))).uid("counts-delta")

    job_name = f"acceptance-{stream}"
    job = env.execute_async(job_name)
    plan = plan_failures(4, ["kill", "exception"], seed=13, max_gap_s=0.5)
    injector = FailureInjector(job, plan, report=print, recovery_timeout_s=120)
    injector.start()
    try:
        result = job.wait(timeout=600)
    finally:
        injector.stop()

    assert injector.error is None, injector.error
    assert len(injector.records) >= 3, "the input ended before three failures were made"
    assert result.restarts >= len(injector.records)
    table_rows, prepared = pg_contents(dsn, psycopg)
    assert table_rows == Counter(words)
    assert [gid for gid in prepared if gid.startswith(gid_prefix(job_name, "counts-db"))] == []

    files = deltalake.DeltaTable(str(table)).file_uris()
    read_by_spark = spark.read.parquet(*files).collect()
    assert Counter((row["word"], row["n"]) for row in read_by_spark) == running_count_rows(words)
    commits = delta_app_transactions(table)
    assert commits and max(commits.values()) == 1  # one commit per checkpoint and subtask
    lineage = (tmp_path / "checkpoints" / job_name / "_lineage").read_text().strip()
    expected = {f"{job_name}/counts-delta/{lineage}/{i}" for i in (0, 1)}
    assert {app_id for app_id, _ in commits} <= expected  # the folder's lineage names them
    completed = completed_checkpoints(tmp_path / "checkpoints", job_name)
    assert {version for _, version in commits} <= completed


def test_a_database_that_goes_away_mid_run_fails_attempts_until_it_is_back(
    spark, tmp_path, nats_server
):
    psycopg = pytest.importorskip("psycopg")

    stream = nats_server.fresh_name("events")
    words = publish_words(nats_server, stream, 2_000)
    with postgres_server_process() as server:
        with psycopg.connect(server.dsn, autocommit=True) as pg:
            pg.execute("CREATE TABLE counts (word text PRIMARY KEY, n bigint NOT NULL)")
        env, rows = counting_job(tmp_path, nats_server.url, stream, restarts=100, delay_ms=200)
        rows.sink_to(upsert_sink(server.dsn)).uid("counts-db")

        job = env.execute_async("pg-goes-away")
        assert job.wait_for_completed_checkpoints(2, timeout=60), "ended before two checkpoints"
        attempt = job.attempt
        server.stop()
        # the attempt running fails, and so do at least two restarts while it is away: a
        # database that cannot be reached while a task restores is no damaged state (which
        # fails the job when it fails twice at one restore point), the restart strategy waits
        wait_for_attempt(job, attempt + 3, timeout=60)
        server.start()
        result = job.wait(timeout=300)

        assert result.restarts >= 3
        table_rows, prepared = pg_contents(server.dsn, psycopg)
    assert table_rows == Counter(words)
    assert prepared == []
