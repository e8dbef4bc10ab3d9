"""Deterministic inputs, independent expectations and bounded waits for the end-to-end tests."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path

from barrierflow import RestartStrategies, StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.api.datastream import DataStream
from barrierflow.api.environment import ENDED_STATES, JobClient
from barrierflow.connectors.base import SourceReader, SplitBatch
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSink

DEPLOY_S = 400
"""How long a job may take to its first checkpoints: on a busy host (load 30 on 2 cores) its
fresh Spark workers take minutes to start, and a deployment that stalls fails on its own
(cluster/jobmaster/attempt.py), which ends this wait early."""

WORDS = ["ant", "bee", "cat", "dog", "eel", "fox", "gnu"]


def word_of(index: int) -> str:
    return WORDS[(index * 31 + index // 5) % len(WORDS)]


class GatedGeneratorSource(DataGeneratorSource):
    """A `DataGeneratorSource` whose readers stop at record `gate_index` (they poll nothing,
    as a throttled reader does, so checkpoints go on) for as long as the file `gate` does not
    exist. A test that injects a failure once checkpoints have completed creates `gate` after
    the job failed over: the input cannot run out before the failure however slow the
    machine, and the records are the same."""

    def __init__(self, generator, count: int, rate: float | None, gate: Path, gate_index: int):
        super().__init__(generator, count, records_per_second=rate)
        self.gate, self.gate_index = str(gate), gate_index

    def create_reader(self, splits) -> SourceReader:
        reader = super().create_reader(splits)
        return _GatedReader(reader, self.gate, self.gate_index, self.num_splits)


class _GatedReader(SourceReader):
    """A generator reader that polls nothing past `gate_index` while `gate` is missing. The
    inner reader polls its split furthest behind, whose indexes step by `stride`: a batch is
    cut at the gate, so no split leaps past it (a paced reader catching up after a stall
    would take hundreds of records at once)."""

    def __init__(self, reader: SourceReader, gate: str, gate_index: int, stride: int) -> None:
        self.reader, self.gate, self.gate_index, self.stride = reader, gate, gate_index, stride

    def poll_split_batch(self, max_records: int) -> SplitBatch | None:
        positions = self.reader.snapshot().values()
        if positions and not os.path.exists(self.gate):
            behind = min(positions)
            if behind >= self.gate_index:
                return SplitBatch(self.reader.split_ids()[0], [])
            before_gate = -((behind - self.gate_index) // self.stride)  # ceil
            max_records = min(max_records, before_gate)
        return self.reader.poll_split_batch(max_records)

    def poll_batch(self, max_records: int) -> list | None:
        batch = self.poll_split_batch(max_records)
        return None if batch is None else batch.records

    def restore(self, positions: dict) -> None:
        self.reader.restore(positions)

    def snapshot(self) -> dict:
        return self.reader.snapshot()

    def split_ids(self) -> list[str]:
        return self.reader.split_ids()


def running_count_rows(words) -> Counter:
    """A keyed running count emits (word, n) once for every n from 1 to the word's total."""
    totals = Counter(words)
    return Counter((w, n) for w, total in totals.items() for n in range(1, total + 1))


def recovering_environment(checkpoints: str, restarts: int = 3) -> StreamExecutionEnvironment:
    """Parallelism 2, checkpoints every 300 ms into `checkpoints` (a path or URI), and up to
    `restarts` restarts 200 ms apart."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(300)
    env.get_checkpoint_config().set_checkpoint_storage(str(checkpoints))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(restarts, 200))
    return env


def generated_words(
    env: StreamExecutionEnvironment,
    records: int | None,
    rate: float | None,
    gate: Path | None = None,
) -> DataStream:
    """`records` words of `word_of` (None: endless) at `rate` per second (None: at once);
    with `gate`, the second half waits for that file (`GatedGeneratorSource`)."""
    source = (
        DataGeneratorSource(word_of, records, records_per_second=rate)
        if gate is None
        else GatedGeneratorSource(word_of, records, rate, gate, records // 2)
    )
    return env.from_source(
        source,
        WatermarkStrategy.no_watermarks(),
        "words",
    ).uid("words")


def running_counts(words: DataStream) -> DataStream:
    """(word, n) for every word: a keyed running count, with uids "pair" and "count"."""
    return (
        words.map(lambda w: (w, 1))
        .uid("pair")
        .key_by(lambda pair: pair[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .uid("count")
    )


def paced_word_count(
    tmp_path, records: int | None, rate: float | None
) -> StreamExecutionEnvironment:
    """A keyed running count of `records` generated words (None: endless) at `rate` records
    per second (None: as fast as it goes) into an exactly-once FileSink at <tmp_path>/out,
    parallelism 2, checkpoints every 300 ms into <tmp_path>/checkpoints, a uid on every step
    (so savepoints and reruns map back onto the operators)."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(300)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    running_counts(generated_words(env, records, rate)).sink_to(
        FileSink.for_rows(str(tmp_path / "out"))
    ).uid("sink")
    return env


def delta_app_transactions(table: Path) -> Counter:
    """How many commits of a Delta table's log carry each (app id, version)."""
    found: Counter = Counter()
    for entry in sorted((table / "_delta_log").glob("*.json")):
        for line in entry.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action:
                found[(action["txn"]["appId"], action["txn"]["version"])] += 1
    return found


def wait_for_attempt(job: JobClient, attempt: int, timeout: float) -> None:
    """Bounded wait until the job is in `attempt` or later (it failed over to it)."""
    deadline = time.monotonic() + timeout
    while job.attempt < attempt:
        assert job.get_job_status() not in ENDED_STATES, f"the job ended {job.get_job_status()}"
        assert time.monotonic() < deadline, f"no attempt {attempt} within {timeout} s"
        job.wait_until_running(attempt, timeout=0.2)  # returns early once it runs again
