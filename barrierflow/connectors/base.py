"""The contracts between the runtime and connectors.

A `Source` is built by the user, split on the driver (`create_splits`, where a
missing input fails fast) and read in the tasks by a `SourceReader` whose
position is a small msgpack-able value per split, stored in every checkpoint
so the source can rewind. A record a reader cannot decode is reported as a
`BadRecord`: the source operator fails the job naming it, or, for a source with
`dead_letters` set, emits it as a `DeadLetter` on the `DEAD_LETTERS` side output.

A `Sink` writes through a `SinkWriter` that follows two-phase commit: records written
between two barriers form one transaction, which is pre-committed at the barrier and
committed only once the checkpoint is complete.
"""

from __future__ import annotations

import os
import pickle
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from barrierflow._clock import SYSTEM_CLOCK, Clock
from barrierflow.connectors.placement import placement
from barrierflow.core.output_tag import OutputTag

__all__ = [
    "DEAD_LETTERS",
    "WHOLE_READER_SPLIT",
    "AtOnceSinkWriter",
    "BadRecord",
    "DeadLetter",
    "Sink",
    "SinkContext",
    "SinkWriter",
    "Source",
    "SourceReader",
    "SourceSplit",
    "SplitBatch",
]


@dataclass(frozen=True)
class SourceSplit:
    """One independently readable, replayable part of a source's input."""

    split_id: str
    """Stable across runs: positions in checkpoints are keyed by it."""
    payload: Any = None
    """What the reader needs to open the split (for example a file path)."""


WHOLE_READER_SPLIT = "*"
"""The split id `SourceReader.poll_split_batch` reports for a reader that does not say
which split a record came from: the whole reader counts as one split."""


@dataclass(frozen=True)
class SplitBatch:
    """Records of one split, as `SourceReader.poll_split_batch` returns them."""

    split_id: str
    records: Any
    """A list of values, or a `pyarrow.RecordBatch` that stays columnar through the job
    until Python code reads its rows (made by `converter`). May be empty: nothing is ready
    now (or, with `finished`, the split just ended)."""
    timestamps: Any = None
    """The records' own event timestamps (ms), one per record, if the split has them: a
    list, or for Arrow records also an int64 numpy or Arrow array."""
    finished: bool = False
    """The split has ended: nothing more comes from it."""
    bad: Sequence[BadRecord] = ()
    """Records of this split read but not decodable, in the same stretch as `records`. The
    reader's position has moved past them: they count as consumed."""
    converter: Any = None
    """For Arrow records: `pyarrow.RecordBatch -> list` of the rows Python code sees (one
    per row, in order); None gives `to_pylist()` dicts. A module-level function keeps
    batches columnar across channels (it pickles by name)."""


@dataclass(frozen=True)
class BadRecord:
    """A record a reader read but could not decode (the deserializer raised)."""

    split_id: str
    offset: Any
    """Where the record is in its split, as the reader's positions count (msgpack-able)."""
    raw: bytes | None
    """The record as read, undecoded (None when the reader has no bytes to give)."""
    error: str
    """What went wrong, e.g. `"JSONDecodeError: Expecting value: line 1 column 1"`."""
    offset_kind: str = "offset"
    """How the source names its offsets in messages ("stream sequence", "line")."""

    def describe(self, source_name: str) -> str:
        """The error message that fails the job (the default for bad records).

        >>> bad = BadRecord("e.a", 42, b"{", "JSONDecodeError", "stream sequence")
        >>> print(bad.describe("ev"))
        source 'ev': cannot decode the record at stream sequence 42 of split 'e.a': JSONDecodeError
        """
        return (
            f"source {source_name!r}: cannot decode the record at {self.offset_kind} "
            f"{self.offset} of split {self.split_id!r}: {self.error}"
        )


DEAD_LETTERS = OutputTag("barrierflow-dead-letters")
"""The side output of a source's undecodable records, as `DeadLetter` values, when the source
has `dead_letters` set: `env.from_source(...).get_side_output(DEAD_LETTERS)`."""


@dataclass(frozen=True)
class DeadLetter:
    """A record a source could not decode, or one a user function raised on (a map,
    flat_map, filter, process or reduce `.with_dead_letters()`), as it leaves on the
    `DEAD_LETTERS` side output."""

    source: str
    """The source's name (as given to `from_source`); for a user function's letter, the
    operator's name (`Map`, or what `.name()` gave it)."""
    split_id: str | None
    """The split the record came from; None for a user function's letter."""
    offset: Any
    """The record's offset in its split; None for a user function's letter."""
    raw: bytes | None
    error: str
    """What went wrong, e.g. `"ValueError: invalid literal for int() with base 10: 'x'"`."""
    record: Any = None
    """The record the user function raised on (its `repr` if it cannot be pickled); None
    for a source's letter, which has `raw`."""
    function: str | None = None
    """The user function's method that raised (`map`, `flat_map`, `filter`,
    `process_element`, `reduce`); None for a source's letter."""

    @classmethod
    def of(cls, source_name: str, bad: BadRecord) -> DeadLetter:
        return cls(source_name, bad.split_id, bad.offset, bad.raw, bad.error)

    @classmethod
    def of_function(
        cls, operator_name: str, function: str, record: Any, error: BaseException
    ) -> DeadLetter:
        """The letter of `record`, on which the operator's user `function` raised `error`.

        >>> DeadLetter.of_function("Map", "map", "x", ValueError("not a number")).as_dict()
        {'source': 'Map', 'function': 'map', 'record': 'x', 'error': 'ValueError: not a number'}
        """
        try:
            pickle.dumps(record)
        except Exception:
            record = repr(record)
        text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        return cls(operator_name, None, None, None, text, record, function)

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly: the raw bytes as text (UTF-8, undecodable bytes as `\\xNN`); for a
        user function's letter the record (its `repr` unless a str, number or bool).

        >>> letter = DeadLetter("events", "events.a", 7, bytes([111, 107, 255]), "ValueError")
        >>> print(letter.as_dict()["raw"])
        ok\\xff
        """
        if self.function is not None:  # a user function's letter
            record = self.record
            plain = record is None or isinstance(record, (str, int, float, bool))
            return {
                "source": self.source,
                "function": self.function,
                "record": record if plain else repr(record),
                "error": self.error,
            }
        raw = None if self.raw is None else self.raw.decode("utf-8", "backslashreplace")
        return {
            "source": self.source,
            "split": self.split_id,
            "offset": self.offset,
            "raw": raw,
            "error": self.error,
        }


class SourceReader(ABC):
    """Reads the splits given to one subtask. Mailbox thread only; must never block long."""

    @abstractmethod
    def restore(self, positions: dict[str, Any]) -> None:
        """Resume each split from a checkpointed position; splits not listed start at the beginning.

        Positions of splits this reader was not given are ignored.
        """

    @abstractmethod
    def poll_batch(self, max_records: int) -> list[Any] | None:
        """Up to `max_records` records; `[]` if none is ready now; `None` once all input ended."""

    @abstractmethod
    def snapshot(self) -> dict[str, Any]:
        """The position of every split (msgpack-able), taken at a checkpoint barrier."""

    reads_splits_in_turn: bool = False
    """True for a reader that reads its splits one after another, in event-time order (the
    byte ranges of one events file written in order): a split it has not begun holds the
    watermark back only from its first record on, as with Flink's FileSource, which hands
    a reader one split at a time. False (the default; partitions read side by side, and
    files whose time ranges may overlap): every split holds it from the start, so no
    record of a split begun later is ever late."""

    def split_ids(self) -> list[str]:
        """The ids `poll_split_batch` reports records under (event time tracks each one).

        The default, for readers that only implement `poll_batch`, is one pseudo-split.
        """
        return [WHOLE_READER_SPLIT]

    def poll_split_batch(self, max_records: int) -> SplitBatch | None:
        """Up to `max_records` records of one split; None once all input ended.

        Readers override this (and `split_ids`) to say which split each record came
        from, so watermarks are generated per split, and to pass on timestamps their
        input carries. The default wraps `poll_batch` as the pseudo-split
        `WHOLE_READER_SPLIT`, which finishes when the reader does.
        """
        records = self.poll_batch(max_records)
        if records is None:
            return None
        return SplitBatch(WHOLE_READER_SPLIT, records)

    def notify_checkpoint_complete(self, checkpoint_id: int, positions: Any) -> None:  # noqa: B027
        """Checkpoint `checkpoint_id` completed; `positions` is what `snapshot()` gave at its
        barrier. An optional hook: a Kafka reader commits them to its consumer group (for
        monitoring; recovery always reads the checkpoint)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release files or connections."""


class Source(ABC):
    """A user-facing source: picklable, shipped from the driver to the tasks."""

    bounded: bool = True
    dead_letters: bool = False
    """Records its readers cannot decode (`SplitBatch.bad`) go to the `DEAD_LETTERS` side
    output; when False (the default) the first one fails the job, naming split and offset."""

    @abstractmethod
    def create_splits(self) -> list[SourceSplit]:
        """Enumerate the input on the driver; raise `SourceError` when it cannot be read."""

    @abstractmethod
    def create_reader(self, splits: Sequence[SourceSplit]) -> SourceReader:
        """A reader for the splits assigned to one subtask (runs in the task)."""

    def storage_locations(self) -> list[str]:
        """The files or folders (URIs) the tasks read: on a cluster every executor's host
        must reach them, which the JobMaster checks before the first attempt."""
        return []

    @staticmethod
    def pace(records_per_second: float | None) -> float | None:
        """The rate a generator source should keep: `records_per_second` itself, or None (no
        limit) in `barrierflow chaos`'s failure-free run (connectors/placement.py): a rate
        only paces a run so that failures fit in it."""
        return placement().pace(records_per_second)


@dataclass(frozen=True)
class SinkContext:
    """Where a sink writer runs: enough to name its files uniquely and fence zombies."""

    operator_uid: str
    subtask_index: int
    parallelism: int
    attempt: int
    """The deployment attempt within this run (0 for the first deployment)."""
    deployment_id: str
    """Unique per deployment, across restarts and reruns (safe in file names): files of other
    deployments that no checkpoint lists are leftovers of failed or zombie tasks."""
    job_name: str = ""
    """The job's name: stable across restarts and reruns (names transactions that a rerun
    must find again, e.g. prepared transactions in a database)."""
    restored_checkpoint_id: int | None = None
    """The checkpoint (or savepoint) this attempt restored, None on a fresh start. Its id is
    no fact about other runs: a savepoint of another storage, or a fallback, may have ids
    another lineage used too (decide by `lineage` and `abandoned_above`)."""
    lineage: str = ""
    """The job's checkpoint lineage: a random hex id of its checkpoint folder (kept in the
    folder's `_lineage` file). Checkpoint ids never repeat within a lineage, so (lineage,
    checkpoint id) names one checkpoint across runs, storages and savepoint migrations;
    names of transactions and files that must not collide carry both. "" when unknown (a
    writer made outside a job): such a writer names things as before lineages existed."""
    abandoned_above: int | None = None
    """Every commit of this `lineage` for a checkpoint id above this one belongs to a
    checkpoint this restore abandons (a fallback past damaged checkpoints). Restoring one
    of the job's own checkpoints it is that checkpoint's id; restoring a savepoint the user
    named, this run's first checkpoint id - 1. None when the restore abandons nothing: a
    fresh start, or no checkpoint above it ever completed (every restore but a fallback).
    A sink that can take output back (`Sink.survives_fallback`) does so for those commits,
    once."""
    max_parallelism: int = 0
    """The job's max parallelism: no run's subtask index of this operator reaches it (0:
    unknown; then `parallelism` bounds only this run's)."""
    clock: Clock = field(default=SYSTEM_CLOCK, compare=False)
    """Where the writer reads time (timeouts, file dates): a sink never reads the machine's
    clock itself, so a test drives it with a `ManualClock`."""


class SinkWriter(ABC):
    """One subtask's two-phase-commit writer. Mailbox thread only."""

    @abstractmethod
    def write_batch(self, records: list[Any]) -> None:
        """Add records to the open transaction."""

    def write_arrow(self, data: Any) -> None:
        """Add the rows of a `pyarrow.RecordBatch` to the open transaction: records that a
        source read as Arrow and nothing turned into Python objects, whose rows are dicts
        (column -> value). The default writes `data.to_pylist()`; a writer that can store
        Arrow as it is overrides this."""
        self.write_batch(data.to_pylist())

    @abstractmethod
    def pre_commit(self, checkpoint_id: int) -> None:
        """At the barrier: close the open transaction as pending for `checkpoint_id`."""

    @abstractmethod
    def snapshot_state(self) -> Any:
        """The pending transactions (msgpack-able), stored in the checkpoint for recovery."""

    @abstractmethod
    def commit(self, checkpoint_id: int) -> None:
        """Checkpoint `checkpoint_id` is complete: commit every pending transaction up to it.

        Must be idempotent: after a restore the same transaction may be committed again.
        """

    @abstractmethod
    def restore(self, states: list[Any]) -> None:
        """Recover from snapshots of earlier writers (possibly several, after rescaling).

        Their pending transactions belong to a completed checkpoint and are committed;
        open (not pre-committed) transactions of older attempts are discarded.
        """

    def abort(self) -> None:  # noqa: B027 - optional hook
        """Discard the open transaction (the task is failing or cancelled)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """The job has ended normally; release resources."""


class AtOnceSinkWriter(SinkWriter):
    """A writer whose records leave as they are written (printed, dropped, published):
    nothing is held for a checkpoint, so there is nothing to pre-commit, keep, commit or
    restore. At least once after a failure, as Flink's print and discarding sinks."""

    def pre_commit(self, checkpoint_id: int) -> None:
        pass

    def snapshot_state(self) -> Any:
        return None

    def commit(self, checkpoint_id: int) -> None:
        pass

    def restore(self, states: list[Any]) -> None:
        pass


class Sink(ABC):
    """A user-facing sink: picklable, shipped to the tasks.

    A sink takes part in `barrierflow chaos` (the exactly-once self-check) when it
    implements `committed_output` and writes each run to its own place: a sink that writes
    files gets its location from `Sink.output_location(path)`, which chaos rebases into the
    run's folder; a sink that writes a database table gets its name from
    `Sink.output_table(table)`, which chaos turns into the run's own table (the sink
    creates it, empty, like the table the job names).
    """

    def prepare(self) -> None:  # noqa: B027 - optional hook
        """On the driver, before deployment: fail fast on bad configuration (unwritable folder)."""

    def storage_locations(self) -> list[str]:
        """The folders (URIs) the tasks write: on a cluster every executor's host must reach
        them, which the JobMaster checks before the first attempt."""
        return []

    def survives_fallback(self) -> bool:
        """Whether a restore that falls back past damaged checkpoints keeps this sink's
        output exactly once (or, for a sink promising at-least-once only, as promised).

        True (the default) for sinks without transactions: they promise at-least-once. A
        transactional sink says True only if it takes back the commits of the abandoned
        checkpoints (`SinkContext.abandoned_above`), or if committing them again changes
        nothing (upserts). When one sink of a job says False, a fallback stops the job with
        a message naming the choices (a savepoint, or allowing duplicates explicitly)."""
        return True

    def describe(self) -> str:
        """The sink as messages name it, e.g. `PostgresSink (table t, insert mode)`."""
        return type(self).__name__

    def committed_output(self) -> list[Any] | None:
        """Every record this sink has committed, in any order (a multiset), read on the driver
        after the job ended; None (the default) when the sink cannot tell. `barrierflow chaos`
        compares it between a failure-free run and a run with failures."""
        return None

    @staticmethod
    def output_location(path: str | os.PathLike[str]) -> str:
        """Where a sink should write `path`: `path` itself, or under `barrierflow chaos` the
        same path rebased into the current run's own folder (connectors/placement.py)."""
        return placement().location(os.fspath(path))

    @staticmethod
    def output_table(table: str) -> str:
        """Which table a sink should write for `table`: `table` itself, or under `barrierflow
        chaos` the current run's own table, `<table>__reference` or `<table>__chaos`."""
        return placement().table(table)

    @abstractmethod
    def create_writer(self, context: SinkContext) -> SinkWriter:
        """The writer for one subtask."""


def __getattr__(name: str) -> Any:
    """`TwoPhaseCommitSink`, the base of exactly-once sinks, is importable from here too
    (its module imports this one, so it is looked up on first use)."""
    if name in ("TwoPhaseCommitSink", "TwoPhaseCommitWriter"):
        from barrierflow.connectors import two_phase_commit

        return getattr(two_phase_commit, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
