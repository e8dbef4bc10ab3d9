"""IcebergSink: rows into an Iceberg table exactly once, one snapshot per checkpoint.

Writers: every subtask buffers its rows between two barriers as Arrow data; at the barrier
(`pre_commit`) it writes them as Parquet data files of the table (partitioned as the table
is, through PyIceberg's writer) and hands them to the committer in an Iceberg manifest
under the table's metadata folder (`_staging.py`); in upsert mode it hands over its rows
as one Parquet file instead. Nothing is visible yet.

Committer: subtask 0 of the sink commits for all subtasks (parallelism 1 in effect, as
Flink's IcebergFilesCommitter): when a checkpoint completes, it lists the hand-offs of its
deployment up to that checkpoint and makes ONE Iceberg snapshot of them (a fast append,
or PyIceberg's copy-on-write upsert on the table's identifier fields), its summary
carrying job, sink, lineage, deployment and checkpoint. A checkpoint completes only once
every subtask stored its state, so every subtask's hand-off of it is written by then.

Recovery: the history of the table (`committed_floors`) says which hand-offs were
committed; a repeated commit skips them. The restore's subtask 0 deletes every other
deployment's hand-offs, in every lineage of the job's sink: the data files of those never
committed, then the folders.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import itertools
import json
import uuid
from collections.abc import Mapping
from typing import Any

from barrierflow.connectors.base import Sink, SinkContext
from barrierflow.connectors.iceberg import _staging as staging
from barrierflow.connectors.iceberg._catalog import (
    Misfit,
    check_columns,
    check_partitioning,
    connect,
    convert_rows,
    dead_letter_schema,
    load_table,
    pyiceberg,
    required,
    warehouse_catalog,
)
from barrierflow.connectors.placement import placement
from barrierflow.connectors.two_phase_commit import TwoPhaseCommitSink
from barrierflow.errors import ConfigurationError, SinkError

__all__ = ["COMMIT_RETRIES", "HANDLE_VERSION", "IcebergSink"]

HANDLE_VERSION = 1
"""Format version of a transaction handle: {"v", "name", "lineage", "deployment", "subtask",
"checkpoint"} (checkpoint None while open)."""

COMMIT_RETRIES = 20
"""How often a commit is tried again when another writer committed to the table first."""

Handle = dict[str, Any]


class IcebergSink(TwoPhaseCommitSink[Handle]):
    """Appends (or upserts) dict rows to an Iceberg table, one snapshot per checkpoint.

    >>> import pathlib, tempfile
    >>> from barrierflow.connectors.base import SinkContext
    >>> import pyarrow as pa
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> sink = IcebergSink.for_warehouse("db.words", folder).with_schema(
    ...     pa.schema([("word", pa.string()), ("n", pa.int64())]))
    >>> sink.prepare()  # on the driver: creates the table
    >>> writer = sink.create_writer(SinkContext("out", 0, 1, 0, "run-0", job_name="demo"))
    >>> writer.restore([])
    >>> writer.write_batch([{"word": "apple", "n": 1}, {"word": "pear", "n": 2}])
    >>> writer.pre_commit(1)
    >>> sink.committed_output()  # files written, no snapshot yet
    []
    >>> writer.commit(1)
    >>> sorted(row["word"] for row in sink.committed_output())
    ['apple', 'pear']
    """

    def __init__(
        self,
        table: str,
        catalog_properties: Mapping[str, str],
        *,
        catalog_name: str = "default",
    ) -> None:
        if not isinstance(table, str) or "." not in table.strip("."):
            raise ConfigurationError(
                f"IcebergSink needs a table as 'namespace.name', got {table!r}"
            )
        if not isinstance(catalog_properties, Mapping):
            raise ConfigurationError(
                "IcebergSink needs catalog properties as a dict (what "
                f"pyiceberg.catalog.load_catalog takes), got {catalog_properties!r:.80}"
            )
        self.named_table = table
        self.table = Sink.output_table(table)
        """The table written: `named_table`, or under `barrierflow chaos` the run's own."""
        self.keeps_run_tables = placement().keeps_tables
        self.catalog_properties = {str(k): str(v) for k, v in catalog_properties.items()}
        self.catalog_name = catalog_name
        self.schema: Any = None
        self.partition_columns: list[str] = []
        self.identifier_fields: list[str] = []
        self.dead_letter_table: str | None = None
        self.named_dead_letter_table: str | None = None
        self._reset_live_state()

    # ---- configuration ---------------------------------------------------------------------

    @classmethod
    def for_table(
        cls, table: str, catalog_properties: Mapping[str, str], catalog_name: str = "default"
    ) -> IcebergSink:
        """A sink into `table` ("namespace.name") of the catalog `catalog_properties`
        describe, as `pyiceberg.catalog.load_catalog(catalog_name, **catalog_properties)`
        takes them (`{"type": "sql", "uri": "sqlite:///...", "warehouse": "file:///..."}`,
        or a REST, Hive or Glue catalog's properties)."""
        return cls(table, catalog_properties, catalog_name=catalog_name)

    @classmethod
    def for_warehouse(cls, table: str, folder: Any) -> IcebergSink:
        """The laptop form: the embedded SQL catalog (SQLite) in `folder`, table files there."""
        return cls(table, warehouse_catalog(folder))

    def with_schema(
        self, schema: Any, *, identifier_fields: tuple[str, ...] | list[str] = ()
    ) -> IcebergSink:
        """The same sink creating a missing table with `schema` (a `pyarrow.Schema` or a
        PyIceberg `Schema`) before the job starts, and checking an existing table has each
        of its columns with the same type. `identifier_fields` make a created table keyed,
        so the sink upserts."""
        configured = self._copy()
        configured.schema = schema
        configured.identifier_fields = list(identifier_fields)
        return configured

    def partition_by(self, *columns: str) -> IcebergSink:
        """The same sink creating a missing table partitioned by `columns` (identity)."""
        configured = self._copy()
        configured.partition_columns = list(columns)
        return configured

    def with_dead_letter_table(self, table: str) -> IcebergSink:
        """The same sink writing rows that do not fit the table into the Iceberg table
        `table` of the same catalog (created if missing: `sink`, `row` as JSON, `error`,
        `failed_at`), committed by the same committer under the same checkpoint, instead of
        failing the job."""
        configured = self._copy()
        configured.dead_letter_table = Sink.output_table(table)
        configured.named_dead_letter_table = table
        return configured

    def _copy(self) -> IcebergSink:
        configured = copy.copy(self)
        configured._reset_live_state()
        return configured

    def _reset_live_state(self) -> None:
        self._context: SinkContext | None = None
        self._catalog: Any = None
        self._table: Any = None
        self._dead: Any = None
        self._arrow: Any = None
        self._keys: list[str] = []
        self._root = ""
        self._sequence = 0
        self._buffers: dict[str, list[Any]] = {}
        self._dead_rows: dict[str, list[dict[str, Any]]] = {}
        self._floors: dict[str, dict[str, dict[str, int]]] = {}
        """Lineage -> "table" | "dead" -> deployment -> highest checkpoint committed."""

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in ("_catalog", "_table", "_dead"):
            state[name] = None
        state["_floors"] = {}
        state["_buffers"], state["_dead_rows"] = {}, {}
        return state

    # ---- driver side -----------------------------------------------------------------------

    def prepare(self) -> None:
        """Fail fast on the driver: the catalog opens, the table exists (or is created from
        the configured schema), and the configured schema's columns are the table's."""
        catalog = connect(self.catalog_properties, self.catalog_name, SinkError)
        namespace = self.table.rsplit(".", 1)[0]
        # a catalog that refuses namespaces: loading the table says more
        with contextlib.suppress(Exception):
            catalog.create_namespace_if_not_exists(namespace)
        if self.table != self.named_table:
            self._create_run_table(catalog)
        if not catalog.table_exists(self.table) and self.schema is not None:
            self._create_table(catalog, self.table, self.schema, self.identifier_fields)
        table = load_table(catalog, self.table, SinkError)
        if self.schema is not None:
            check_columns(self._iceberg_schema(self.schema), table, self._name())
        check_partitioning(table, self._name())
        dead = self.dead_letter_table
        if dead is not None and dead != self.named_dead_letter_table and not self.keeps_run_tables:
            with contextlib.suppress(Exception):  # a chaos run's own: a new run starts empty
                catalog.drop_table(dead)
        if dead is not None and not catalog.table_exists(dead):
            self._create_table(catalog, dead, dead_letter_schema(), [], ())

    def _create_run_table(self, catalog: Any) -> None:
        """Under `barrierflow chaos`: the run's own table, empty, like the named one."""
        if catalog.table_exists(self.table):
            if self.keeps_run_tables:
                return
            catalog.drop_table(self.table)
        like = (
            load_table(catalog, self.named_table, SinkError)
            if catalog.table_exists(self.named_table)
            else None
        )
        if like is not None:
            catalog.create_table(self.table, like.schema(), partition_spec=like.spec())

    def _create_table(
        self,
        catalog: Any,
        name: str,
        schema: Any,
        identifier_fields: list[str],
        partition_columns: tuple[str, ...] | list[str] | None = None,
    ) -> None:
        from pyiceberg.partitioning import PartitionField, PartitionSpec
        from pyiceberg.transforms import IdentityTransform

        iceberg = self._iceberg_schema(schema)
        if identifier_fields:
            ids = []
            for column in identifier_fields:
                field = iceberg.find_field(column) if column in iceberg.column_names else None
                if field is None:
                    raise SinkError(f"{self._name()}: identifier field '{column}' is not a column")
                ids.append(field.field_id)
            iceberg = required(iceberg, ids)
        columns = self.partition_columns if partition_columns is None else partition_columns
        fields = []
        for index, column in enumerate(columns):
            if column not in iceberg.column_names:
                raise SinkError(f"{self._name()}: partition column '{column}' is not a column")
            source = iceberg.find_field(column).field_id
            fields.append(PartitionField(source, 1000 + index, IdentityTransform(), column))
        try:
            catalog.create_table(name, iceberg, partition_spec=PartitionSpec(*fields))
        except Exception as problem:
            if not catalog.table_exists(name):
                raise SinkError(f"{self._name()}: cannot create {name!r}: {problem}") from None

    @staticmethod
    def _iceberg_schema(schema: Any) -> Any:
        from pyiceberg.schema import Schema

        if isinstance(schema, Schema):
            return schema
        from pyiceberg.io.pyarrow import _ConvertToIcebergWithoutIDs, visit_pyarrow
        from pyiceberg.schema import assign_fresh_schema_ids

        return assign_fresh_schema_ids(visit_pyarrow(schema, _ConvertToIcebergWithoutIDs()))

    def storage_locations(self) -> list[str]:
        warehouse = self.catalog_properties.get("warehouse", "")
        return [warehouse] if warehouse.startswith("file://") else []

    def survives_fallback(self) -> bool:
        """Upserts: writing the same rows again ends the same. Appends cannot be taken back."""
        return bool(self.identifier_fields) or self._keys_of_table()

    def _keys_of_table(self) -> bool:
        try:
            catalog = connect(self.catalog_properties, self.catalog_name, SinkError)
            return bool(load_table(catalog, self.table, SinkError).schema().identifier_field_ids)
        except SinkError:
            return False

    def describe(self) -> str:
        return f"IcebergSink (table {self.table})"

    def committed_output(self) -> list[Any]:
        """Every row the table holds now (read on the driver after the job)."""
        catalog = connect(self.catalog_properties, self.catalog_name, SinkError)
        if not catalog.table_exists(self.table):
            return []
        return catalog.load_table(self.table).scan().to_arrow().to_pylist()

    # ---- transaction steps (every subtask) ---------------------------------------------------

    def open(self, context: SinkContext) -> None:
        pyiceberg(SinkError)
        self._reset_live_state()
        self._context = context
        self._catalog = connect(self.catalog_properties, self.catalog_name, SinkError)
        self._table = load_table(self._catalog, self.table, SinkError)
        schema = self._table.schema()
        self._arrow = schema.as_arrow()
        self._keys = [schema.find_column_name(i) for i in schema.identifier_field_ids]
        self._root = staging.staging_root(self._table, context, context.lineage)
        if self.dead_letter_table is not None:
            self._dead = load_table(self._catalog, self.dead_letter_table, SinkError)

    def begin_transaction(self) -> Handle:
        context = self._require_context()
        name = f"{self._sequence}"
        self._sequence += 1
        self._buffers[name], self._dead_rows[name] = [], []
        return {
            "v": HANDLE_VERSION,
            "name": name,
            "lineage": context.lineage,
            "deployment": context.deployment_id,
            "subtask": context.subtask_index,
            "checkpoint": None,
        }

    def write(self, transaction: Handle, records: list[Any]) -> None:
        buffer = self._buffers.setdefault(transaction["name"], [])
        rest = records
        while rest:
            try:
                buffer.append(convert_rows(rest, self._arrow))
                return
            except Misfit as misfit:
                row = rest[misfit.index]
                if self._dead is None:
                    raise SinkError(
                        f"{self._name()}: row {misfit.index} of the batch does not fit the "
                        f"table: {misfit.why}: {row!r:.200}"
                    ) from None
                if misfit.index:  # the rows before it may hold misfits of other kinds
                    self.write(transaction, rest[: misfit.index])
                self._dead_rows.setdefault(transaction["name"], []).append(
                    self._dead_letter(row, misfit.why)
                )
                rest = rest[misfit.index + 1 :]

    def write_arrow(self, transaction: Handle, data: Any) -> None:
        import pyarrow as pa

        try:
            table = pa.Table.from_batches([data]).select(self._arrow.names).cast(self._arrow)
        except (pa.ArrowException, KeyError, ValueError):
            self.write(transaction, data.to_pylist())
            return
        self._buffers.setdefault(transaction["name"], []).append(table)

    def pre_commit(self, transaction: Handle, checkpoint_id: int) -> Handle:
        import pyarrow as pa

        table, context = self._table, self._require_context()
        folder = f"{self._root}/{transaction['deployment']}/ck-{checkpoint_id:012d}"
        subtask = transaction["subtask"]
        parts = self._buffers.pop(transaction["name"], [])
        try:
            if parts and sum(p.num_rows for p in parts):
                data = pa.concat_tables(parts)
                if self._keys:  # upsert: the committer merges every subtask's rows
                    _write_parquet(table, f"{folder}/{subtask}.parquet", data)
                else:
                    files = _data_files(table, data)
                    staging.write_manifest(table, f"{folder}/{subtask}.avro", files)
            dead = self._dead_rows.pop(transaction["name"], [])
            if dead:
                dead_table = pa.Table.from_pylist(dead, schema=self._dead.schema().as_arrow())
                files = _data_files(self._dead, dead_table)
                staging.write_manifest(self._dead, f"{folder}/{subtask}.dead.avro", files)
        except SinkError:
            raise
        except Exception as problem:
            raise SinkError(
                f"{self._name()}: cannot write the files of checkpoint {checkpoint_id} "
                f"(subtask {context.subtask_index}): {problem}"
            ) from None
        return {**transaction, "checkpoint": checkpoint_id}

    def abort(self, transaction: Handle) -> None:
        """An open transaction: drop its rows. A pre-committed one is left to the sweep."""
        self._buffers.pop(transaction["name"], None)
        self._dead_rows.pop(transaction["name"], None)

    def handle_from_state(self, state: Any) -> Handle:
        if not isinstance(state, dict) or state.get("v") != HANDLE_VERSION:
            raise SinkError(f"{self._name()}: unknown transaction handle {state!r:.80}")
        return state

    # ---- the committer (subtask 0) -----------------------------------------------------------

    def commit(self, transaction: Handle) -> None:
        """Subtask 0 commits every subtask's hand-offs up to this checkpoint; the others'
        commits do nothing (their files are in subtask 0's snapshot)."""
        if transaction["subtask"] != 0 or transaction["checkpoint"] is None:
            return
        for attempt in itertools.count():
            try:
                self._commit_upto(
                    transaction.get("lineage", self._require_context().lineage),
                    transaction["deployment"],
                    transaction["checkpoint"],
                )
                return
            except _Conflict:
                self._floors = {}
                self._table = self._catalog.load_table(self.table)
                if self._dead is not None:
                    self._dead = self._catalog.load_table(self.dead_letter_table)
                if attempt >= COMMIT_RETRIES:
                    raise SinkError(
                        f"{self._name()}: checkpoint {transaction['checkpoint']} lost the race "
                        f"to commit {COMMIT_RETRIES} times: other writers commit too often"
                    ) from None

    def finish_recovery(self) -> None:
        """Subtask 0 deletes every other deployment's hand-offs, in every lineage of this
        job's sink, and first the data files of those never committed: the restored
        checkpoints are committed by now, so nothing will commit the rest (another lineage's
        are an abandoned run's: a restore from an older checkpoint or savepoint, or a
        savepoint restored elsewhere). Committed ones are known by the table's history of
        their own lineage, so no file of a snapshot is ever deleted."""
        context = self._require_context()
        if context.subtask_index != 0:
            return
        table = self._table
        self._floors = {}
        for lineage, root in staging.list_lineages(table, context):
            ours = lineage == context.lineage
            for deployment in staging.list_deployments(table, root):
                if ours and deployment == context.deployment_id:
                    continue
                self._sweep(lineage, root, deployment)
            if not ours:
                staging.delete_tree(table, root)

    def _sweep(self, lineage: str, root: str, deployment: str) -> None:
        """Delete the data files of `deployment`'s hand-offs above what it committed, then
        its hand-offs."""
        table = self._table
        floors = self._floors_now(lineage)
        for checkpoint, folder in staging.list_checkpoints(table, root, deployment):
            for name in staging.files_in(table, folder):
                dead = name.endswith(".dead.avro")
                target = self._dead if dead else table
                if target is None or not name.endswith(".avro"):
                    continue
                if checkpoint > floors["dead" if dead else "table"].get(deployment, -1):
                    for data_file in staging.read_manifest(target, f"{folder}/{name}"):
                        target.io.delete(data_file.file_path)
        staging.delete_tree(table, f"{root}/{deployment}")

    def _floors_now(self, lineage: str) -> dict[str, dict[str, int]]:
        context = self._require_context()
        if lineage not in self._floors:
            dead = self._dead
            self._floors[lineage] = {
                "table": staging.committed_floors(self._table, context, lineage),
                "dead": {} if dead is None else staging.committed_floors(dead, context, lineage),
            }
        return self._floors[lineage]

    def _commit_upto(self, lineage: str, deployment: str, checkpoint: int) -> None:
        table, context = self._table, self._require_context()
        root = staging.staging_root(table, context, lineage)
        folders = [
            (k, f) for k, f in staging.list_checkpoints(table, root, deployment) if k <= checkpoint
        ]
        if not folders:
            return
        floors = self._floors_now(lineage)
        props = staging.summary_properties(context, lineage, deployment, checkpoint)
        if self._dead is not None:
            todo = [f for k, f in folders if k > floors["dead"].get(deployment, -1)]
            files = self._handed_over(self._dead, todo, ".dead.avro")
            if files:
                _append(self._dead, files, props)
            floors["dead"][deployment] = checkpoint
        todo = [f for k, f in folders if k > floors["table"].get(deployment, -1)]
        if self._keys:
            rows = self._upsert_rows(todo)
            if rows is not None:
                _upsert(table, rows, self._keys, props)
        else:
            files = self._handed_over(table, todo, ".avro")
            if files:
                _append(table, files, props)
        floors["table"][deployment] = checkpoint
        self._table = self._catalog.load_table(self.table)
        for _, folder in folders:
            staging.delete_tree(table, folder)

    def _handed_over(self, table: Any, folders: list[str], suffix: str) -> list[Any]:
        files = []
        for folder in folders:
            for name in staging.files_in(self._table, folder):
                if name.endswith(suffix) and (suffix != ".avro" or not name.endswith(".dead.avro")):
                    files.extend(staging.read_manifest(table, f"{folder}/{name}"))
        return files

    def _upsert_rows(self, folders: list[str]) -> Any:
        """Every subtask's rows of `folders`, oldest first, the last row of each key kept."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        parts = []
        for folder in folders:
            for name in sorted(
                (n for n in staging.files_in(self._table, folder) if n.endswith(".parquet")),
                key=lambda n: int(n.split(".")[0]),
            ):
                with self._table.io.new_input(f"{folder}/{name}").open() as stream:
                    parts.append(pq.read_table(stream))
        if not parts:
            return None
        data = pa.concat_tables(parts).cast(self._arrow)
        keys = list(zip(*(data.column(k).to_pylist() for k in self._keys), strict=True))
        last = {key: index for index, key in enumerate(keys)}
        return data.take(pa.array(sorted(last.values()), pa.int64()))

    # ---- helpers -----------------------------------------------------------------------------

    def _dead_letter(self, row: Any, why: str) -> dict[str, Any]:
        context = self._require_context()
        millis = context.clock.epoch_millis()
        return {
            "sink": context.operator_uid,
            "row": json.dumps(row, default=repr),
            "error": why,
            "failed_at": datetime.datetime.fromtimestamp(millis / 1000, datetime.UTC),
        }

    def _require_context(self) -> SinkContext:
        if self._context is None:
            raise SinkError(f"{self._name()}: used before open()")
        return self._context

    def _name(self) -> str:
        uid = self._context.operator_uid if self._context else None
        return f"IcebergSink {uid!r} (table {self.table})" if uid else f"IcebergSink ({self.table})"


class _Conflict(Exception):
    """Another writer committed first: reload and try again."""


def _data_files(table: Any, data: Any) -> list[Any]:
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    return list(_dataframe_to_data_files(table.metadata, data, table.io, write_uuid=uuid.uuid4()))


def _write_parquet(table: Any, path: str, data: Any) -> None:
    import pyarrow.parquet as pq

    with table.io.new_output(path).create(overwrite=True) as stream:
        pq.write_table(data, stream)


def _append(table: Any, files: list[Any], props: dict[str, str]) -> None:
    from pyiceberg.exceptions import CommitFailedException

    try:
        with (
            table.transaction() as transaction,
            transaction.update_snapshot(snapshot_properties=props).fast_append() as append,
        ):
            for data_file in files:
                append.append_data_file(data_file)
    except CommitFailedException:
        raise _Conflict() from None


def _upsert(table: Any, rows: Any, keys: list[str], props: dict[str, str]) -> None:
    from pyiceberg.exceptions import CommitFailedException

    try:
        with table.transaction() as transaction:
            transaction.upsert(rows, join_cols=keys, snapshot_properties=props)
    except CommitFailedException:
        raise _Conflict() from None
