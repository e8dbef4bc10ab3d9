"""NatsSource against a real nats-server with JetStream (started by the `nats_server` fixture):
splits per subject, stream-sequence offsets that replay exactly, bounded and unbounded
reading, per-split timestamps, clear errors, bad records."""

from __future__ import annotations

import json
import socket
import time

import pytest
from support.nats_server import start_nats_server
from support.operator_harness import started_source

from barrierflow.connectors.base import DEAD_LETTERS, DeadLetter, SourceSplit, SplitBatch
from barrierflow.connectors.nats import NatsSource
from barrierflow.errors import ConfigurationError, SourceError
from barrierflow.runtime.operators.source_sink import SourceOperator

WAIT_S = 20.0
"""Bound on waiting for messages to arrive through a reader."""
POLL_S = 0.005
"""Pause between two polls that found nothing (the reader never blocks)."""


def source_for(server, stream, *, bounded=True, **options):
    builder = (
        NatsSource.builder()
        .set_servers(server.url)
        .set_stream(stream)
        .set_value_only_deserializer(json.loads)
    )
    if bounded:
        builder.set_bounded()
    for name, value in options.items():
        getattr(builder, f"set_{name}")(value)
    return builder.build()


def stream_with(server, subjects, messages):
    """A fresh stream over `subjects` holding `messages` ((subject, value) pairs)."""
    name = server.fresh_name("events")
    server.create_stream(name, [f"{name}.{s}" for s in subjects])
    server.publish((f"{name}.{subject}", value) for subject, value in messages)
    return name


def read_all(reader, max_records=3):
    """Every batch until the reader ends (bounded), waiting at most WAIT_S."""
    batches = []
    deadline = time.monotonic() + WAIT_S
    while (batch := reader.poll_split_batch(max_records)) is not None:
        if batch.records or batch.finished or batch.bad:
            batches.append(batch)
        else:
            time.sleep(POLL_S)  # nothing queued yet; bounded by the deadline
        assert time.monotonic() < deadline, f"reader did not end; got {batches}"
    return batches


def read_until(reader, count, max_records=100):
    """Records (split, value) until `count` arrived, waiting at most WAIT_S."""
    records = []
    deadline = time.monotonic() + WAIT_S
    while len(records) < count:
        batch = reader.poll_split_batch(max_records)
        assert batch is not None
        records.extend((batch.split_id, value) for value in batch.records)
        if not batch.records:
            time.sleep(POLL_S)  # nothing queued yet; bounded by the deadline
        assert time.monotonic() < deadline, f"only {records} arrived"
    return records


def by_split(batches):
    values: dict[str, list] = {}
    for batch in batches:
        values.setdefault(batch.split_id, []).extend(batch.records)
    return values


MESSAGES = [("a", {"n": 1}), ("b", {"n": 2}), ("a", {"n": 3}), ("c", {"n": 4}), ("a", {"n": 5})]


def test_each_subject_of_the_stream_is_a_split_with_its_last_sequence_when_bounded(nats_server):
    stream = stream_with(nats_server, ["a", "b", "c"], MESSAGES)
    splits = source_for(nats_server, stream).create_splits()
    assert splits == [
        SourceSplit(f"{stream}.a", {"subject": f"{stream}.a", "stop": 5}),
        SourceSplit(f"{stream}.b", {"subject": f"{stream}.b", "stop": 2}),
        SourceSplit(f"{stream}.c", {"subject": f"{stream}.c", "stop": 4}),
    ]
    unbounded = source_for(nats_server, stream, bounded=False).create_splits()
    assert [split.payload["stop"] for split in unbounded] == [None, None, None]


def test_configured_subjects_are_the_splits_and_a_wildcard_split_reads_in_stream_order(
    nats_server,
):
    stream = stream_with(nats_server, ["a", "b", "c"], MESSAGES)
    source = source_for(nats_server, stream, subjects=[f"{stream}.>"])
    splits = source.create_splits()
    assert [split.split_id for split in splits] == [f"{stream}.>"]
    reader = source.create_reader(splits)
    reader.restore({})
    assert by_split(read_all(reader)) == {f"{stream}.>": [{"n": n} for n in range(1, 6)]}
    reader.close()


def test_a_bounded_reader_reads_every_split_to_its_end_and_stops(nats_server):
    stream = stream_with(nats_server, ["a", "b", "c"], MESSAGES)
    source = source_for(nats_server, stream)
    splits = source.create_splits()
    nats_server.publish([(f"{stream}.a", {"n": 6}), (f"{stream}.b", {"n": 7})])  # after start
    reader = source.create_reader(splits)
    reader.restore({})
    batches = read_all(reader)
    assert by_split(batches) == {
        f"{stream}.a": [{"n": 1}, {"n": 3}, {"n": 5}],
        f"{stream}.b": [{"n": 2}],
        f"{stream}.c": [{"n": 4}],
    }
    assert sorted(b.split_id for b in batches if b.finished) == sorted(reader.split_ids())
    assert reader.snapshot() == {f"{stream}.a": 5, f"{stream}.b": 2, f"{stream}.c": 4}
    reader.close()


def test_a_restored_reader_replays_each_split_from_the_message_after_its_offset(nats_server):
    stream = stream_with(nats_server, ["a", "b"], [("a", i) for i in range(6)] + [("b", 10)])
    source = source_for(nats_server, stream)
    splits = source.create_splits()

    first = source.create_reader(splits)
    first.restore({})
    taken = []
    deadline = time.monotonic() + WAIT_S
    while len(taken) < 2:  # part of split a, then a checkpoint
        batch = first.poll_split_batch(1)
        if batch.split_id == f"{stream}.a":
            taken.extend(batch.records)
        assert time.monotonic() < deadline
    checkpoint = first.snapshot()
    first.close()
    assert taken == [0, 1] and checkpoint[f"{stream}.a"] == 2

    second = source.create_reader(splits)
    second.restore(checkpoint)
    rest = by_split(read_all(second))
    assert rest[f"{stream}.a"] == [2, 3, 4, 5]  # exactly from offset + 1
    assert rest.get(f"{stream}.b", []) == ([] if checkpoint[f"{stream}.b"] else [10])
    second.close()

    done = source.create_reader(splits)
    done.restore({f"{stream}.a": 6, f"{stream}.b": 7})  # both at their bound
    ended = read_all(done)
    assert sorted(b.split_id for b in ended) == [f"{stream}.a", f"{stream}.b"]
    assert all(b.finished and not b.records for b in ended)
    done.close()


def test_an_unbounded_reader_keeps_reading_new_messages(nats_server):
    stream = stream_with(nats_server, ["a", "b"], [("a", 1)])
    source = source_for(nats_server, stream, bounded=False)
    reader = source.create_reader(source.create_splits())
    reader.restore({})
    assert read_until(reader, 1) == [(f"{stream}.a", 1)]
    nats_server.publish([(f"{stream}.b", 2), (f"{stream}.a", 3)])
    assert sorted(read_until(reader, 2)) == [(f"{stream}.a", 3), (f"{stream}.b", 2)]
    batch = reader.poll_split_batch(10)
    assert batch is not None and not batch.finished  # unbounded: never ends
    assert reader.snapshot() == {f"{stream}.a": 3, f"{stream}.b": 2}
    reader.close()


def test_records_carry_their_jetstream_timestamp_per_split(nats_server):
    before = int(time.time() * 1000)
    stream = stream_with(nats_server, ["a", "b"], [("a", 1), ("b", 2), ("a", 3)])
    after = int(time.time() * 1000) + 1
    reader = source_for(nats_server, stream).create_reader(
        source_for(nats_server, stream).create_splits()
    )
    reader.restore({})
    stamps: dict[str, list[int]] = {}
    for batch in read_all(reader):
        if batch.records:
            assert len(batch.timestamps) == len(batch.records)
            stamps.setdefault(batch.split_id, []).extend(batch.timestamps)
    assert sorted(stamps) == [f"{stream}.a", f"{stream}.b"]
    assert len(stamps[f"{stream}.a"]) == 2 and len(stamps[f"{stream}.b"]) == 1
    for values in stamps.values():
        assert values == sorted(values)
        assert all(before - 1 <= value <= after for value in values)
    reader.close()


def test_a_broker_that_is_down_at_start_is_a_clear_error():
    source = (
        NatsSource.builder()
        .set_servers("nats://127.0.0.1:1")
        .set_stream("events")
        .set_value_only_deserializer(json.loads)
        .build()
    )
    with pytest.raises(
        SourceError, match=r"cannot connect to the NATS server nats://127\.0\.0\.1:1"
    ):
        source.create_splits()


def test_a_missing_stream_is_a_clear_error(nats_server):
    with pytest.raises(SourceError, match="stream 'no-such-stream' does not exist"):
        source_for(nats_server, "no-such-stream").create_splits()


def test_the_builder_rejects_an_incomplete_configuration():
    with pytest.raises(ConfigurationError, match="set_stream"):
        NatsSource.builder().set_servers("nats://x:4222").build()
    with pytest.raises(ConfigurationError, match="deserializer"):
        NatsSource.builder().set_servers("nats://x:4222").set_stream("s").build()


def operator_over(source, stream):
    return started_source(source, name=stream)


def run_to_end(operator):
    deadline = time.monotonic() + WAIT_S
    while operator.emit_next(100) != SourceOperator.END_OF_INPUT:
        assert time.monotonic() < deadline


def test_a_message_that_cannot_be_decoded_fails_naming_split_and_sequence(nats_server):
    stream = stream_with(nats_server, ["a"], [("a", 1), ("a", b"{not json"), ("a", 3)])
    operator, _ = operator_over(source_for(nats_server, stream), stream)
    with pytest.raises(SourceError) as failure:
        run_to_end(operator)
    operator.close()
    message = str(failure.value)
    assert message.startswith(
        f"source '{stream}': cannot decode the record at stream sequence 2 of split '{stream}.a': "
        "JSONDecodeError"
    )


def test_dead_letters_carry_the_raw_bytes_and_the_error_and_are_consumed(nats_server):
    stream = stream_with(nats_server, ["a"], [("a", 1), ("a", b"\xff{"), ("a", 3)])
    operator, out = operator_over(source_for(nats_server, stream, dead_letters=True), stream)
    run_to_end(operator)
    snapshot = operator.snapshot_state(1).operator
    operator.close()
    events = out.take()
    assert [e[1] for e in events if e[0] == "record"] == [1, 3]
    letters = [e[2] for e in events if e[0] == "side"]
    assert [e[1] for e in events if e[0] == "side"] == [DEAD_LETTERS.tag_id]
    [letter] = letters
    assert isinstance(letter, DeadLetter)
    assert (letter.source, letter.split_id, letter.offset, letter.raw) == (
        stream,
        f"{stream}.a",
        2,
        b"\xff{",
    )
    assert letter.error.startswith(("JSONDecodeError", "UnicodeDecodeError"))
    assert snapshot == {f"{stream}.a": 3}


def test_a_broker_that_goes_away_mid_run_fails_the_reader_after_the_reconnect_timeout(tmp_path):
    with start_nats_server(tmp_path / "store") as server:
        stream = stream_with(server, ["a"], [("a", 1)])
        source = source_for(server, stream, bounded=False, reconnect_timeout=1.0)
        reader = source.create_reader(source.create_splits())
        reader.restore({})
        assert read_until(reader, 1) == [(f"{stream}.a", 1)]
        server.stop()
        deadline = time.monotonic() + WAIT_S
        with pytest.raises(SourceError, match="could not reconnect within 1 s"):
            while time.monotonic() < deadline:
                reader.poll_split_batch(10)
                time.sleep(POLL_S)
        reader.close()


def test_closing_a_reader_while_it_is_still_connecting_is_prompt():
    """A task closes its reader when its attempt is cancelled. With the broker away or not
    answering, the reader is still in its first connection (which retries for up to the
    reconnect timeout); closing abandons it instead of waiting for it to give up."""
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never says INFO
        source = (
            NatsSource.builder()
            .set_servers(f"nats://127.0.0.1:{silent.getsockname()[1]}")
            .set_stream("events")
            .set_value_only_deserializer(json.loads)
            .set_connect_timeout(30.0)
            .set_reconnect_timeout(30.0)
            .build()
        )
        split = SourceSplit("events.a", {"subject": "events.a", "stop": None})
        reader = source.create_reader([split])
        reader.restore({})
        assert reader.poll_split_batch(10) == SplitBatch("events.a", [])
        silent.settimeout(WAIT_S)
        connection, _ = silent.accept()  # the reader is connecting now
        fetcher = reader._fetcher
        started = time.monotonic()
        reader.close()
        assert time.monotonic() - started < 2.0
        assert not fetcher._thread.is_alive()
        connection.close()


def test_closing_a_reader_removes_its_consumers_and_ends_its_thread(nats_server):
    stream = stream_with(nats_server, ["a", "b"], [("a", 1)])
    source = source_for(nats_server, stream, bounded=False)
    reader = source.create_reader(source.create_splits())
    reader.restore({})
    read_until(reader, 1)
    fetcher = reader._fetcher
    reader.close()
    assert not fetcher._thread.is_alive()
    assert consumer_count(nats_server, stream) == 0


def consumer_count(server, stream):
    async def count():
        import nats

        nc = await nats.connect(server.url, allow_reconnect=False)
        try:
            return (await nc.jetstream().stream_info(stream)).state.consumer_count
        finally:
            await nc.close()

    import asyncio

    return asyncio.run(count())


def test_the_reader_reads_time_from_the_source_clock_not_the_machine():
    """The reconnect timeout and the run of errors it bounds are measured on the injected
    clock: a test moves it by hand instead of waiting."""
    import queue as queues

    from barrierflow._clock import ManualClock
    from barrierflow.connectors.nats import NatsSource, _Fetcher

    clock = ManualClock()
    source = NatsSource(["nats://x"], "s", bytes, reconnect_timeout_s=5.0, clock=clock)
    fetcher = _Fetcher(source, [], queues.SimpleQueue())
    error = RuntimeError("JetStream not ready")
    since = fetcher._still_failing(None, error)
    clock.advance(5_000)
    assert fetcher._still_failing(since, error) == since
    clock.advance(1)
    with pytest.raises(RuntimeError, match="not ready"):
        fetcher._still_failing(since, error)
