"""NATS JetStream in, files out, on Spark: a task killed mid-run replays from the checkpointed
stream sequences and the output is exactly once; a broker that goes away mid-run fails
attempts until it is back, then the job finishes exactly once; undecodable messages fail the
job naming split and sequence, or leave on the dead-letter side output (issue 13)."""

from __future__ import annotations

import json
import logging
import time
from collections import Counter

import pytest
from support.nats_server import start_nats_server

from barrierflow import WatermarkStrategy
from barrierflow.connectors.base import DEAD_LETTERS
from barrierflow.connectors.files import FileSink
from barrierflow.connectors.nats import NatsSource
from barrierflow.errors import BarrierflowError

from .jobs import (
    recovering_environment,
    running_count_rows,
    running_counts,
    wait_for_attempt,
    word_of,
)

pytestmark = pytest.mark.spark

EVENTS = 6_000
SUBJECTS = ("a", "b", "c")


def publish_words(server, stream, count, bad_every=None):
    """`count` events {"word": ...} over the subjects; with `bad_every`, every such message is
    not JSON instead. Returns the words of the good ones and the sequences of the bad ones."""
    messages, words, bad = [], [], []
    for i in range(count):
        subject = f"{stream}.{SUBJECTS[i % len(SUBJECTS)]}"
        if bad_every and i % bad_every == bad_every - 1:
            messages.append((subject, f"not json {i}".encode()))
            bad.append(i)
        else:
            messages.append((subject, {"word": word_of(i)}))
            words.append(word_of(i))
    server.create_stream(stream, [f"{stream}.{s}" for s in SUBJECTS])
    sequences = server.publish(messages)
    return words, [sequences[i] for i in bad]


def source(server, stream, dead_letters=False):
    builder = (
        NatsSource.builder()
        .set_servers(server.url)
        .set_stream(stream)
        .set_value_only_deserializer(json.loads)
        .set_bounded()
    )
    return builder.set_dead_letters(dead_letters).build()


def word_count(env, server, stream, out, *, dead_letters=False, paced=False):
    events = env.from_source(
        source(server, stream, dead_letters), WatermarkStrategy.no_watermarks(), "events"
    ).uid("events")
    words = events.map(
        (lambda e: time.sleep(0.001) or e["word"]) if paced else (lambda e: e["word"])
    ).uid("word")
    sink = FileSink.for_rows(str(out))
    running_counts(words).sink_to(sink).uid("sink")
    return events, sink


def environment(tmp_path, restarts):
    return recovering_environment(tmp_path / "checkpoints", restarts)


def test_a_source_task_killed_mid_run_replays_from_its_offsets_exactly_once(
    spark, nats_server, tmp_path
):
    stream = nats_server.fresh_name("words")
    words, _ = publish_words(nats_server, stream, EVENTS)
    env = environment(tmp_path, 3)
    _, sink = word_count(env, nats_server, stream, tmp_path / "out", paced=True)

    job = env.execute_async("nats-word-count")
    assert job.wait_for_completed_checkpoints(2, timeout=60), "ended before two checkpoints"
    reading = next(v.vertex_id for v in job.job_graph.vertices if "events" in v.name)
    job.inject_failure("kill", reading, 0)
    result = job.wait(timeout=120)

    assert result.restarts >= 1
    rows = Counter(tuple(row) for row in sink.committed_output())
    assert rows == running_count_rows(words)


BROKER_EVENTS_PER_SPLIT = 8_000
"""More than a reader buffers (about 4,096), so each reader still pulls from the broker when
it is stopped a second or so into the job (each event costs 1 ms in the map)."""


def test_a_broker_that_goes_away_mid_run_fails_attempts_until_it_is_back(tmp_path, spark, caplog):
    with start_nats_server(tmp_path / "nats") as server:
        stream = server.fresh_name("words")
        subjects = [f"{stream}.a", f"{stream}.b"]  # one split per source subtask
        words = [word_of(i) for i in range(2 * BROKER_EVENTS_PER_SPLIT)]
        server.create_stream(stream, subjects)  # file storage in the server's store folder
        server.publish((subjects[i % 2], {"word": word}) for i, word in enumerate(words))
        env = environment(tmp_path, 100)
        events = env.from_source(
            NatsSource.builder()
            .set_servers(server.url)
            .set_stream(stream)
            .set_value_only_deserializer(json.loads)
            .set_bounded()
            .set_reconnect_timeout(1.0)
            .build(),
            WatermarkStrategy.no_watermarks(),
            "events",
        ).uid("events")
        sink = FileSink.for_rows(str(tmp_path / "out"))
        words_out = events.map(lambda e: time.sleep(0.001) or e["word"]).uid("word")
        running_counts(words_out).sink_to(sink).uid("sink")

        with caplog.at_level(logging.WARNING, logger="barrierflow.cluster.jobmaster.job_master"):
            job = env.execute_async("nats-goes-away")
            assert job.wait_for_completed_checkpoints(2, timeout=60), "ended before 2 checkpoints"
            attempt = job.attempt
            server.stop()
            # the attempt running fails, and so does at least one restart while it is away
            wait_for_attempt(job, attempt + 2, timeout=60)
            server.start()
            result = job.wait(timeout=120)

    assert result.restarts >= 2
    assert Counter(tuple(row) for row in sink.committed_output()) == running_count_rows(words)
    failures = [r.getMessage() for r in caplog.records if " failed: " in r.getMessage()]
    lost = [line for line in failures if "lost the connection to the NATS server" in line]
    down = [line for line in failures if "cannot connect to the NATS server" in line]
    assert lost and down, failures
    for line in lost + down:
        assert "\n" not in line, line
        assert f"{server.url} (stream '{stream}')" in line, line


def test_undecodable_messages_go_to_the_dead_letter_output_with_their_error(
    spark, nats_server, tmp_path
):
    stream = nats_server.fresh_name("mixed")
    words, bad_sequences = publish_words(nats_server, stream, 300, bad_every=50)
    env = environment(tmp_path, 0)
    events, sink = word_count(env, nats_server, stream, tmp_path / "out", dead_letters=True)
    letters = FileSink.for_rows(str(tmp_path / "dead"))
    events.get_side_output(DEAD_LETTERS).map(lambda letter: letter.as_dict()).sink_to(letters)

    env.execute("nats-dead-letters")

    assert Counter(tuple(row) for row in sink.committed_output()) == running_count_rows(words)
    dead = sorted(letters.committed_output(), key=lambda row: row["offset"])
    assert [row["offset"] for row in dead] == bad_sequences
    for row in dead:
        assert row["source"] == "events"
        assert row["raw"].startswith("not json ")
        assert row["error"].startswith("JSONDecodeError")
        assert row["split"].startswith(f"{stream}.")


def test_an_undecodable_message_fails_the_job_naming_split_and_sequence(
    spark, nats_server, tmp_path
):
    stream = nats_server.fresh_name("broken")
    _, bad_sequences = publish_words(nats_server, stream, 30, bad_every=20)
    env = environment(tmp_path, 0)
    word_count(env, nats_server, stream, tmp_path / "out")

    with pytest.raises(BarrierflowError) as failure:
        env.execute("nats-bad-record")
    text = f"{failure.value} {failure.value.__cause__}"
    assert f"cannot decode the record at stream sequence {bad_sequences[0]} of split" in text
    assert f"'{stream}.b'" in text
