"""FileSink: rows as JSON Lines or Parquet part files, published by two-phase commit.

Layout of the output folder:

    <out>/[<partition folders>/]part-<uid>-<subtask>-<deployment>-<seq>-ck<id>-<lineage>.<ext>
                                                                    committed
    <out>/.staging/<uid>/<subtask>/<deployment>/<path without -ck..>    staged
    <out>/[<partition folders>/].abandoned/<committed name>           taken back (fallback)

(A writer without a lineage, and part files written before lineages existed, have no
`-ck<checkpoint>-<lineage>`: `committed_checkpoint` finds nothing in their names.)

A transaction (`TwoPhaseCommitSink`) is the set of part files one subtask writes between
two barriers: one per partition folder, more when the rolling policy rolls by size or
time. `pre_commit` closes them and the pending handle lists them; `commit` publishes each
under its final name (`_fs.commit_file`: a rename, or a copy and delete on object stores;
repeating it is harmless). The staging folder is hidden (its name starts with `.`), so
Spark, Hadoop and this library's FileSource read only committed files. Names carry the
operator uid, the subtask and the deployment, so zombies and reruns never write to the
same name, and staged files of older deployments that no checkpoint lists are deleted by
the next deployment. The committed name also carries the checkpoint and its lineage
(`SinkContext.lineage`), which name the commit uniquely: a restore that falls back past
damaged checkpoints (`SinkContext.abandoned_above`) moves the part files of this lineage's
later checkpoints into a hidden `.abandoned/` folder beside them (subtask 0, for every
subtask): nothing is deleted, and readers skip them.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import os
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from barrierflow import _fs
from barrierflow._clock import SYSTEM_CLOCK, Clock
from barrierflow.connectors.base import Sink, SinkContext
from barrierflow.connectors.files._part_files import PartFile, PartFileFormat, part_file_format
from barrierflow.connectors.two_phase_commit import TwoPhaseCommitSink, TwoPhaseCommitWriter
from barrierflow.errors import SinkError, StateRestoreError

STAGING_FOLDER = ".staging"
"""Where in-progress and pending files live, inside the output folder."""

ABANDONED_FOLDER = ".abandoned"
"""Where a fallback moves committed part files of abandoned checkpoints (in their folder)."""

_COMMITTED_NAME = re.compile(r"^.+-ck(\d+)-([0-9a-f]+)(\.[A-Za-z0-9]+)?$")

LEGACY_STATE_VERSION = 1
"""Version of the snapshots of the FileSink writer before it was built on
`TwoPhaseCommitSink`: {"version": 1, "pending": [{"checkpoint_id", "staged", "final"}]}.
Still restored."""

DEFAULT_BUFFER_SIZE = 256 * 1024
"""Bytes buffered before a write reaches the filesystem."""

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
"""The folder value of a partition field that is None (as Hive and Spark write it)."""


@dataclass(frozen=True)
class RollingPolicy:
    """When a part file is closed and the next rows of its folder go to a new one.

    Always at each checkpoint (a part file never spans a checkpoint: it is part of one
    transaction); besides, once it holds `max_part_size` bytes or has been open for
    `rollover_interval_ms`, checked before each batch of rows is written to it (so a file
    may exceed the size by one batch; for Parquet the size counts rows still buffered in
    memory at their in-memory size).

    >>> RollingPolicy.by_size(64 * 1024 * 1024).max_part_size
    67108864
    """

    max_part_size: int | None = None
    rollover_interval_ms: int | None = None

    @classmethod
    def on_checkpoint(cls) -> RollingPolicy:
        """One part file per folder and checkpoint (the default)."""
        return cls()

    @classmethod
    def by_size(cls, max_part_size: int) -> RollingPolicy:
        """Also roll once a part file holds `max_part_size` bytes."""
        return cls(max_part_size=max_part_size)

    @classmethod
    def by_time(cls, rollover_interval_ms: int) -> RollingPolicy:
        """Also roll once a part file has been open `rollover_interval_ms` (processing time)."""
        return cls(rollover_interval_ms=rollover_interval_ms)

    def __post_init__(self) -> None:
        for name in ("max_part_size", "rollover_interval_ms"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")

    def should_roll(self, size: int, opened_ms: int, now_ms: int) -> bool:
        if self.max_part_size is not None and size >= self.max_part_size:
            return True
        return self.rollover_interval_ms is not None and now_ms - opened_ms >= (
            self.rollover_interval_ms
        )


PartitionSpec = Callable[[Any], str]
"""Gives the partition folder (relative, `/`-separated; "" for none) of a row."""


class FileSink(TwoPhaseCommitSink[Any]):
    """Writes rows as JSON Lines (the default) or Parquet part files, exactly once.

    Exactly-once because each subtask's rows between two checkpoint barriers go to hidden
    staged files, published in the output folder only when that checkpoint is complete
    (and, after a failure, when the checkpoint it restores from had them pending). A
    committed file appears whole, and a commit repeated after a crash part-way ends like the
    first. JSON rows may be any JSON-encodable value (tuples and lists become arrays);
    Parquet rows are dicts (column -> value). Partitioned output goes to Hive-style
    `key=value` folders, which `spark.read.parquet(path)` / `spark.read.json(path)` turn
    back into columns.

    >>> import pathlib, tempfile
    >>> from barrierflow.connectors.base import SinkContext
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "out"
    >>> sink = FileSink.for_rows(str(out))
    >>> sink.prepare()
    >>> writer = sink.create_writer(SinkContext("sink", 0, 1, 0, "run1-0"))
    >>> writer.restore([])
    >>> writer.write_batch([("apple", 1), {"pear": 2}, "fig"])
    >>> writer.pre_commit(1)
    >>> sorted(p.name for p in out.glob("part-*"))      # pending: nothing visible yet
    []
    >>> writer.commit(1)
    >>> [p.name for p in out.glob("part-*")]
    ['part-sink-0-run1-0-00000000.jsonl']
    >>> print(next(out.glob("part-*")).read_text(), end="")
    ["apple",1]
    {"pear":2}
    "fig"

    Parquet, partitioned by a field, rolled by size as well as at each checkpoint:

    >>> out = pathlib.Path(tempfile.mkdtemp()) / "events"
    >>> sink = (
    ...     FileSink.for_rows(str(out))
    ...     .with_format("parquet")
    ...     .partition_by("date")
    ...     .with_rolling_policy(RollingPolicy.by_size(64 * 1024 * 1024))
    ... )
    >>> writer = sink.create_writer(SinkContext("sink", 0, 1, 0, "run1-0"))
    >>> writer.restore([])
    >>> writer.write_batch([{"date": "2024-05-01", "n": 1}, {"date": "2024-05-02", "n": 2}])
    >>> writer.pre_commit(1); writer.commit(1)
    >>> sorted(str(p.relative_to(out)) for p in out.rglob("part-*"))
    ['date=2024-05-01/part-sink-0-run1-0-00000000.parquet', \
'date=2024-05-02/part-sink-0-run1-0-00000001.parquet']
    >>> sorted(sink.committed_output(), key=lambda row: row["n"])
    [{'date': '2024-05-01', 'n': 1}, {'date': '2024-05-02', 'n': 2}]
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        buffer_size: int = DEFAULT_BUFFER_SIZE,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.output = _fs.location(Sink.output_location(path))
        self.buffer_size = buffer_size
        self.clock = clock
        """Processing time for rolling by time (a ManualClock in tests)."""
        self.format: PartFileFormat = part_file_format("json")
        self.partitioner: PartitionSpec | None = None
        self.rolling_policy = RollingPolicy.on_checkpoint()
        self._task: _TaskFiles | None = None

    # ---- configuration ------------------------------------------------------------------------

    @classmethod
    def for_rows(cls, path: str | os.PathLike[str]) -> FileSink:
        """A sink writing rows into the folder `path` (JSON Lines unless `with_format`)."""
        return cls(path)

    def with_format(self, name: str, *, schema: pa.Schema | None = None) -> FileSink:
        """Write "json" (JSON Lines, `.jsonl`) or "parquet" (`.parquet`; rows are dicts;
        `schema` is a `pyarrow.Schema`, else inferred from the first rows: give one when
        those may hold None where later rows hold values)."""
        self.format = part_file_format(name, schema)
        return self

    def partition_by(self, *fields: str | PartitionSpec) -> FileSink:
        """Write each row into a partition folder: by field names (dict rows), Hive style,
        `date=2024-05-01/` (several fields nest in the given order; None values go to
        `HIVE_DEFAULT_PARTITION`); or by one function of the row returning the relative
        folder, for example `lambda row: f"date={row['ts'][:10]}"`. Rows keep the fields
        (Spark reads a column found both in a file and in its folder name once)."""
        if len(fields) == 1 and callable(fields[0]):
            self.partitioner = fields[0]
        elif fields and all(isinstance(f, str) for f in fields):
            self.partitioner = _HivePartitioner(tuple(str(f) for f in fields))
        else:
            raise ValueError("partition_by takes field names, or one function of the row")
        return self

    def with_rolling_policy(self, policy: RollingPolicy) -> FileSink:
        """When part files roll besides each checkpoint (by size, by time)."""
        self.rolling_policy = policy
        return self

    # ---- Sink ---------------------------------------------------------------------------------

    def prepare(self) -> None:
        """Create the output folder and prove it is writable, else `SinkError` naming it."""
        probe = self.output.child(STAGING_FOLDER, f".probe-{uuid.uuid4().hex}")
        try:
            _fs.make_dirs(self.output.child(STAGING_FOLDER))
            _fs.write_bytes(probe, b"")
            _fs.delete_file(probe)
        except OSError as error:
            raise SinkError(f"the output folder {self.output} is not writable: {error}") from None

    def storage_locations(self) -> list[str]:
        return [self.output.uri]

    def create_writer(self, context: SinkContext) -> FileSinkWriter:
        """A writer over a copy of this sink: its open files are the writer's own."""
        task_sink = copy.copy(self)
        task_sink._task = None
        return FileSinkWriter(task_sink, context)

    def committed_output(self) -> list[Any]:
        """Every row of every committed part file (staged files are not output yet)."""
        formats = {f.extension: f for f in (part_file_format("json"), self.format)}
        rows: list[Any] = []
        try:
            for name in _fs.list_files_recursive(self.output):
                base, ext = os.path.splitext(name.rsplit("/", 1)[-1])
                if base.startswith(f"{self.format.prefix}-") and ext in formats:
                    rows.extend(formats[ext].read(_fs.read_bytes(self.output.child(name))))
        except (OSError, ValueError, pa.ArrowException) as error:
            raise SinkError(f"cannot read the committed output in {self.output}: {error}") from None
        return rows

    # ---- TwoPhaseCommitSink -------------------------------------------------------------------

    def open(self, context: SinkContext) -> None:
        if self._task is not None:  # an earlier attempt in this process
            self._task.discard_all()
        self._task = _TaskFiles(self, context)

    def begin_transaction(self) -> int:
        return self._files().begin()

    def write(self, transaction: int, records: list[Any]) -> None:
        self._files().write(transaction, records)

    def write_arrow(self, transaction: int, data: pa.RecordBatch) -> None:
        """Arrow data straight into the part file (Parquet: the batch itself, cast to the
        schema; JSON Lines: encoded column by column); rows as dicts when partitioned."""
        if self.partitioner is not None:
            self._files().write(transaction, data.to_pylist())
        else:
            self._files().write_encoded(transaction, self.format.encode_arrow(data))

    def pre_commit(self, transaction: int, checkpoint_id: int) -> dict[str, Any]:
        """Close the transaction's part files; the pending handle lists them, each with
        the final name that says its checkpoint and lineage."""
        return {"files": self._files().close_transaction(transaction, checkpoint_id)}

    def survives_fallback(self) -> bool:
        """Yes: `finish_recovery` moves the abandoned checkpoints' part files aside."""
        return True

    def describe(self) -> str:
        return f"FileSink, folder {self.output}"

    def finish_recovery(self) -> None:
        """After a fallback (`abandoned_above` set), subtask 0 moves every committed part file
        of this lineage for a checkpoint above it into `.abandoned/` beside it (for every
        subtask: no subtask commits anything new before every subtask restored)."""
        context = self._files().context
        above = context.abandoned_above
        if above is None or not context.lineage or context.subtask_index != 0:
            return
        try:
            names = _fs.list_files_recursive(self.output)
        except OSError as error:
            raise SinkError(f"cannot list {self.output}: {error}") from None
        for name in names:
            found = committed_checkpoint(name)
            if found is None or found[0] != context.lineage or found[1] <= above:
                continue
            folder, _, base = name.rpartition("/")
            aside = "/".join(part for part in (folder, ABANDONED_FOLDER, base) if part)
            try:
                _fs.make_dirs(self.output.child(aside).parent)
                _fs.commit_file(self.output.child(name), self.output.child(aside))
            except OSError as error:
                raise SinkError(
                    f"cannot move {self.output.child(name)} of abandoned checkpoint "
                    f"{found[1]} aside: {error}"
                ) from None

    def commit(self, transaction: Any) -> None:
        for staged, final in transaction["files"]:
            self._commit_file(staged, final)

    def abort(self, transaction: Any) -> None:
        """Delete an open transaction's staged files. A pending one (a dict) of an earlier
        deployment lives in that deployment's staging folder, cleared at restore."""
        if isinstance(transaction, int) and self._task is not None:
            self._task.discard(transaction)
        elif isinstance(transaction, dict):
            for staged, _ in transaction["files"]:
                with contextlib.suppress(OSError):
                    _fs.delete_file(self.output.child(staged))

    def close(self) -> None:
        if self._task is not None:
            self._task.discard_all()
            self._task = None

    # ---- internals -----------------------------------------------------------------------------

    def _files(self) -> _TaskFiles:
        if self._task is None:
            raise SinkError("FileSink used before its writer was restored")
        return self._task

    def _commit_file(self, staged: str, final: str) -> None:
        staged_at, final_at = self.output.child(staged), self.output.child(final)
        try:
            if "/" in final:
                _fs.make_dirs(final_at.parent)
            _fs.commit_file(staged_at, final_at)
        except FileNotFoundError:
            raise SinkError(
                f"cannot commit {final_at}: its staged file {staged_at} is missing"
            ) from None
        except OSError as error:
            raise SinkError(f"cannot commit {staged_at} to {final_at}: {error}") from None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_task"] = None  # open files stay in the task that has them
        return state


class FileSinkWriter(TwoPhaseCommitWriter):
    """The two-phase-commit writer of a FileSink; also restores the snapshots the FileSink
    writer wrote before it was built on `TwoPhaseCommitSink` (`LEGACY_STATE_VERSION`)."""

    def decode_state(self, state: Any) -> tuple[list[tuple[int, Any]], Any]:
        if isinstance(state, dict) and "version" in state and "v" not in state:
            if state["version"] != LEGACY_STATE_VERSION:
                raise StateRestoreError(
                    f"unknown FileSink state of sink '{self.context.operator_uid}' "
                    f"(expected version {LEGACY_STATE_VERSION}): {state!r:.200}"
                )
            pending = [
                (int(p["checkpoint_id"]), {"files": [[str(p["staged"]), str(p["final"])]]})
                for p in state["pending"]
            ]
            return pending, None
        return super().decode_state(state)


@dataclass
class _OpenPart:
    file: PartFile
    staged: str
    final: str
    opened_ms: int


@dataclass
class _Transaction:
    open_parts: dict[str, _OpenPart] = field(default_factory=dict)
    """By partition folder."""
    closed: list[list[str]] = field(default_factory=list)
    """[staged, final] of every part file closed (rolled) so far."""


class _TaskFiles:
    """The part files of one subtask's attempt, by transaction. Mailbox thread only."""

    def __init__(self, sink: FileSink, context: SinkContext) -> None:
        self.sink = sink
        self.context = context
        self.uid = _name_part(context.operator_uid)
        self.deployment = _name_part(context.deployment_id)
        self.staging = "/".join(
            (STAGING_FOLDER, self.uid, str(context.subtask_index), self.deployment)
        )
        """This attempt's own staging folder, relative to the output folder."""
        self.transactions: dict[int, _Transaction] = {}
        self._next_transaction = 0
        self._sequence = 0
        self._made_dirs: set[str] = set()
        self._cleaned = False

    def begin(self) -> int:
        if not self._cleaned:  # the restore's commits ran: what is left is leftovers
            self._cleaned = True
            self._delete_leftovers()
        number = self._next_transaction
        self._next_transaction += 1
        self.transactions[number] = _Transaction()
        return number

    def write(self, number: int, records: list[Any]) -> None:
        partitioner = self.sink.partitioner
        if partitioner is None:
            groups = {"": records}
        else:
            groups = {}
            for record in records:
                groups.setdefault(self._folder_of(partitioner, record), []).append(record)
        self._append(
            number, {folder: self.sink.format.encode(rows) for folder, rows in groups.items()}
        )

    def write_encoded(self, number: int, data: Any) -> None:
        """Data the format already encoded, for the unpartitioned output folder."""
        self._append(number, {"": data})

    def _append(self, number: int, encoded: dict[str, Any]) -> None:
        transaction = self.transactions[number]
        now = self.sink.clock.epoch_millis()
        for folder, data in encoded.items():
            part = transaction.open_parts.get(folder)
            if part is not None and self.sink.rolling_policy.should_roll(
                part.file.size(), part.opened_ms, now
            ):
                self._close_part(transaction, folder)
                part = None
            if part is None:
                part = transaction.open_parts[folder] = self._open_part(folder, now)
            try:
                part.file.append(data)
            except (OSError, pa.ArrowException) as error:
                raise SinkError(f"cannot write {self._at(part.staged)}: {error}") from None

    def close_transaction(self, number: int, checkpoint_id: int) -> list[list[str]]:
        """[staged, final] of the transaction's part files, closed; each final name says
        the checkpoint and lineage (when the writer knows its lineage)."""
        transaction = self.transactions.pop(number)
        for folder in list(transaction.open_parts):
            self._close_part(transaction, folder)
        lineage = self.context.lineage
        if not lineage:
            return transaction.closed
        return [
            [staged, _committed_name(final, checkpoint_id, lineage)]
            for staged, final in transaction.closed
        ]

    def discard(self, number: int) -> None:
        """Close and delete the transaction's staged files (open and rolled)."""
        transaction = self.transactions.pop(number, None)
        if transaction is None:
            return
        for part in transaction.open_parts.values():
            with contextlib.suppress(OSError, pa.ArrowException):
                part.file.close()
        staged = [p.staged for p in transaction.open_parts.values()]
        staged.extend(s for s, _ in transaction.closed)
        for name in staged:
            with contextlib.suppress(OSError):
                _fs.delete_file(self._at(name))

    def discard_all(self) -> None:
        for number in list(self.transactions):
            self.discard(number)

    # ---- internals -----------------------------------------------------------------------------

    def _at(self, relative: str) -> _fs.Location:
        return self.sink.output.child(relative)

    def _folder_of(self, partitioner: PartitionSpec, record: Any) -> str:
        try:
            folder = partitioner(record)
        except SinkError:
            raise
        except Exception as error:
            raise SinkError(
                f"sink '{self.context.operator_uid}' cannot find the partition folder of "
                f"{record!r:.200}: {type(error).__name__}: {error}"
            ) from None
        folder = str(folder).strip("/")
        if folder and any(part == "" or part.startswith((".", "_")) for part in folder.split("/")):
            raise SinkError(
                f"sink '{self.context.operator_uid}': partition folder {folder!r} of "
                f"{record!r:.200} has an empty, hidden or relative part"
            )
        return folder

    def _open_part(self, folder: str, now: int) -> _OpenPart:
        name = (
            f"{self.sink.format.prefix}-{self.uid}-{self.context.subtask_index}-{self.deployment}"
            f"-{self._sequence:08d}{self.sink.format.extension}"
        )
        self._sequence += 1
        final = f"{folder}/{name}" if folder else name
        staged = f"{self.staging}/{final}"
        parent = staged.rsplit("/", 1)[0]
        try:
            if parent not in self._made_dirs:
                _fs.make_dirs(self._at(parent))
                self._made_dirs.add(parent)
            stream = _fs.open_output_stream(self._at(staged), self.sink.buffer_size)
            part = self.sink.format.open(stream)
        except (OSError, pa.ArrowException) as error:
            raise SinkError(f"cannot create {self._at(staged)}: {error}") from None
        return _OpenPart(part, staged, final, now)

    def _close_part(self, transaction: _Transaction, folder: str) -> None:
        part = transaction.open_parts.pop(folder)
        try:
            part.file.close()
            _fs.sync_file(self._at(part.staged))  # durable before the checkpoint names it
        except (OSError, pa.ArrowException) as error:
            raise SinkError(f"cannot write {self._at(part.staged)}: {error}") from None
        transaction.closed.append([part.staged, part.final])

    def _delete_leftovers(self) -> None:
        """Delete the staging folders of earlier deployments of this operator for this
        subtask index: what is left there after the restore's commits was never part of a
        completed checkpoint (files of failed or zombie attempts). After a change of
        parallelism a subtask also clears the old subtask indexes whose state it received
        (index mod parallelism), never those of other current subtasks."""
        operator_folder = self.sink.output.child(STAGING_FOLDER, self.uid)
        context = self.context
        try:
            for subtask in _fs.list_dir(operator_folder):
                if not subtask.isdigit() or int(subtask) % context.parallelism != (
                    context.subtask_index
                ):
                    continue
                for deployment in _fs.list_dir(operator_folder.child(subtask)):
                    if deployment != self.deployment:
                        _fs.delete_dir(operator_folder.child(subtask, deployment))
        except OSError as error:
            raise SinkError(f"cannot clean up {operator_folder}: {error}") from None


def _committed_name(final: str, checkpoint_id: int, lineage: str) -> str:
    """`final` with `-ck<checkpoint>-<lineage>` before its extension.

    >>> _committed_name("d=1/part-s-0-ab-1-00000003.jsonl", 7, "00ff")
    'd=1/part-s-0-ab-1-00000003-ck7-00ff.jsonl'
    """
    stem, dot, ext = final.rpartition(".") if "." in final.rpartition("/")[2] else (final, "", "")
    return f"{stem}-ck{checkpoint_id}-{lineage}{dot}{ext}"


def committed_checkpoint(path: str) -> tuple[str, int] | None:
    """(lineage, checkpoint id) a committed part file's name says, None for a name without
    them (written without a lineage, or before lineages existed).

    >>> committed_checkpoint("d=1/part-s-0-ab-1-00000003-ck7-00ff.jsonl")
    ('00ff', 7)
    >>> committed_checkpoint("part-sink-0-run1-0-00000000.jsonl") is None
    True
    """
    match = _COMMITTED_NAME.match(path.rsplit("/", 1)[-1])
    return (match.group(2), int(match.group(1))) if match else None


class _HivePartitioner:
    """`field=value/...` folders of dict rows, values escaped as Hive and Spark do."""

    def __init__(self, fields: tuple[str, ...]) -> None:
        self.fields = fields

    def __call__(self, row: Any) -> str:
        if not isinstance(row, dict):
            raise SinkError(
                f"partitioning by field(s) {list(self.fields)} needs dict rows, got a "
                f"{type(row).__name__}: {row!r:.200}"
            )
        parts = []
        for name in self.fields:
            if name not in row:
                raise SinkError(f"a row lacks the partition field {name!r}: {row!r:.200}")
            value = row[name]
            text = HIVE_DEFAULT_PARTITION if value is None else _escape(str(value))
            parts.append(f"{_escape(name)}={text}")
        return "/".join(parts)


_HIVE_SPECIAL = frozenset("\"#%'*/:=?\\\x7f{[]^")


def _escape(text: str) -> str:
    """Hive's path escaping (`%XX` for the characters a folder name must not hold)."""
    return "".join(f"%{ord(c):02X}" if c in _HIVE_SPECIAL or ord(c) < 0x20 else c for c in text)


_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def _name_part(text: str) -> str:
    """`text` made safe for a file name; a digest keeps altered or long names distinct."""
    safe = _UNSAFE.sub("_", text)
    if safe == text and len(text) <= 64:
        return text
    return f"{safe[:48]}_{hashlib.sha256(text.encode()).hexdigest()[:10]}"
