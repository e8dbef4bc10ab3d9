"""DeltaSink: rows appended to a Delta Lake table exactly once, one Delta commit per checkpoint
and subtask.

Preparation: `DeltaSink.for_path(path)` names the table (a local folder, or `s3://...` with
`storage_options` as the `deltalake` package takes them). The table is created on the first
commit from the rows' schema, or on the driver before the job starts when `.with_schema()`
gives one. Needs the `deltalake` package (`pip install 'barrierflow[delta]'`).

Running: each subtask buffers its rows between two checkpoint barriers as Arrow tables; at
the barrier (`pre_commit`) it writes them as Parquet files into the table's folder under
names no one else uses. Those files are invisible: no Delta commit lists them yet. When the
checkpoint completes, one Delta commit adds them, carrying an application transaction
(`txn` action) whose app id names the job, the sink, the checkpoint lineage and the
subtask (`job/uid/lineage/subtask`) and whose version is the checkpoint id; its commit info
says the same as custom metadata, {"barrierflow": {"app_id", "checkpoint"}}.

Recovering: the restored checkpoint's pending transactions (their files and stats are in the
checkpoint) are committed again unless the table's `txn` version for their app id already
reaches their checkpoint, which makes a repeated commit a no-op. After a rescale each
restored transaction keeps the app id of the subtask (and lineage) that wrote it.

Falling back: a restore past damaged checkpoints (`SinkContext.abandoned_above`) takes back
what those checkpoints committed: subtask 0 finds the commits of this lineage's app ids
above it (the cheap check first: each app id's `txn` version) and makes one Delta commit
removing their files, before any subtask can commit anything new.

Rows that do not fit the table fail the job by default, naming the sink, the table and the
row. With `.with_dead_letter_table(path)` they go instead, with the error, into a second
Delta table written the same way (its own application transaction per checkpoint and
subtask, committed in the same commit step), so dead letters are exactly once too.

Sweeping: files of transactions that never committed (a task killed between writing and
its checkpoint, a run failed or cancelled before the checkpoint completed) are deleted by
the next restore (`_sweep_uncommitted`): a data file's name says its lineage, subtask and
the checkpoint its transaction began after, which together with the table's `txn`
version of that app id tells whether it can have been committed. Files of other lineages
and files named before lineages are never swept (`DeltaTable.vacuum(full=True)` removes
those). Checkpoint ids never repeat within a
lineage (the job's checkpoint folder sees to that, and a job moved to new storage gets a
new lineage, so its own app ids); a table holding a newer version for this run's app id
fails the commit with a clear error instead of skipping it. Taken-back files stay until
`vacuum` (a remove, like any Delta delete); a table with `delta.appendOnly` refuses it.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import hashlib
import json
import os
import re
import urllib.parse
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from barrierflow.connectors.base import Sink, SinkContext
from barrierflow.connectors.two_phase_commit import TwoPhaseCommitSink
from barrierflow.errors import SinkError

__all__ = [
    "DEFAULT_TARGET_FILE_SIZE",
    "HANDLE_VERSION",
    "MAX_COMMIT_RETRIES",
    "NULL_PARTITION",
    "TXN_RETENTION",
    "DeltaSink",
    "Handle",
]

DEFAULT_TARGET_FILE_SIZE = 128 * 1024 * 1024
"""Bytes of buffered Arrow data after which a transaction writes a file before its barrier."""

MAX_COMMIT_RETRIES = 100
"""How often a commit is retried when other subtasks commit at the same time (appends never
conflict with each other; each retry only re-reads the log)."""

HANDLE_VERSION = 1
"""Format version of a transaction handle stored in checkpoints."""

TXN_RETENTION = "delta.setTransactionRetentionDuration"
"""A table property making `txn` versions expire: with it a version cannot prove that a
file was never committed, so such a table is not swept."""

NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
"""The folder name of a partition whose value is null (as Spark and Hive spell it)."""

Handle = dict[str, Any]
"""A transaction handle: {"v", "app_id", "name", "checkpoint", "schema", "files", "after"},
and "dead_letters" (the handle of the dead-letter table's transaction, or None); "after"
is a checkpoint id below the one the transaction will be pre-committed for (None in
handles of writers without a lineage, and in handles from before it existed); msgpack-able,
stored in checkpoints. "files" lists the written data files with their size, partition
values and stats; "schema" is the Arrow schema (IPC bytes) they were written with."""


class _Misfit(Exception):
    """Row `index` of a batch does not fit the table's schema, because of `why`."""

    def __init__(self, index: int, why: str) -> None:
        super().__init__(why)
        self.index, self.why = index, why


class DeltaSink(TwoPhaseCommitSink[Handle]):
    """Appends dict rows to a Delta table, exactly once: each subtask's rows between two
    checkpoint barriers become one Delta commit, made once that checkpoint completes.

    Exactly-once because the commit carries an application transaction (app id = job, sink
    uid, lineage and subtask; version = checkpoint id) and a commit the table already has
    is skipped; a fallback takes back the commits of the checkpoints it abandons.
    Assumes checkpoint ids never repeat within a lineage (checkpoint/lineage.py).

    >>> import pathlib, tempfile
    >>> from barrierflow.connectors.base import SinkContext
    >>> table = str(pathlib.Path(tempfile.mkdtemp()) / "events")
    >>> sink = DeltaSink.for_path(table)
    >>> writer = sink.create_writer(SinkContext("out", 0, 1, 0, "run-0", job_name="demo"))
    >>> writer.restore([])
    >>> writer.write_batch([{"word": "apple", "n": 1}, {"word": "pear", "n": 2}])
    >>> writer.pre_commit(1)
    >>> sink.committed_output()      # files written, nothing committed yet
    []
    >>> writer.commit(1)
    >>> sorted(row["word"] for row in sink.committed_output())
    ['apple', 'pear']
    >>> from deltalake import DeltaTable
    >>> DeltaTable(table).transaction_version("demo/out/0")
    1
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        storage_options: Mapping[str, str] | None = None,
        schema: Any = None,
        partition_columns: Sequence[str] = (),
        target_file_size: int = DEFAULT_TARGET_FILE_SIZE,
    ) -> None:
        self.table_uri = _table_uri(Sink.output_location(path))
        self.storage_options = dict(storage_options or {})
        self.schema = schema
        """The configured Arrow schema, or None to take it from the table or the first rows."""
        self.partition_columns = list(partition_columns)
        self.target_file_size = target_file_size
        self.dead_letters: DeltaSink | None = None
        """The sink of the dead-letter table (`with_dead_letter_table`), None: misfits fail."""
        self._reset_live_state()

    # ---- configuration ---------------------------------------------------------------------

    @classmethod
    def for_path(
        cls, path: str | os.PathLike[str], storage_options: Mapping[str, str] | None = None
    ) -> DeltaSink:
        """A sink appending rows (dicts of column -> value) to the Delta table at `path`: a
        local folder or an object-store URI (`s3://bucket/table`), with `storage_options`
        as `deltalake` takes them (e.g. `AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`)."""
        return cls(path, storage_options=storage_options)

    def with_schema(self, schema: Any) -> DeltaSink:
        """The same sink with a fixed Arrow schema (`pyarrow.Schema`): the table is created
        with it before the job starts, and an existing table must have it."""
        configured = self._copy()
        configured.schema = schema
        return configured

    def partition_by(self, *columns: str) -> DeltaSink:
        """The same sink creating the table partitioned by `columns` (string, integer, boolean
        or date columns); an existing table must have these partition columns."""
        configured = self._copy()
        configured.partition_columns = list(columns)
        return configured

    def with_storage_options(self, options: Mapping[str, str]) -> DeltaSink:
        """The same sink with `deltalake` storage options (credentials, endpoint); they apply
        to the dead-letter table too."""
        configured = self._copy()
        configured.storage_options = dict(options)
        if configured.dead_letters is not None:
            configured.dead_letters.storage_options = dict(options)
        return configured

    def with_dead_letter_table(self, path: str | os.PathLike[str]) -> DeltaSink:
        """The same sink writing rows that do not fit the table into the Delta table at
        `path` (same storage options) instead of failing the job.

        The dead-letter table has the columns `sink` (the sink's uid), `row` (the row as
        JSON text), `error` and `failed_at` (a UTC timestamp); it is created before the job
        starts if missing. Its rows are written like the sink's own: one commit per
        checkpoint and subtask with its own application transaction, made in the same
        commit step as the table's, so each rejected row lands there exactly once.

        >>> import pathlib, tempfile, pyarrow
        >>> from barrierflow.connectors.base import SinkContext
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> sink = DeltaSink.for_path(folder / "t").with_dead_letter_table(folder / "rejected")
        >>> sink = sink.with_schema(pyarrow.schema([("n", pyarrow.int64())]))
        >>> writer = sink.create_writer(SinkContext("out", 0, 1, 0, "run-0", job_name="demo"))
        >>> writer.restore([])
        >>> writer.write_batch([{"n": 1}, {"n": "two"}, "three"])
        >>> writer.pre_commit(1); writer.commit(1)
        >>> sink.committed_output()
        [{'n': 1}]
        >>> for letter in sink.dead_letters.committed_output():
        ...     print(letter["sink"], letter["row"], letter["error"][:35])
        out {"n": "two"} field 'n' of type int64 cannot hold
        out "three" a row must be a dict
        """
        configured = self._copy()
        dead = DeltaSink(path, storage_options=self.storage_options)
        configured.dead_letters = dead.with_schema(_dead_letter_schema())
        return configured

    def _copy(self) -> DeltaSink:
        configured = copy.copy(self)
        configured._reset_live_state()
        if configured.dead_letters is not None:
            configured.dead_letters = configured.dead_letters._copy()
        return configured

    def _reset_live_state(self) -> None:
        self._context: SinkContext | None = None
        self._table_schema: Any = None
        """The Arrow schema rows are converted to: the table's, the configured one, or the one
        inferred from the first rows (None until known)."""
        self._buffers: dict[str, list[Any]] = {}
        """Arrow tables not yet written, by transaction name."""
        self._buffered_bytes: dict[str, int] = {}
        self._filesystem: Any = None
        self._sequence = 0
        self._after: int | None = None
        """A checkpoint id below the one the next transaction will be pre-committed for, and
        at or above this subtask's app id's `txn` version while it begins (see
        `_sweep_uncommitted`); None until `finish_recovery` reads it."""

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_filesystem"] = None  # rebuilt in the task; the handler is not picklable
        state["_buffers"], state["_buffered_bytes"] = {}, {}
        return state

    # ---- driver side -----------------------------------------------------------------------

    def prepare(self) -> None:
        """Fail fast on the driver: an existing table must match the configured schema and
        partition columns; with a configured schema a missing table is created now."""
        delta = _deltalake()
        if _is_local(self.table_uri):
            try:
                os.makedirs(self.table_uri, exist_ok=True)
            except OSError as error:
                raise SinkError(
                    f"cannot create the Delta table folder {self.table_uri}: {error}"
                ) from None
        existing = self._load_table()
        if existing is not None:
            self._check_table(existing, self.schema)
        elif self.schema is not None:
            self._create_table(_normalised(delta, self.schema))
        if self.dead_letters is not None:
            self.dead_letters.prepare()

    def storage_locations(self) -> list[str]:
        own = [self.table_uri] if _is_local(self.table_uri) else []
        return own + (self.dead_letters.storage_locations() if self.dead_letters else [])

    def committed_output(self) -> list[Any]:
        """Every committed row (rows of files no Delta commit lists are not output)."""
        table = self._load_table()
        if table is None:
            return []
        return self._read(table).to_pylist()

    # ---- transaction steps -----------------------------------------------------------------

    def open(self, context: SinkContext) -> None:
        """Remember where this writer runs and read the table's schema if it exists."""
        _deltalake()
        self._context = context
        self._after = None
        if _is_local(self.table_uri):
            os.makedirs(self.table_uri, exist_ok=True)
        existing = self._load_table()
        if existing is not None:
            self._table_schema = self._check_table(existing, self.schema)
        elif self.schema is not None:
            self._table_schema = _normalised(_deltalake(), self.schema)
        if self.dead_letters is not None:
            self.dead_letters.open(context)

    def begin_transaction(self) -> Handle:
        context = self._require_context()
        name = f"{_name_part(context.deployment_id)}-{self._sequence:08d}"
        self._sequence += 1
        self._buffers[name], self._buffered_bytes[name] = [], 0
        if context.lineage and self._after is None:  # used without finish_recovery
            self._after = self._own_version()
        return {
            "v": HANDLE_VERSION,
            "app_id": self.app_id(context.subtask_index),
            "name": name,
            "checkpoint": None,
            "schema": None,
            "files": [],
            "after": self._after if context.lineage else None,
            "dead_letters": (
                None if self.dead_letters is None else self.dead_letters.begin_transaction()
            ),
        }

    def write(self, transaction: Handle, records: list[Any]) -> None:
        """Convert `records` to the table's schema and buffer them. A row that does not fit
        fails the job, naming the sink, the table, the row and the field, or with a
        dead-letter table goes there in this transaction."""
        dead = self.dead_letters
        if self._table_schema is None:
            rows = records if dead is None else [r for r in records if isinstance(r, Mapping)]
            if rows:
                self._table_schema = self._schema_of_first_rows(rows)
        rejected: list[tuple[Any, str]] = []
        try:
            batch = self._to_arrow(records)
        except _Misfit as misfit:
            if dead is None:
                row = records[misfit.index]
                raise SinkError(self._bad_row(row, misfit.index, misfit.why)) from None
            batch, rejected = self._sort_out(records)
        if rejected:
            assert dead is not None
            dead.write(transaction["dead_letters"], [self._dead_letter(*r) for r in rejected])
        if batch is None or not batch.num_rows:
            return
        name = transaction["name"]
        self._buffers[name].append(batch)
        self._buffered_bytes[name] += batch.nbytes
        if self._buffered_bytes[name] >= self.target_file_size:
            self._write_files(transaction)

    def pre_commit(self, transaction: Handle, checkpoint_id: int) -> None:
        """Write the buffered rows as Parquet files (invisible until the commit) and record
        them, with their stats, in the handle stored in the checkpoint (the dead letters'
        likewise, in their own handle inside it)."""
        self._write_files(transaction)
        transaction["checkpoint"] = checkpoint_id
        self._after = max(self._after or 0, checkpoint_id)  # the next transaction's
        self._buffers.pop(transaction["name"], None)
        self._buffered_bytes.pop(transaction["name"], None)
        if transaction.get("dead_letters") is not None:
            self._dead_letter_sink(transaction).pre_commit(
                transaction["dead_letters"], checkpoint_id
            )

    def commit(self, transaction: Handle) -> None:
        """Add the transaction's files to the table in one Delta commit.

        1. A transaction without files commits nothing (no empty Delta commits).
        2. Find the table, creating it from the transaction's schema if it does not exist;
           an existing table must have the schema the files were written with.
        3. Skip the commit if the table's `txn` version for the app id already reaches the
           checkpoint (committed before a failure); outside a restore that means another
           run used these checkpoint ids, which is an error rather than a silent skip.
        4. Commit the files with the application transaction (app id, checkpoint id).
        5. The same for the dead letters, into the dead-letter table.
        """
        self._commit(transaction, recovering=False)
        if transaction.get("dead_letters") is not None:
            self._dead_letter_sink(transaction).commit(transaction["dead_letters"])

    def recover_and_commit(self, transaction: Handle) -> None:
        """Commit a transaction of the restored checkpoint unless the table already has it."""
        _check_handle(transaction, self._sink_name())
        self._commit(transaction, recovering=True)
        if transaction.get("dead_letters") is not None:
            self._dead_letter_sink(transaction).recover_and_commit(transaction["dead_letters"])

    def abort(self, transaction: Handle) -> None:
        """Drop the buffered rows and delete the transaction's files, unless the table holds
        them already (a pre-committed transaction whose checkpoint did commit)."""
        self._buffers.pop(transaction.get("name"), None)
        self._buffered_bytes.pop(transaction.get("name"), None)
        if transaction.get("dead_letters") is not None:
            self._dead_letter_sink(transaction).abort(transaction["dead_letters"])
        files = transaction.get("files") or []
        if not files:
            return
        checkpoint = transaction.get("checkpoint")
        if checkpoint is not None:
            table = self._load_table()
            version = None if table is None else table.transaction_version(transaction["app_id"])
            if version is not None and version >= checkpoint:
                return
        filesystem = self._fs()
        for entry in files:
            # already gone, or left for VACUUM: no commit ever references it
            with contextlib.suppress(OSError):
                filesystem.delete_file(entry["path"])

    def close(self) -> None:
        self._buffers.clear()
        self._buffered_bytes.clear()
        self._filesystem = None
        if self.dead_letters is not None:
            self.dead_letters.close()

    # ---- naming ----------------------------------------------------------------------------

    def app_id(self, subtask_index: int) -> str:
        """The application-transaction id of one subtask: job name, sink uid, lineage and
        subtask index (stable across restarts and reruns into the same checkpoint folder;
        without a lineage, the format from before lineages: `job/uid/subtask`)."""
        context = self._require_context()
        lineage = f"{context.lineage}/" if context.lineage else ""
        return f"{context.job_name}/{context.operator_uid}/{lineage}{subtask_index}"

    # ---- falling back ----------------------------------------------------------------------

    def survives_fallback(self) -> bool:
        """Yes: `finish_recovery` takes back what abandoned checkpoints committed."""
        return True

    def describe(self) -> str:
        return f"DeltaSink, table {self.table_uri}"

    def finish_recovery(self) -> None:
        """After the restored transactions were committed: delete the data files of this
        lineage's transactions that never committed and this subtask owns
        (`_sweep_uncommitted`). After a fallback (`abandoned_above` set), subtask 0 also
        takes back every commit of this lineage for a checkpoint above it, for every old
        subtask (one remover: no commits conflicting with each other; no subtask commits
        anything new before every subtask restored). Then the same in the dead-letter
        table."""
        context = self._require_context()
        if context.lineage:
            table = self._load_table()  # as the restored commits left it
            self._sweep_uncommitted(table)
            self._after = self._own_version(table)
        above = context.abandoned_above
        if above is not None and context.lineage and context.subtask_index == 0:
            self._take_back(above)
        if self.dead_letters is not None:
            self.dead_letters.finish_recovery()

    def _own_version(self, table: Any = None) -> int:
        """This subtask's app id's `txn` version in `table` (read now if not given; 0 for
        none): every transaction it begins now will be pre-committed for a checkpoint above
        it (a commit at or below it is refused)."""
        table = self._load_table() if table is None else table
        app_id = self.app_id(self._require_context().subtask_index)
        version = None if table is None else table.transaction_version(app_id)
        return version or 0

    def _sweep_uncommitted(self, table: Any) -> None:
        """Delete this lineage's data files that no Delta commit ever referenced and this
        subtask owns (those of old subtask j belong to subtask j mod parallelism, which
        restored j's state and committed its pending transactions just before).

        A file named (lineage, j, after) belongs to a transaction of app id j for some
        checkpoint c > after. App id j commits its transactions in checkpoint order and its
        `txn` version v only grows, so a committed one has c <= v, hence after < v: a file
        with v None or v <= after was never committed, and no writer is left that could
        still commit it (only the owner commits j's transactions, and it is here, before
        its first transaction). Files a later commit removed (a take-back, OPTIMIZE) keep
        after < v, so they stay for time travel until `vacuum`. `table` is the table (None:
        none yet) as the restored commits left it. Costs one listing of the table folder
        per subtask and restore (`_data_files`)."""
        context = self._require_context()
        if table is not None and TXN_RETENTION in (table.metadata().configuration or {}):
            return  # an expired version could not tell committed files from the rest
        prefix = _swept_prefix(context)
        versions: dict[int, int | None] = {}
        doomed = []
        for path in self._data_files():
            found = _swept_name(path.rpartition("/")[2], prefix)
            if found is None or found[0] % context.parallelism != context.subtask_index:
                continue
            subtask, after = found
            if subtask not in versions:
                app_id = self.app_id(subtask)
                versions[subtask] = None if table is None else table.transaction_version(app_id)
            version = versions[subtask]
            if version is None or version <= after:
                doomed.append(path)
        if doomed and table is not None:  # belt and braces: never a file the table lists
            listed = _column(table.get_add_actions(flatten=False), "path")
            active = set(listed) | {urllib.parse.unquote(p) for p in listed}
            doomed = [p for p in doomed if p not in active]
        filesystem = self._fs()
        for path in doomed:
            try:
                filesystem.delete_file(path)
            except FileNotFoundError:
                pass  # another cleanup of the same leftovers was faster
            except OSError as error:
                raise SinkError(
                    f"{self._sink_name()}: cannot delete {path}, a data file of a transaction "
                    f"that never committed: {error}"
                ) from None

    def _data_files(self) -> list[str]:
        """The paths of the files in the table folder and its partition folders (`col=val`,
        at any depth), not in `_delta_log` or other folders starting with `_` or `.`: one
        listing of the top level, and one recursive listing per top-level partition folder
        (on an object store, one LIST request per 1,000 files)."""
        from pyarrow import fs as pafs

        filesystem = self._fs()
        try:
            top = filesystem.get_file_info(pafs.FileSelector("", allow_not_found=True))
            found = [i for i in top if not i.base_name.startswith(("_", "."))]
            paths = [i.path for i in found if i.type == pafs.FileType.File]
            for folder in (i for i in found if i.type == pafs.FileType.Directory):
                if "=" not in folder.base_name:
                    continue
                selector = pafs.FileSelector(folder.path, recursive=True, allow_not_found=True)
                paths += [
                    i.path
                    for i in filesystem.get_file_info(selector)
                    if i.type == pafs.FileType.File
                ]
        except OSError as error:
            raise SinkError(f"{self._sink_name()}: cannot list the table folder: {error}") from None
        return paths

    def _take_back(self, above: int) -> None:
        """One Delta commit removing the files that commits of this lineage's app ids for
        checkpoints above `above` added (and that are still in the table)."""
        table = self._load_table()
        if table is None:
            return
        context = self._require_context()
        bound = max(context.max_parallelism, context.parallelism)
        over = set()
        for index in range(bound):
            app_id = self.app_id(index)
            version = table.transaction_version(app_id)
            if version is not None and version > above:
                over.add(app_id)
        if not over:
            return  # the cheap check: no commit of this lineage above it
        added = self._added_by(table, over, above)
        active = set(_column(table.get_add_actions(flatten=False), "path"))
        delta = _deltalake()
        now = context.clock.epoch_millis()
        actions = [
            delta.transaction.RemoveAction(
                urllib.parse.unquote(entry["path"]),
                True,
                now,
                entry.get("size"),
                entry.get("partitionValues"),
            )
            for entry in added
            if entry["path"] in active
        ]
        if not actions:
            return  # taken back before (an earlier attempt of this restore)
        properties = delta.CommitProperties(
            custom_metadata={
                "barrierflow": {"take_back": context.lineage, "above_checkpoint": above}
            },
            max_commit_retries=MAX_COMMIT_RETRIES,
        )
        self._write_transaction(
            table, actions, properties,
            f"take back the {len(actions)} file(s) committed for checkpoints above {above} of "
            f"lineage {context.lineage}",
        )  # fmt: skip

    def _added_by(self, table: Any, app_ids: set[str], above: int) -> list[dict[str, Any]]:
        """The `add` entries of the commits of `app_ids` for checkpoints above `above`,
        read from the Delta log newest first until each app id's commit at or below `above`
        (its checkpoint ids grow with the log), or the log's start."""
        import pyarrow.fs as pafs

        filesystem, left, added = self._fs(), set(app_ids), []
        for version in range(table.version(), -1, -1):
            path = f"_delta_log/{version:020d}.json"
            if filesystem.get_file_info(path).type == pafs.FileType.NotFound:
                break  # cleaned up by log retention: nothing older to find
            with filesystem.open_input_stream(path) as stream:
                entries = [json.loads(line) for line in stream.read().splitlines() if line]
            info = next((e["commitInfo"] for e in entries if "commitInfo" in e), {})
            ours = info.get("barrierflow") or {}
            app_id, checkpoint = ours.get("app_id"), ours.get("checkpoint")
            if app_id not in left or checkpoint is None:
                continue
            if int(checkpoint) <= above:
                left.discard(app_id)
                if not left:
                    break
                continue
            added.extend(e["add"] for e in entries if "add" in e)
        return added

    # ---- internals -------------------------------------------------------------------------

    def _require_context(self) -> SinkContext:
        if self._context is None:
            raise SinkError("DeltaSink: the writer was not opened")
        return self._context

    def _dead_letter_sink(self, transaction: Handle) -> DeltaSink:
        """The dead-letter table's sink, for a transaction that holds dead letters."""
        if self.dead_letters is None:
            raise SinkError(
                f"{self._sink_name()}: the restored checkpoint holds rows for a dead-letter "
                "table, but the sink has none now: configure it again with "
                ".with_dead_letter_table(...) to commit them"
            )
        return self.dead_letters

    def _dead_letter(self, row: Any, why: str) -> dict[str, Any]:
        return {
            "sink": self._require_context().operator_uid,
            "row": json.dumps(row, default=repr),
            "error": why,
            "failed_at": datetime.datetime.fromtimestamp(
                self._require_context().clock.epoch_millis() / 1000, datetime.UTC
            ),
        }

    def _sort_out(self, records: list[Any]) -> tuple[Any, list[tuple[Any, str]]]:
        """The rows that fit, as one Arrow table (None if none does), and (row, why) of each
        row that does not."""
        import pyarrow as pa

        fitting, rejected = [], []
        for row in records:
            if self._table_schema is None:
                rejected.append((row, "a row must be a dict"))
                continue
            try:
                fitting.append(self._to_arrow([row]))
            except _Misfit as misfit:
                rejected.append((row, misfit.why))
        return (pa.concat_tables(fitting) if fitting else None), rejected

    def _sink_name(self) -> str:
        uid = self._context.operator_uid if self._context is not None else "?"
        return f"DeltaSink '{uid}' (table {self.table_uri})"

    def _fs(self) -> Any:
        """A pyarrow filesystem rooted at the table folder, with the table's storage options."""
        if self._filesystem is None:
            from deltalake.fs import DeltaStorageHandler
            from pyarrow import fs as pafs

            handler = DeltaStorageHandler(self.table_uri, self.storage_options or None)
            self._filesystem = pafs.PyFileSystem(handler)
        return self._filesystem

    def _load_table(self) -> Any:
        """The table, or None where no Delta table exists yet."""
        delta = _deltalake()
        try:
            if not delta.DeltaTable.is_deltatable(self.table_uri, self.storage_options or None):
                return None
            return delta.DeltaTable(self.table_uri, storage_options=self.storage_options or None)
        except Exception as error:  # deltalake's errors share no useful base
            raise SinkError(f"{self._sink_name()}: cannot read the table: {error}") from None

    def _create_table(self, schema: Any) -> Any:
        """Create the table (a concurrent creation by another subtask is fine)."""
        delta = _deltalake()
        try:
            delta.DeltaTable.create(
                self.table_uri,
                schema,
                mode="ignore",
                partition_by=self.partition_columns or None,
                storage_options=self.storage_options or None,
            )
        except Exception as error:
            if self._load_table() is None:  # not merely lost a race with another subtask
                raise SinkError(f"{self._sink_name()}: cannot create the table: {error}") from None
        table = self._load_table()
        self._check_table(table, schema)
        return table

    def _check_table(self, table: Any, schema: Any) -> Any:
        """The table's Arrow schema, after checking it against `schema` (if given) and the
        configured partition columns; SinkError naming the table and the field otherwise."""
        import pyarrow as pa

        table_schema = pa.schema(table.schema().to_arrow())
        partitions = list(table.metadata().partition_columns)
        if self.partition_columns and partitions != self.partition_columns:
            raise SinkError(
                f"{self._sink_name()}: the table is partitioned by {partitions}, "
                f"the sink by {self.partition_columns}"
            )
        if schema is not None:
            _check_same_fields(_normalised(_deltalake(), schema), table_schema, self._sink_name())
        return table_schema

    def _schema_of_first_rows(self, records: list[Any]) -> Any:
        """The schema for a table that does not exist yet: the table's if another subtask
        created it meanwhile, else inferred from `records` (each field's type from its values)."""
        import pyarrow as pa

        existing = self._load_table()
        if existing is not None:
            return self._check_table(existing, None)
        names: dict[str, None] = {}
        for index, row in enumerate(records):
            if not isinstance(row, Mapping):
                raise SinkError(self._bad_row(row, index, "a row must be a dict"))
            names.update(dict.fromkeys(row))
        fields = []
        for name in names:
            try:
                column = pa.array([row.get(name) for row in records])
            except (pa.ArrowException, TypeError, ValueError) as error:
                raise SinkError(
                    f"{self._sink_name()}: cannot infer the type of field '{name}' from the "
                    f"first rows ({error}); give the schema with .with_schema(...)"
                ) from None
            if pa.types.is_null(column.type):
                raise SinkError(
                    f"{self._sink_name()}: field '{name}' is null in every first row, so its "
                    "type is unknown; give the schema with .with_schema(...)"
                )
            fields.append(pa.field(name, column.type))
        return _normalised(_deltalake(), pa.schema(fields))

    def _to_arrow(self, records: list[Any]) -> Any:
        """`records` as an Arrow table of the table's schema; `_Misfit` names the first row
        that does not fit and why."""
        import pyarrow as pa

        schema = self._table_schema
        if schema is None:  # no row so far was a dict (only with a dead-letter table)
            raise _Misfit(0, "a row must be a dict")
        names = set(schema.names)
        for index, row in enumerate(records):
            if not isinstance(row, Mapping):
                raise _Misfit(index, "a row must be a dict")
            if not names.issuperset(row):
                extra = sorted(set(row) - names)
                raise _Misfit(index, f"field '{extra[0]}' is not in the table")
        try:
            table = pa.Table.from_pylist(records, schema=schema)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            raise self._culprit(records) from None
        for field, column in zip(schema, table.columns, strict=True):
            if not field.nullable and column.null_count:
                index = column.to_pylist().index(None)
                raise _Misfit(index, f"field '{field.name}' may not be null")
        return table

    def _culprit(self, records: list[Any]) -> Exception:
        """The `_Misfit` naming the first row and field that do not convert."""
        import pyarrow as pa

        for index, row in enumerate(records):
            for field in self._table_schema:
                try:
                    pa.array([row.get(field.name)], type=field.type)
                except (pa.ArrowException, TypeError, ValueError, OverflowError) as error:
                    return _Misfit(
                        index,
                        f"field '{field.name}' of type {field.type} cannot hold "
                        f"{row.get(field.name)!r:.80} ({error})",
                    )
        return SinkError(f"{self._sink_name()}: the rows do not convert to the table's schema")

    def _bad_row(self, row: Any, index: int, why: str) -> str:
        return (
            f"{self._sink_name()}: row {index} of the batch does not fit the table: "
            f"{why}: {row!r:.200}"
        )

    def _write_files(self, transaction: Handle) -> None:
        """Write the buffered rows of `transaction` as Parquet files (one per partition)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        batches = self._buffers.get(transaction["name"])
        if not batches:
            return
        data = pa.concat_tables(batches)
        self._buffers[transaction["name"]], self._buffered_bytes[transaction["name"]] = [], 0
        if transaction["schema"] is None:
            transaction["schema"] = self._table_schema.serialize().to_pybytes()
        filesystem = self._fs()
        context = self._require_context()
        if context.lineage and transaction.get("after") is not None:
            # lineage, subtask and `after` read back by `_sweep_uncommitted`
            name = (
                f"{_swept_prefix(context)}{context.subtask_index}.{transaction['after']}."
                f"{transaction['name']}"
            )
        else:  # the names from before lineages: never swept
            name = f"part-{_name_part(context.operator_uid)}-{transaction['name']}"
        for values, part in self._partitions(data):
            folder = "/".join(_partition_folder(c, values[c]) for c in self.partition_columns)
            path = f"{folder}/" if folder else ""
            path += f"{name}-{len(transaction['files']):05d}-{uuid.uuid4().hex[:8]}.parquet"
            try:
                if folder:
                    filesystem.create_dir(folder, recursive=True)
                with filesystem.open_output_stream(path) as stream:
                    pq.write_table(part, stream, compression="snappy")
                size = filesystem.get_file_info(path).size
            except OSError as error:
                raise SinkError(f"{self._sink_name()}: cannot write {path}: {error}") from None
            transaction["files"].append(
                {
                    "path": path,
                    "size": size,
                    "partition_values": values,
                    "modification_time": self._require_context().clock.epoch_millis(),
                    "stats": _stats(part),
                }
            )

    def _partitions(self, data: Any) -> list[tuple[dict[str, str | None], Any]]:
        """(partition values as Delta spells them, rows without the partition columns)."""
        if not self.partition_columns:
            return [({}, data)]
        import pyarrow as pa

        keys = list(zip(*(data.column(c).to_pylist() for c in self.partition_columns), strict=True))
        groups: dict[tuple[Any, ...], list[int]] = {}
        for index, key in enumerate(keys):
            groups.setdefault(key, []).append(index)
        rest = data.drop_columns(self.partition_columns)
        return [
            (
                {c: _partition_value(v) for c, v in zip(self.partition_columns, key, strict=True)},
                rest.take(pa.array(indexes)),
            )
            for key, indexes in groups.items()
        ]

    def _commit(self, transaction: Handle, *, recovering: bool) -> None:
        # Step 1
        files = transaction["files"]
        if not files:
            return
        delta = _deltalake()
        app_id, checkpoint = transaction["app_id"], transaction["checkpoint"]
        # Step 2
        table = self._load_table()
        if table is None:
            table = self._create_table(_schema_of(transaction))
        else:  # files written before the table existed follow the rows, maybe not the table
            self._check_table(table, _schema_of(transaction))
        # Step 3
        version = table.transaction_version(app_id)
        if version is not None and version >= checkpoint:
            if recovering:
                return
            raise SinkError(
                f"{self._sink_name()}: the table already holds checkpoint {version} of "
                f"'{app_id}', at or above this commit's checkpoint {checkpoint}: another run "
                "with this job name, sink uid and checkpoint lineage wrote it (two runs "
                "sharing one checkpoint folder?); give this run its own job name or sink uid"
            )
        if recovering:
            self._check_files_exist(transaction)
        # Step 4
        actions = [
            delta.transaction.AddAction(
                f["path"],
                f["size"],
                f["partition_values"],
                f["modification_time"],
                True,
                f["stats"],
            )
            for f in files
        ]
        properties = delta.CommitProperties(
            custom_metadata={"barrierflow": {"app_id": app_id, "checkpoint": checkpoint}},
            max_commit_retries=MAX_COMMIT_RETRIES,
            app_transactions=[delta.Transaction(app_id, checkpoint)],
        )
        self._write_transaction(
            table, actions, properties, f"commit checkpoint {checkpoint} of '{app_id}'"
        )

    def _write_transaction(
        self, table: Any, actions: list[Any], properties: Any, what: str
    ) -> None:
        """One Delta commit of `actions` (adds or removes); a SinkError "cannot `what`"."""
        try:
            table.create_write_transaction(
                actions,
                "append",
                table.schema(),
                partition_by=list(table.metadata().partition_columns) or None,
                commit_properties=properties,
            )
        except Exception as error:
            raise SinkError(f"{self._sink_name()}: cannot {what}: {error}") from None

    def _check_files_exist(self, transaction: Handle) -> None:
        from pyarrow import fs as pafs

        filesystem = self._fs()
        for entry in transaction["files"]:
            if filesystem.get_file_info(entry["path"]).type == pafs.FileType.NotFound:
                raise SinkError(
                    f"{self._sink_name()}: cannot commit checkpoint {transaction['checkpoint']} "
                    f"of '{transaction['app_id']}': its data file {entry['path']} is missing"
                )

    def _read(self, table: Any) -> Any:
        """The table's current rows as an Arrow table, read with pyarrow from its files."""
        import pyarrow as pa
        import pyarrow.dataset as ds

        schema = pa.schema(table.schema().to_arrow())
        root = table.table_uri.rstrip("/") + "/"
        paths = []
        for uri in table.file_uris():
            full = uri if "://" in uri else "file://" + uri
            paths.append(full[len(root) :] if full.startswith(root) else uri)
        if not paths:
            return schema.empty_table()
        partitions = list(table.metadata().partition_columns)
        dataset = ds.dataset(
            paths,
            schema=schema,
            filesystem=self._fs(),
            format="parquet",
            partitioning=ds.partitioning(
                pa.schema([schema.field(c) for c in partitions]), flavor="hive"
            )
            if partitions
            else None,
        )
        return dataset.to_table()


# ---- helpers -------------------------------------------------------------------------------


def _deltalake() -> Any:
    """The `deltalake` package, or a SinkError saying how to install it."""
    try:
        import deltalake
        import deltalake.transaction
    except ImportError:
        raise SinkError(
            "DeltaSink needs the deltalake package: pip install 'barrierflow[delta]'"
        ) from None
    return deltalake


def _column(data: Any, name: str) -> list[Any]:
    """A column of an Arrow table (pyarrow, or what `deltalake` returns) as a list."""
    import pyarrow as pa

    return pa.table(data).column(name).to_pylist()


def _table_uri(path: str) -> str:
    if "://" not in path:
        return os.path.abspath(os.path.expanduser(path))
    if path.startswith("file://"):
        return path[len("file://") :]
    return path


def _is_local(uri: str) -> bool:
    return "://" not in uri


def _normalised(delta: Any, schema: Any) -> Any:
    """`schema` as the table will hold it (Arrow types Delta has: uint64 -> int64, ...)."""
    import pyarrow as pa

    try:
        return pa.schema(delta.Schema.from_arrow(schema).to_arrow())
    except Exception as error:
        raise SinkError(f"DeltaSink: the schema does not map to Delta types: {error}") from None


def _check_same_fields(expected: Any, actual: Any, sink_name: str) -> None:
    for field in expected:
        if field.name not in actual.names:
            raise SinkError(f"{sink_name}: the table has no field '{field.name}'")
        other = actual.field(field.name)
        if other.type != field.type:
            raise SinkError(
                f"{sink_name}: field '{field.name}' is {other.type} in the table, "
                f"{field.type} in the sink's schema"
            )
    for name in actual.names:
        if name not in expected.names:
            raise SinkError(f"{sink_name}: the table's field '{name}' is not in the sink's schema")


def _dead_letter_schema() -> Any:
    """The dead-letter table's columns: the sink's uid, the rejected row as JSON text (values
    JSON cannot hold as their repr), why it does not fit, and when it was rejected."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("sink", pa.string(), nullable=False),
            pa.field("row", pa.string()),
            pa.field("error", pa.string(), nullable=False),
            pa.field("failed_at", pa.timestamp("us", tz="UTC"), nullable=False),
        ]
    )


def _schema_of(transaction: Handle) -> Any:
    import pyarrow as pa

    return pa.ipc.read_schema(pa.py_buffer(transaction["schema"]))


def _check_handle(transaction: Any, sink_name: str) -> None:
    if not isinstance(transaction, dict) or transaction.get("v") != HANDLE_VERSION:
        raise SinkError(
            f"{sink_name}: unknown transaction handle {transaction!r:.80} "
            f"(expected version {HANDLE_VERSION})"
        )


def _stats(part: Any) -> str:
    """Delta file statistics: row count, null counts and integer min/max (for data skipping)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    null_count: dict[str, int] = {}
    minimum: dict[str, int] = {}
    maximum: dict[str, int] = {}
    for field, column in zip(part.schema, part.columns, strict=True):
        if pa.types.is_nested(field.type):
            continue
        null_count[field.name] = column.null_count
        if pa.types.is_integer(field.type) and column.null_count < len(column):
            bounds = pc.min_max(column)
            minimum[field.name] = bounds["min"].as_py()
            maximum[field.name] = bounds["max"].as_py()
    return json.dumps(
        {
            "numRecords": part.num_rows,
            "minValues": minimum,
            "maxValues": maximum,
            "nullCount": null_count,
        }
    )


def _partition_value(value: Any) -> str | None:
    """A partition value as the Delta log spells it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    return str(value)


def _partition_folder(column: str, value: str | None) -> str:
    """`column=value` with the value escaped for a path (null as Hive's default partition)."""
    if value is None:
        return f"{column}={NULL_PARTITION}"
    return f"{column}={urllib.parse.quote(value, safe='')}"


_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")

_SWEPT_REST = re.compile(r"(\d+)\.(\d+)\.[A-Za-z0-9_-]+\.parquet")
"""What follows `_swept_prefix` in a data file's name: subtask, after, the rest."""


def _swept_prefix(context: SinkContext) -> str:
    """The start of the names of this sink's data files in this lineage and job:
    `part-<uid>.<lineage>.<job digest>.` (the dots appear in no `_name_part`, so no other
    sink's, lineage's or job's names start alike; the job name is in the app id too)."""
    job = hashlib.sha256(context.job_name.encode()).hexdigest()[:8]
    return f"part-{_name_part(context.operator_uid)}.{context.lineage}.{job}."


def _swept_name(name: str, prefix: str) -> tuple[int, int] | None:
    """(subtask, after) of a data file named with `prefix`, None for any other name.

    >>> _swept_name("part-out.00aa.1b2c3d4e.3.17.run1-0-00000002-00000-ab12cd34.parquet",
    ...             "part-out.00aa.1b2c3d4e.")
    (3, 17)
    >>> _swept_name("part-out-run1-0-00000002-00000-ab12cd34.parquet", "part-out.00aa.1b2c3d4e.")
    """
    if not name.startswith(prefix):
        return None
    found = _SWEPT_REST.fullmatch(name, len(prefix))
    return None if found is None else (int(found[1]), int(found[2]))


def _name_part(text: str) -> str:
    """`text` made safe for a file name; a digest keeps altered or long names distinct."""
    safe = _UNSAFE.sub("_", text)
    if safe == text and len(text) <= 64:
        return text
    return f"{safe[:48]}_{hashlib.sha256(text.encode()).hexdigest()[:10]}"
