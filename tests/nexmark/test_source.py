"""Nexmark sources: the generator's splits and pace, and events files read in parallel and
replayed exactly from their checkpointed positions."""

from __future__ import annotations

import itertools
import json
import pickle
import re
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.clocks import ManualClock as OperatorClock
from support.operator_harness import started_source

from barrierflow._clock import ManualClock
from barrierflow.chaos.run_placement import check_run
from barrierflow.connectors.files import BadLine
from barrierflow.connectors.pacing import Pace
from barrierflow.errors import ConfigurationError, SourceError
from barrierflow.nexmark.events_file import EVENTS_SCHEMA, record_batch_of, write_events
from barrierflow.nexmark.generator import GeneratorConfig, event_at, generate_events
from barrierflow.nexmark.job import nexmark_watermarks
from barrierflow.nexmark.model import to_table_row
from barrierflow.nexmark.source import NexmarkFileSource, NexmarkSource
from barrierflow.runtime.operators.source_sink import SourceOperator

CONFIG = GeneratorConfig(seed=11)
EVENTS = generate_events(CONFIG, 2_000)


def readers_for(source, parallelism, positions=None):
    """One reader per subtask, with splits dealt as the JobMaster deals them."""
    splits = source.create_splits()
    readers = [source.create_reader(splits[i::parallelism]) for i in range(parallelism)]
    for reader in readers:
        reader.restore(positions or {})
    return readers


def events_of(batch) -> list:
    """A split batch's events as Python code sees them: Arrow records through the batch's
    converter, whose event times must be the batch's timestamps."""
    if not isinstance(batch.records, pa.RecordBatch):
        return batch.records
    events = batch.converter(batch.records)
    assert [e.date_time for e in events] == list(batch.timestamps)
    return events


def drain_splits(reader, max_records):
    """Every record the reader gives, per split in the order given."""
    per_split: dict[str, list] = {}
    while (batch := reader.poll_split_batch(max_records)) is not None:
        assert not batch.bad, batch.bad
        assert len(batch.records) <= max_records
        per_split.setdefault(batch.split_id, []).extend(events_of(batch))
    return per_split


def drain(reader, max_records=97):
    records = []
    while (batch := reader.poll_batch(max_records)) is not None:
        records.extend(batch)
    return records


def as_multiset(events):
    return Counter(map(repr, events))


# ---- the generator source ---------------------------------------------------------------------


def test_split_k_makes_events_k_k_plus_splits_and_so_on_in_order():
    source = NexmarkSource(CONFIG, 2_000, num_splits=3)
    (reader,) = readers_for(source, 1)
    per_split = drain_splits(reader, 50)
    assert per_split == {f"{k}-of-3": EVENTS[k::3] for k in range(3)}


@pytest.mark.parametrize("parallelism", [1, 2, 5])
def test_the_splits_of_all_readers_together_make_every_event_once(parallelism):
    source = NexmarkSource(CONFIG, 2_000, num_splits=4)
    made = [e for reader in readers_for(source, parallelism) for e in drain(reader)]
    assert len(made) == 2_000
    assert as_multiset(made) == as_multiset(EVENTS)


@settings(max_examples=30)
@given(
    num_splits=st.integers(1, 6),
    parallelism=st.integers(1, 4),
    max_records=st.integers(1, 300),
    polls=st.integers(0, 40),
)
def test_a_restore_from_a_snapshot_makes_exactly_the_events_not_emitted_yet(
    num_splits, parallelism, max_records, polls
):
    source = NexmarkSource(CONFIG, 2_000, num_splits=num_splits)
    before = []
    snapshot = {}
    for reader in readers_for(source, parallelism):
        for _ in range(polls):
            batch = reader.poll_batch(max_records)
            if batch is None:
                break
            before.extend(batch)
        snapshot.update(reader.snapshot())
    # Restored at another parallelism: the positions follow the splits.
    after = [e for reader in readers_for(source, 3, snapshot) for e in drain(reader)]
    assert len(before) + len(after) == 2_000
    assert as_multiset(before + after) == as_multiset(EVENTS)


def test_an_unbounded_source_goes_on_past_any_count():
    source = NexmarkSource(CONFIG, None, num_splits=2)
    assert source.bounded is False
    (reader,) = readers_for(source, 1)
    made = [e for _ in range(30) for e in reader.poll_batch(100)]
    assert as_multiset(made) == as_multiset(generate_events(CONFIG, 3_000))
    assert reader.snapshot() == {"0-of-2": 3_000, "1-of-2": 3_001}
    assert made[-1] == event_at(CONFIG, 2_999)


def test_a_paced_source_emits_event_n_no_earlier_than_n_over_the_rate_after_its_first_poll():
    clock = ManualClock(epoch_ms=5_000_000)
    source = NexmarkSource(CONFIG, 1_000, num_splits=2, events_per_second=100, clock=clock)
    (reader,) = readers_for(source, 1)
    assert [e for e in reader.poll_batch(1_000)] == [EVENTS[0]]  # event 0 is due at once
    assert reader.poll_batch(1_000) == []  # event 1 is due after 10 ms
    clock.advance(9)
    assert reader.poll_batch(1_000) == []
    clock.advance(41)  # 50 ms: events up to 5
    made = reader.poll_batch(1_000) + reader.poll_batch(1_000)
    assert sorted(made, key=EVENTS.index) == EVENTS[1:6]
    assert reader.poll_batch(1_000) == []
    clock.advance(10_000)  # long behind: catches up at once, a batch at a time
    assert len(drain(reader, 300)) == 994


def test_a_paced_source_with_a_wall_clock_base_time_keeps_event_time_with_the_wall_clock():
    clock = ManualClock(epoch_ms=1_800_000_000_000)
    config = GeneratorConfig(seed=2, base_time=None, first_event_rate=1_000)
    source = NexmarkSource(config, 5_000, num_splits=3, events_per_second=1_000, clock=clock)
    assert source.config.base_time == 1_800_000_000_000  # decided once, on the driver
    shipped = pickle.loads(pickle.dumps(source))  # as the tasks get it
    assert (shipped.config, shipped.wall_start_ms) == (source.config, 1_800_000_000_000)
    clock.advance(250)  # the job took 250 ms to start
    readers = readers_for(source, 2)
    emitted = 0
    for _ in range(40):
        for reader in readers:
            while batch := reader.poll_batch(200):
                emitted += len(batch)
                assert all(event.date_time <= clock.epoch_millis() for event in batch)
        clock.advance(37)
    assert emitted == 1 + 1_000 * (250 + 39 * 37) // 1_000  # every event due, none early


def test_a_paced_reader_restored_mid_way_resumes_at_once():
    clock = ManualClock()
    source = NexmarkSource(CONFIG, 1_000, num_splits=1, events_per_second=10, clock=clock)
    (reader,) = readers_for(source, 1, {"0-of-1": 700})
    assert reader.poll_batch(100) == [EVENTS[700]]
    assert reader.poll_batch(100) == []
    clock.advance(100)
    assert reader.poll_batch(100) == [EVENTS[701]]


def test_a_full_speed_check_run_drops_the_pace(tmp_path):
    with check_run(tmp_path, full_speed=True):
        source = NexmarkSource(CONFIG, 100, events_per_second=5)
    assert source.events_per_second is None
    assert NexmarkSource(CONFIG, 100, events_per_second=5).events_per_second == 5


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"count": -1}, "count must be None or an int >= 0, got -1"),
        ({"num_splits": 0}, "num_splits must be an int >= 1, got 0"),
        ({"events_per_second": 0}, "events_per_second must be None or a positive number"),
        ({"events_per_second": float("inf")}, "events_per_second must be None or a positive"),
    ],
)
def test_bad_generator_source_settings_are_refused(arguments, message):
    settings_ = {"count": 10, **arguments}
    count = settings_.pop("count")
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        NexmarkSource(CONFIG, count, **settings_)


def test_the_source_operator_stamps_generated_events_with_their_date_time():
    source = NexmarkSource(CONFIG, 120, num_splits=2)
    operator, output = started_source(source, OperatorClock(), strategy=nexmark_watermarks())
    while operator.emit_next(50) != SourceOperator.END_OF_INPUT:
        pass
    records = [item for item in output.take() if item[0] == "record"]
    assert sorted(records, key=lambda r: EVENTS.index(r[1])) == [
        ("record", event, event.date_time) for event in EVENTS[:120]
    ]


# ---- events files -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("events")
    write_events(folder / "events.jsonl", CONFIG, 2_000)
    write_events(folder / "events.parquet", CONFIG, 2_000, chunk_events=300)
    return folder


def test_a_json_lines_file_is_cut_into_byte_ranges_at_line_starts(files):
    path = files / "events.jsonl"
    data = path.read_bytes()
    splits = NexmarkFileSource(path, min_splits=7).create_splits()
    assert len(splits) == 7
    bounds = [split.payload[1:] for split in splits]
    assert bounds[0][0] == 0 and bounds[-1][1] == len(data)
    for (_, end), (start, _) in itertools.pairwise(bounds):
        assert end == start and data[start - 1 : start] == b"\n"
    assert len({split.split_id for split in splits}) == 7
    tenth = -(-len(data) // 10)
    by_size = NexmarkFileSource(path, min_splits=1, max_split_bytes=tenth).create_splits()
    assert len(by_size) == 10


def test_a_parquet_file_has_a_split_per_row_group(files):
    splits = NexmarkFileSource(files / "events.parquet").create_splits()
    assert [split.split_id for split in splits] == [f"events.parquet#{i}" for i in range(7)]
    assert [split.payload[2] for split in splits] == [300] * 6 + [200]


@pytest.mark.parametrize("name", ["events.jsonl", "events.parquet"])
def test_each_split_reads_its_stretch_of_events_in_order_and_together_all_once(files, name):
    source = NexmarkFileSource(files / name, min_splits=5, chunk_bytes=10_000)
    splits = source.create_splits()
    (reader,) = readers_for(source, 1)
    per_split = drain_splits(reader, 64)
    assert list(per_split) == [split.split_id for split in splits]
    assert [e for split in splits for e in per_split[split.split_id]] == EVENTS
    assert all(per_split.values())


@pytest.mark.parametrize("name", ["events.jsonl", "events.parquet"])
@pytest.mark.parametrize("parallelism", [2, 3])
def test_parallel_readers_of_one_file_read_every_event_exactly_once(files, name, parallelism):
    source = NexmarkFileSource(files / name, min_splits=6, chunk_bytes=30_000)
    made = [e for reader in readers_for(source, parallelism) for e in drain(reader)]
    assert len(made) == 2_000
    assert as_multiset(made) == as_multiset(EVENTS)


@settings(max_examples=20)
@given(
    name=st.sampled_from(["events.jsonl", "events.parquet"]),
    max_records=st.integers(1, 400),
    polls=st.integers(0, 30),
    chunk_bytes=st.integers(3_000, 60_000),
)
def test_a_restore_from_a_snapshot_continues_exactly_where_it_stood(
    files, name, max_records, polls, chunk_bytes
):
    source = NexmarkFileSource(files / name, min_splits=4, chunk_bytes=chunk_bytes)
    (reader,) = readers_for(source, 1)
    before = []
    for _ in range(polls):
        batch = reader.poll_batch(max_records)
        if batch is None:
            break
        before.extend(batch)
    snapshot = reader.snapshot()
    reader.close()
    after = [e for r in readers_for(source, 2, snapshot) for e in drain(r)]
    assert len(before) + len(after) == 2_000
    assert as_multiset(before + after) == as_multiset(EVENTS)
    assert before == EVENTS[: len(before)]  # one reader, splits in order


def test_the_file_reader_gives_table_shaped_record_batches(files):
    source = NexmarkFileSource(files / "events.jsonl", min_splits=2)
    (reader,) = readers_for(source, 1)
    rows = []
    while (polled := reader.poll_split_batch(500)) is not None:
        if len(polled.records):
            assert polled.records.schema == EVENTS_SCHEMA
            assert polled.records.num_rows <= 500
            rows.extend(polled.records.to_pylist())
    assert rows == [to_table_row(e) for e in EVENTS]


def test_blank_lines_and_a_last_line_without_newline_are_fine(tmp_path):
    lines = [json.dumps(to_table_row(e)) for e in EVENTS[:30]]
    text = "\n\n".join(lines[:10]) + "\n   \n\r\n" + "\n".join(lines[10:])  # no final newline
    path = tmp_path / "spaced.jsonl"
    path.write_text(text)
    source = NexmarkFileSource(path, min_splits=4, chunk_bytes=700)
    (reader,) = readers_for(source, 1)
    assert drain(reader, 7) == EVENTS[:30]
    assert reader.snapshot() == {s.split_id: s.payload[2] for s in source.create_splits()}


def test_lines_longer_than_a_chunk_are_read_whole(tmp_path):
    path = tmp_path / "long.jsonl"
    write_events(path, CONFIG, 120)
    source = NexmarkFileSource(path, min_splits=3, chunk_bytes=50)
    (reader,) = readers_for(source, 1)
    assert drain(reader, 7) == EVENTS[:120]


def test_an_empty_file_has_nothing_to_read(tmp_path):
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (reader,) = readers_for(NexmarkFileSource(tmp_path / "empty.jsonl"), 1)
    assert drain(reader) == []


# ---- bad input --------------------------------------------------------------------------------

BAD_LINES = {
    "not-json": ('{"event_type": 2, "bid": {', "is not a valid Nexmark event (JSON parse error"),
    "wrong-type": (
        '{"event_type": 2, "bid": {"auction": "one"}}',
        "is not a valid Nexmark event (JSON parse error",
    ),
    "not-an-object": ("[1, 2]", "is not a valid Nexmark event"),
    "unknown-type": ('{"event_type": 7}', "event_type must be 0, 1 or 2, got 7"),
    "no-type": ('{"bid": null}', "event_type must be 0, 1 or 2, got None"),
    "missing-struct": ('{"event_type": 1, "bid": null}', "needs its 'auction' object"),
    "missing-field": ('{"event_type": 0, "person": {"id": 5}}', "its 'person' object lacks 'name'"),
}


def file_with_bad_line(tmp_path: Path, bad: str, at: int = 1_234) -> tuple[Path, int]:
    lines = [json.dumps(to_table_row(e)) for e in EVENTS]
    lines.insert(at, bad)
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path, len("\n".join(lines[:at])) + 1


@pytest.mark.parametrize("kind", list(BAD_LINES))
def test_a_bad_line_raises_naming_the_file_line_and_byte_offset(tmp_path, kind):
    bad, reason = BAD_LINES[kind]
    path, offset = file_with_bad_line(tmp_path, bad)
    (reader,) = readers_for(NexmarkFileSource(path, min_splits=3, chunk_bytes=50_000), 1)
    with pytest.raises(SourceError) as failure:
        drain(reader, 100)
    message = str(failure.value)
    assert message.startswith(f"{path.as_uri()}: line 1235 (byte offset {offset}) ")
    assert reason in message


@pytest.mark.parametrize("kind", ["not-json", "unknown-type"])
def test_reading_goes_on_past_a_reported_bad_line_and_a_restore_does_not_read_it_again(
    tmp_path, kind
):
    path, offset = file_with_bad_line(tmp_path, BAD_LINES[kind][0])
    source = NexmarkFileSource(path, min_splits=2, chunk_bytes=20_000)
    (reader,) = readers_for(source, 1)
    good, bad = [], []
    while (batch := reader.poll_split_batch(300)) is not None:
        good.extend(events_of(batch))
        bad.extend(batch.bad)
        if bad and len(good) < 1_500:
            snapshot = reader.snapshot()
            resumed = readers_for(source, 1, snapshot)[0]
            rest = drain_splits(resumed, 300)
            assert [e for records in rest.values() for e in records] == EVENTS[len(good) :]
    assert good == EVENTS
    (line,) = bad
    assert isinstance(line, BadLine)
    assert (line.offset, line.line, line.raw) == (offset, 1235, BAD_LINES[kind][0].encode())
    assert line.describe("events").startswith(
        f"source 'events': cannot decode the record at byte offset {offset} of split "
        f"'{line.split_id}': line 1235 of {path.as_uri()} "
    )


def test_the_source_operator_fails_the_task_on_a_bad_line_naming_it(tmp_path):
    path, offset = file_with_bad_line(tmp_path, '{"event_type": 9}', at=10)
    operator, _ = started_source(NexmarkFileSource(path, min_splits=1), name="events")
    with pytest.raises(SourceError, match=rf"byte offset {offset} .*line 11 of .*bad\.jsonl"):
        while operator.emit_next(1_000) != SourceOperator.END_OF_INPUT:
            pass


def test_a_bad_parquet_row_names_its_row_and_row_group(tmp_path):
    batch = record_batch_of(EVENTS[:50])
    types = batch.column("event_type").to_pylist()
    types[17] = 4
    broken = batch.set_column(0, "event_type", pa.array(types, type=pa.int32()))
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.Table.from_batches([broken]), path, row_group_size=20)
    (reader,) = readers_for(NexmarkFileSource(path), 1)
    with pytest.raises(SourceError, match=r"row 17 of row group 0 of .*bad\.parquet is not a "):
        drain(reader)


def test_a_parquet_file_of_another_shape_is_refused_naming_it(tmp_path):
    path = tmp_path / "other.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), path)
    (reader,) = readers_for(NexmarkFileSource(path), 1)
    with pytest.raises(SourceError, match=r"other\.parquet: row group 0 is not in the Nexmark"):
        drain(reader)


def test_a_missing_file_or_an_unknown_kind_of_file_is_refused(tmp_path):
    with pytest.raises(SourceError, match=r"events file .*nothing\.jsonl does not exist"):
        NexmarkFileSource(tmp_path / "nothing.jsonl").create_splits()
    with pytest.raises(ConfigurationError, match=r"\.jsonl, \.json, \.ndjson .* or \.parquet"):
        NexmarkFileSource(tmp_path / "events.csv")


# ---- the job builders -------------------------------------------------------------------------


@pytest.mark.parametrize("origin", ["file", "generator"])
def test_the_events_come_straight_from_the_source_with_uid_events(files, origin):
    from barrierflow import StreamExecutionEnvironment
    from barrierflow.nexmark.job import events_from_file, events_from_generator

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    if origin == "file":
        events = events_from_file(env, files / "events.parquet")
    else:
        events = events_from_generator(env, CONFIG, 1_000, events_per_second=500)
    events.map(lambda event: event).uid("identity").print().uid("out")
    graph = env.get_job_graph()
    (source_vertex,) = [v for v in graph.vertices if v.is_source]
    source = source_vertex.operators[0]
    assert (source.uid, source.name) == ("events", "events")
    assert graph.operator_uids() == ["events", "identity", "out"]  # no parse or assign step
    kind = NexmarkFileSource if origin == "file" else NexmarkSource
    assert isinstance(source.transformation.source, kind)


def test_a_source_paced_from_a_later_instant_makes_nothing_before_it():
    clock = ManualClock(1_000_000)
    config = GeneratorConfig(base_time=1_005_000, first_event_rate=1000)
    source = NexmarkSource(
        config, 100, num_splits=1, events_per_second=1000, start_at_ms=1_005_000, clock=clock
    )
    reader = source.create_reader(source.create_splits())
    assert reader.poll_batch(50) == []
    clock.advance(5_000)  # event 0 is due now
    assert [e.date_time for e in reader.poll_batch(50)] == [1_005_000]
    clock.advance(10)  # ten more: event time is the wall clock at which each is made
    assert [e.date_time for e in reader.poll_batch(50)] == list(range(1_005_001, 1_005_011))


def test_a_file_source_paced_per_reader_emits_no_more_than_its_rate(tmp_path):
    path = tmp_path / "events.jsonl"
    write_events(path, GeneratorConfig(), 2_000)
    now = [0.0]
    source = NexmarkFileSource(path, min_splits=2).with_rate_per_reader(1_000)
    (reader,) = readers_for(source, 1)
    reader._pace = Pace(1_000, clock=lambda: now[0])  # the same pace on a hand-moved clock
    assert len(reader.poll_split_batch(500).records) == 0  # the clock starts now
    now[0] = 0.2
    assert len(reader.poll_split_batch(500).records) == 200
    assert len(reader.poll_split_batch(500).records) == 0
    now[0] = 5.0  # far behind: it catches up by at most one second's worth (over splits)
    caught_up = sum(len(reader.poll_split_batch(5_000).records) for _ in range(10))
    assert caught_up == 1_000
    assert source.rate_per_reader == 1_000


def test_a_file_source_refuses_a_rate_that_is_not_positive(tmp_path):
    with pytest.raises(ConfigurationError, match="events_per_second must be a positive"):
        NexmarkFileSource(tmp_path / "events.jsonl").with_rate_per_reader(0)
