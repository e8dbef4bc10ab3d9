"""What the Nexmark query tests share: an events file, DuckDB views of it, a query run on
Spark (optionally with a task killed mid-run) and the committed rows as multisets.

    path = events_file(tmp_path, 20_000)
    rows = run_query(tmp_path / "run", "q5", path, kill="q5-slices")
    con = duckdb.connect()
    duckdb_views(con, path)           # person, auction, bid with flink-nexmark's columns
    assert as_multiset(rows) == as_multiset(sql_rows(con, "SELECT ..."))

A query's rows are dicts keyed by its output column names (`"op"` first for an updating
query: fold them with `changelog`). Times are epoch milliseconds in the file, in DuckDB's
views and in the output.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

__all__ = [
    "as_multiset",
    "changelog",
    "duckdb_views",
    "events_file",
    "read_output",
    "run_query",
    "sql_rows",
]

KILL_RUN_SECONDS = 6.0
"""How long a run with a task killed reads its events (paced), so that the kill, after two
completed checkpoints, lands while the job still reads."""


def events_file(
    tmp_path: Path, count: int, seed: int = 0, out_of_order_group_size: int = 1, **config: Any
) -> Path:
    """A JSON Lines file of `count` generated events (flink-nexmark's table shape); `config`
    sets other `GeneratorConfig` fields (e.g. a higher event rate, for denser windows)."""
    from barrierflow.nexmark.events_file import write_events
    from barrierflow.nexmark.generator import GeneratorConfig

    path = Path(tmp_path) / f"events-{count}-{seed}-{out_of_order_group_size}.jsonl"
    config.update(seed=seed, out_of_order_group_size=out_of_order_group_size)
    write_events(path, GeneratorConfig(**config), count)
    return path


_PERSON = (
    "STRUCT(id BIGINT, name VARCHAR, emailAddress VARCHAR, creditCard VARCHAR, city VARCHAR, "
    "state VARCHAR, dateTime BIGINT, extra VARCHAR)"
)
_AUCTION = (
    "STRUCT(id BIGINT, itemName VARCHAR, description VARCHAR, initialBid BIGINT, "
    "reserve BIGINT, dateTime BIGINT, expires BIGINT, seller BIGINT, category BIGINT, "
    "extra VARCHAR)"
)
_BID = (
    "STRUCT(auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, "
    "dateTime BIGINT, extra VARCHAR)"
)


def duckdb_views(con: Any, events_path: Path) -> None:
    """Views `person`, `auction` and `bid` over the events file, with flink-nexmark's column
    names (its `ddl_views.sql`) and times as epoch-ms BIGINTs."""
    columns = (
        f"{{'event_type': 'INTEGER', 'person': '{_PERSON}', 'auction': '{_AUCTION}', "
        f"'bid': '{_BID}'}}"
    )
    con.execute(f"""
        CREATE OR REPLACE VIEW nexmark_events AS
        SELECT * FROM read_json('{events_path}', format = 'newline_delimited',
                                columns = {columns})""")
    for view, event_type in (("person", 0), ("auction", 1), ("bid", 2)):
        con.execute(f"""
            CREATE OR REPLACE VIEW {view} AS
            SELECT {view}.* FROM nexmark_events WHERE event_type = {event_type}""")


def sql_rows(con: Any, sql: str) -> list[dict[str, Any]]:
    """The rows of a DuckDB query as dicts keyed by its column names."""
    relation = con.sql(sql)
    names = relation.columns
    return [dict(zip(names, row, strict=True)) for row in relation.fetchall()]


class Throttle:
    """Passes records on at most `records_per_second` per subtask (a pacing map for tests:
    it makes a file-read job last long enough for a kill to land mid-run)."""

    def __init__(self, records_per_second: float) -> None:
        self.interval = 1.0 / records_per_second
        self.started: float | None = None
        self.seen = 0

    def __call__(self, event: Any) -> Any:
        now = time.monotonic()
        if self.started is None:
            self.started = now
        self.seen += 1
        ahead = self.started + self.seen * self.interval - now
        if ahead > 0.01:  # sleep in slices of at least 10 ms, not once per record
            time.sleep(ahead)
        return event


def run_query(
    tmp_path: Path,
    name: str,
    events_path: Path,
    *,
    parallelism: int = 2,
    checkpoint_ms: int = 300,
    kill: str | None = None,
    kill_subtask: int = 0,
    until: Callable[[list[dict[str, Any]]], bool] | None = None,
    timeout: float = 300.0,
    changelog: bool = False,
) -> list[dict[str, Any]]:
    """Run query `name` over the events file on Spark and return every committed row
    (`changelog`: with the hashmap backend's changelog checkpoints).

    With `kill` (the uid of one of the query's operators, e.g. "q5-slices"), the events are
    paced to last about `KILL_RUN_SECONDS`; once two checkpoints completed, the stream-task
    process of subtask `kill_subtask` of the vertex holding that operator is killed
    (SIGKILL), and the run must have restarted at least once.

    With `until` (a test of the committed rows), the events file is read by a source that
    keeps watching for more (unbounded), and the job is cancelled once `until` holds (or
    fails the test after `timeout` s): for processing-time windows, which fire only while
    the job runs, never at the end of its input (as in Flink).
    """
    from barrierflow import RestartStrategies, StreamExecutionEnvironment
    from barrierflow.nexmark.job import events_from_file, query_output
    from barrierflow.nexmark.runner import count_events

    tmp_path = Path(tmp_path)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    env.enable_checkpointing(checkpoint_ms)
    env.enable_changelog_state_backend(changelog)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 200))
    # Paced when a task is killed: each source subtask reads a part of the file.
    rate = count_events(str(events_path)) / KILL_RUN_SECONDS / parallelism if kill else None
    if until is None:
        events = events_from_file(env, str(events_path), rate_per_reader=rate)
    else:
        events = _watched_events(env, tmp_path, Path(events_path))
        if rate is not None:
            events = events.map(Throttle(rate)).uid("test-pace")
    output = tmp_path / "out"
    query_output(events, name, str(output))
    job = env.execute_async(f"nexmark-{name}" + ("-kill" if kill else ""))
    if kill is not None:
        assert job.wait_for_completed_checkpoints(2, timeout=120), "no checkpoint completed"
        job.kill_task_process(_vertex_of(job.job_graph, kill), kill_subtask)
    if until is not None:
        _cancel_once(job, lambda: until(read_output(output)), timeout)
        assert kill is None or job.attempt >= 1, "the killed task did not make the job restart"
        return read_output(output)
    result = job.wait(timeout=timeout)
    if kill is not None:
        assert result.restarts >= 1, "the killed task did not make the job restart"
    return read_output(output)


def _watched_events(env: Any, tmp_path: Path, events_path: Path) -> Any:
    """`events_from_file`'s events, read by a monitoring (never-ending) FileSource from a
    folder of its own holding (a link to) the events file."""
    from barrierflow import WatermarkStrategy
    from barrierflow.connectors.files import FileSource
    from barrierflow.nexmark.job import EVENTS_UID, nexmark_watermarks
    from barrierflow.nexmark.model import from_table_row

    folder = tmp_path / "watched-events"
    folder.mkdir()
    try:
        os.link(events_path, folder / events_path.name)
    except OSError:
        shutil.copy(events_path, folder / events_path.name)
    source = FileSource.for_json_lines(str(folder)).monitor_continuously(200)
    return (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "watched events")
        .uid("watched-events")
        .map(from_table_row)
        .uid("events-parse")
        .assign_timestamps_and_watermarks(nexmark_watermarks())
        .uid(EVENTS_UID)
    )


def _cancel_once(job: Any, done: Callable[[], bool], timeout: float) -> None:
    """Poll `done` (every 0.2 s, for at most `timeout` s), then cancel the job."""
    from barrierflow.errors import JobExecutionError

    deadline = time.monotonic() + timeout
    while not done():
        if job.join(0.2):
            job.wait()  # raises the job's error if it failed
            raise AssertionError("the unbounded job ended on its own")
        if time.monotonic() > deadline:
            job.cancel()
            raise AssertionError(f"the committed rows were not done within {timeout} s")
    job.cancel()
    try:
        job.wait(timeout=120)
    except JobExecutionError as cancelled:
        assert "cancelled" in str(cancelled), cancelled


def _vertex_of(job_graph: Any, uid: str) -> int:
    for vertex in job_graph.vertices:
        if any(op.uid == uid for op in vertex.operators):
            return vertex.vertex_id
    raise AssertionError(f"no operator with uid {uid!r} in {job_graph.operator_uids()}")


def read_output(folder: Path) -> list[dict[str, Any]]:
    """Every committed row of a FileSink folder (JSON Lines part files)."""
    rows: list[dict[str, Any]] = []
    for part in sorted(Path(folder).glob("part-*")):
        rows.extend(json.loads(line) for line in part.read_text().splitlines() if line)
    return rows


def _hashable(row: Any) -> Any:
    if isinstance(row, dict):
        return tuple(sorted((key, _hashable(value)) for key, value in row.items()))
    if isinstance(row, list):
        return tuple(_hashable(value) for value in row)
    return row


def as_multiset(rows: Iterable[Any]) -> Counter:
    """Rows as a multiset of hashable values (a dict becomes its sorted (key, value) pairs).

    >>> as_multiset([{"b": 1, "a": [2]}, {"a": [2], "b": 1}])
    Counter({(('a', (2,)), ('b', 1)): 2})
    """
    return Counter(_hashable(row) for row in rows)


_SIGN = {"+I": 1, "+U": 1, "-U": -1, "-D": -1}


def changelog(rows: Iterable[dict[str, Any]]) -> Counter:
    """The net multiset of an updating query's rows (without their "op"): +I and +U add
    one, -U and -D take one back. Part files interleave the subtasks' rows, so the rows are
    summed in any order; a row taken back more often than added is an assertion error.

    >>> net = changelog([{"op": "-U", "n": 1}, {"op": "+I", "n": 1}, {"op": "+U", "n": 2}])
    >>> net == as_multiset([{"n": 2}])
    True
    """
    net: Counter = Counter()
    for row in rows:
        op = row.get("op")
        if op not in _SIGN:
            raise AssertionError(f"a changelog row needs an op among +I +U -U -D: {row}")
        net[_hashable({key: value for key, value in row.items() if key != "op"})] += _SIGN[op]
    taken_back = {row: count for row, count in net.items() if count < 0}
    assert not taken_back, f"rows taken back more often than added: {taken_back}"
    return +net
