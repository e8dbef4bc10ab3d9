"""PostgresSink: rows into a PostgreSQL table exactly once, one prepared transaction per checkpoint.

Each subtask writes the rows of one checkpoint interval in one database transaction and
turns it into a prepared transaction (`PREPARE TRANSACTION '<gid>'`) at the checkpoint
barrier: durable on the server, invisible to readers. `COMMIT PREPARED` publishes it once
the checkpoint is complete. The gid is a pure function of (job name, sink uid, lineage,
subtask, checkpoint id): (lineage, checkpoint id) never repeats, so no two runs prepare
the same gid. After a failure the restored checkpoint's pending transactions are
committed by their gids (the state lists them), and every other prepared transaction of
this job and sink that earlier attempts left in `pg_prepared_xacts` is rolled back by the
subtask that owns it (see `_sweep_leftovers`): no decision compares checkpoint ids.

psycopg 3 is imported when the sink first connects (`pip install 'barrierflow[postgres]'`).
`docs/connectors/postgres.md` is the user guide.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import pickle
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime
from datetime import time as time_of_day
from decimal import Decimal
from typing import Any
from uuid import UUID

from barrierflow.connectors.base import Sink, SinkContext
from barrierflow.connectors.placement import placement
from barrierflow.connectors.two_phase_commit import TwoPhaseCommitSink
from barrierflow.errors import (
    ConfigurationError,
    SinkError,
    SinkUnavailableError,
    StateRestoreError,
    TransactionBusyError,
)

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_LOCK_TIMEOUT_MS",
    "GID_PREFIX",
    "HANDLE_VERSION",
    "ROW_SHOWN_CHARS",
    "Column",
    "PostgresSink",
    "PostgresSinkBuilder",
    "PostgresTransaction",
    "TableShape",
    "gid_of",
    "gid_prefix",
    "owns_leftover",
    "parse_gid",
]

DEFAULT_BATCH_SIZE = 1000
"""Rows per statement (COPY or multi-row INSERT), and rows buffered before a flush."""

DEFAULT_LOCK_TIMEOUT_MS = 30_000
"""How long a write may wait for a row lock before the attempt fails (see `_LOCKS`)."""

DEFAULT_CONNECT_TIMEOUT_S = 10
GID_PREFIX = "bf"
_MAX_IDENTIFIER_BYTES = 63
"""PostgreSQL cuts longer names short (which could make two chaos runs share a table)."""
ROW_SHOWN_CHARS = 200
"""A rejected row is shown in errors up to this many characters."""

_ROW_ERROR_STATES = ("22", "23")
"""SQLSTATE classes of a row the table cannot take: data exception, integrity violation."""
_ROW_ERROR_CODES = ("42804", "42846", "42P18")
"""Type mismatches of one value: datatype mismatch, cannot coerce, indeterminate type."""
_BUSY_WAIT_S = 10.0
"""How long a prepared transaction may stay busy (another session finishing it) before the
attempt fails; meanwhile the writer tries again on later calls (`TransactionBusyError`)."""

HANDLE_VERSION = 2
"""Format of a stored `PostgresTransaction`: {"v": 2, "seq", "gid", "xid", "checkpoint",
"carry"}. Version 1 (no "v") is the loose dict of earlier releases, read as is."""

_LOCKS = (
    "a row is locked by another transaction, most likely a prepared transaction of a "
    "checkpoint that is not committed yet: with key columns, the stream into the sink should "
    "be keyed by them (`key_by`), so each key is written by one subtask"
)

_INTEGER_RANGES = {
    "smallint": (-(2**15), 2**15 - 1),
    "integer": (-(2**31), 2**31 - 1),
    "bigint": (-(2**63), 2**63 - 1),
}


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise ConfigurationError(
            "PostgresSink needs psycopg 3: pip install 'barrierflow[postgres]'"
        ) from None
    return psycopg


@dataclass(frozen=True)
class Column:
    """A column of the target table, as information_schema describes it."""

    name: str
    data_type: str
    nullable: bool
    has_default: bool
    max_length: int | None

    def problem_with(self, value: Any) -> str | None:
        """Why `value` cannot go into this column, or None when it looks fine. Cheap and
        conservative: types it does not know are left to the server."""
        if value is None:
            return None if self.nullable else f"column {self.name!r} may not be null"
        kind = self.data_type
        if kind in _INTEGER_RANGES:
            low, high = _INTEGER_RANGES[kind]
            if not isinstance(value, int) or isinstance(value, bool):
                return f"column {self.name!r} ({kind}) cannot take {type(value).__name__}"
            if not low <= value <= high:
                return f"{value} is out of range for column {self.name!r} ({kind})"
        elif kind in ("numeric", "real", "double precision"):
            if not isinstance(value, (int, float, Decimal)) or isinstance(value, bool):
                return f"column {self.name!r} ({kind}) cannot take {type(value).__name__}"
        elif kind == "boolean":
            if not isinstance(value, bool):
                return f"column {self.name!r} (boolean) cannot take {type(value).__name__}"
        elif kind in ("text", "character varying", "character"):
            if not isinstance(value, str):
                return f"column {self.name!r} ({kind}) cannot take {type(value).__name__}"
            if self.max_length is not None and len(value) > self.max_length:
                return f"{len(value)} characters are too long for column {self.name!r}"
        elif kind in ("json", "jsonb"):
            try:
                json.dumps(value)
            except (TypeError, ValueError) as error:
                return f"column {self.name!r} ({kind}) cannot take it: {error}"
        elif kind.startswith("timestamp") or kind == "date" or kind.startswith("time"):
            if not isinstance(value, (str, date, datetime, time_of_day)):
                return f"column {self.name!r} ({kind}) cannot take {type(value).__name__}"
        elif kind == "uuid":
            if not isinstance(value, (str, UUID)):
                return f"column {self.name!r} (uuid) cannot take {type(value).__name__}"
        elif kind == "bytea" and not isinstance(value, (bytes, bytearray, memoryview)):
            return f"column {self.name!r} (bytea) cannot take {type(value).__name__}"
        return None


@dataclass(frozen=True)
class TableShape:
    """What the sink learned about its table when it connected."""

    columns: dict[str, Column]

    def problem_with(self, row: Any, key_columns: Sequence[str]) -> str | None:
        """Why `row` does not fit the table, or None."""
        if not isinstance(row, Mapping):
            return f"a row must be a dict of column -> value, not {type(row).__name__}"
        unknown = [name for name in row if name not in self.columns]
        if unknown:
            return f"no column {unknown[0]!r} in the table"
        for key in key_columns:
            if row.get(key) is None:
                return f"key column {key!r} is missing or null"
        for column in self.columns.values():
            if column.name in row:
                problem = column.problem_with(row[column.name])
                if problem:
                    return problem
            elif not column.nullable and not column.has_default:
                return f"column {column.name!r} may not be null and has no default"
        return None


@dataclass(frozen=True)
class PostgresTransaction:
    """One checkpoint interval's transaction of one subtask: the handle the writer keeps and
    checkpoints store (`as_state` / `of_state`).

    >>> handle = PostgresTransaction(seq=3, gid="bf-1-0-7", xid=812, checkpoint=7)
    >>> PostgresTransaction.of_state(handle.as_state()) == handle
    True
    >>> PostgresTransaction.of_state({"seq": 3, "gid": None, "xid": None})  # version 1
    PostgresTransaction(seq=3, gid=None, xid=None, checkpoint=None, carry=None)
    """

    seq: int
    """Numbers the transactions of one sink object (which one is open)."""
    gid: str | None = None
    """The prepared transaction's id; None until `pre_commit`, or for an interval without
    rows (which prepares nothing)."""
    xid: int | None = None
    """The server's transaction id, recorded at pre-commit: tells a commit that already
    happened from a rollback (`pg_xact_status`)."""
    checkpoint: int | None = None
    """The checkpoint it was pre-committed for."""
    carry: bytes | None = None
    """Rows it could not send (their key was held by an uncommitted transaction), pickled:
    the next transaction takes them."""

    def as_state(self) -> dict[str, Any]:
        """The msgpack-able value a checkpoint stores."""
        return {
            "v": HANDLE_VERSION,
            "seq": self.seq,
            "gid": self.gid,
            "xid": self.xid,
            "checkpoint": self.checkpoint,
            "carry": self.carry,
        }

    @classmethod
    def of_state(cls, state: Any) -> PostgresTransaction:
        """A stored handle: this version's, or the dict of version 1 (no "v"; "checkpoint"
        and "carry" only when set). Anything else is a `StateRestoreError`."""
        if isinstance(state, PostgresTransaction):
            return state
        if not isinstance(state, Mapping) or state.get("v", 1) not in (1, HANDLE_VERSION):
            raise StateRestoreError(f"unknown PostgreSQL transaction handle {state!r:.80}")
        try:
            xid, checkpoint = state.get("xid"), state.get("checkpoint")
            return cls(
                seq=int(state["seq"]),
                gid=state.get("gid"),
                xid=None if xid is None else int(xid),
                checkpoint=None if checkpoint is None else int(checkpoint),
                carry=state.get("carry") or None,
            )
        except (KeyError, TypeError, ValueError) as error:
            raise StateRestoreError(
                f"malformed PostgreSQL transaction handle {state!r:.80}: {error}"
            ) from None


class PostgresSinkBuilder:
    """Collects the settings of a `PostgresSink`; `build()` checks them."""

    def __init__(self) -> None:
        self._dsn: str | None = None
        self._table: str | None = None
        self._key_columns: list[str] = []
        self._dead_letter_table: str | None = None
        self._batch_size = DEFAULT_BATCH_SIZE
        self._lock_timeout_ms = DEFAULT_LOCK_TIMEOUT_MS

    def set_dsn(self, dsn: str) -> PostgresSinkBuilder:
        """The libpq connection string or URI, e.g. `postgresql://user@host:5432/db`."""
        self._dsn = dsn
        return self

    def set_table(self, table: str) -> PostgresSinkBuilder:
        """The target table, optionally schema-qualified (`schema.table`)."""
        self._table = table
        return self

    def set_key_columns(self, key_columns: Sequence[str]) -> PostgresSinkBuilder:
        """Upsert on these columns (they need a unique index); none: plain inserts."""
        self._key_columns = list(key_columns)
        return self

    def set_dead_letter_table(self, table: str) -> PostgresSinkBuilder:
        """Divert rows that do not fit the table into `table` (created if missing) instead
        of failing the job; they are written in the same transaction, exactly once."""
        self._dead_letter_table = table
        return self

    def set_batch_size(self, rows: int) -> PostgresSinkBuilder:
        """Rows per statement and rows buffered before a flush."""
        self._batch_size = rows
        return self

    def set_lock_timeout_ms(self, milliseconds: int) -> PostgresSinkBuilder:
        """How long a write may wait for a row lock before the attempt fails."""
        self._lock_timeout_ms = milliseconds
        return self

    def build(self) -> PostgresSink:
        if not self._dsn:
            raise ConfigurationError("PostgresSink: set_dsn(...) is required")
        if not self._table:
            raise ConfigurationError("PostgresSink: set_table(...) is required")
        if self._batch_size < 1:
            raise ConfigurationError(f"PostgresSink: batch size {self._batch_size} < 1")
        if len(set(self._key_columns)) != len(self._key_columns):
            raise ConfigurationError(f"PostgresSink: duplicate key columns {self._key_columns}")
        return PostgresSink(
            self._dsn,
            self._table,
            key_columns=self._key_columns,
            dead_letter_table=self._dead_letter_table,
            batch_size=self._batch_size,
            lock_timeout_ms=self._lock_timeout_ms,
        )


class PostgresSink(TwoPhaseCommitSink[PostgresTransaction]):
    """Writes dict rows into a table exactly once: inserts, or upserts on key columns.

    Exactly-once because each subtask's rows of one checkpoint interval form one database
    transaction, prepared at the barrier and committed when that checkpoint completes;
    after a failure those the restored checkpoint lists as pending are committed and every
    other one earlier attempts left in `pg_prepared_xacts` is rolled back. A fallback past
    a damaged checkpoint cannot take back its committed rows: in insert mode it stops the
    job (`survives_fallback`), with key columns the upserts write the same rows again.
    Assumes the server allows prepared transactions (`max_prepared_transactions` > 0) and
    that job name and sink uid are stable across restarts (they name the transactions).
    With key columns, the input should be keyed by them: a key written by two subtasks can
    wait on the other's prepared transaction (the attempt then fails after the lock
    timeout). Rows are buffered in the task and sent every `batch_size` rows and at the
    barrier, except rows whose key this subtask's previous, not yet committed transaction
    holds: its commit arrives on this same thread, so they wait for the next transaction.

    Handles are `PostgresTransaction`s, completed by `pre_commit`: `gid` and `xid` name the
    prepared transaction (None for an interval without rows, which prepares nothing);
    `carry` holds rows it could not send yet. Checkpoints store them versioned; handles
    of earlier releases (plain dicts) still restore.

    A prepared transaction another session is finishing (a zombie of an earlier attempt)
    is "busy": the sink does not wait for it on the mailbox thread but raises
    `TransactionBusyError`, so the writer keeps it pending (and in the next checkpoints:
    a restore commits it, exactly once) and tries again on its next call; one busy for
    longer than 10 s by the `SinkContext.clock` fails the attempt.

    >>> sink = PostgresSink.builder().set_dsn("postgresql://localhost/db").set_table(
    ...     "counts").set_key_columns(["word"]).build()
    >>> sink.key_columns, sink.table
    (['word'], 'counts')
    >>> gid_of("job", "sink", 3, 17, "5f0c1e2d3a4b6c7d")
    'bf-0234b929dbf75f14bfd7-5f0c1e2d3a4b6c7d-3-17'
    """

    def __init__(
        self,
        dsn: str,
        table: str,
        *,
        key_columns: Sequence[str] = (),
        dead_letter_table: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        lock_timeout_ms: int = DEFAULT_LOCK_TIMEOUT_MS,
    ) -> None:
        self.dsn = dsn
        self.table = Sink.output_table(table)
        self.template_table = table if self.table != table else None
        """Under `barrierflow chaos`: the table the job names, of which `prepare` makes this
        run's own empty copy `self.table`; None otherwise."""
        self.keeps_run_tables = placement().keeps_tables
        """Under `barrierflow chaos`, in a new driver of a run whose driver was killed: what
        that driver committed belongs to the run, so `prepare` keeps the run's own tables."""
        self.key_columns = list(key_columns)
        self.dead_letter_table = dead_letter_table and Sink.output_table(dead_letter_table)
        self.batch_size = batch_size
        self.lock_timeout_ms = lock_timeout_ms
        self._reset_live_state()

    @staticmethod
    def builder() -> PostgresSinkBuilder:
        return PostgresSinkBuilder()

    def _reset_live_state(self) -> None:
        self._context: SinkContext | None = None
        self._data: Any = None
        """The connection the open transaction runs on (autocommit, explicit BEGIN)."""
        self._control: Any = None
        """An autocommit connection for COMMIT/ROLLBACK PREPARED, which cannot run while
        the data connection has a transaction open."""
        self._shape: TableShape | None = None
        self._next_seq = 0
        self._open_seq: int | None = None
        self._in_transaction = False
        self._rows: list[dict[str, Any]] = []
        self._by_key: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._dead: list[tuple[Any, str]] = []
        self._uncommitted: dict[str, set[tuple[Any, ...]]] = {}
        """Gids this sink prepared and has not committed yet, with the keys they hold."""
        self._carried: dict[int, list[dict[str, Any]]] = {}
        """Rows restored transactions carried, by checkpoint id (see `recover_and_commit`)."""
        self._recovered: set[int] = set()
        self._listed: set[str] = set()
        """Gids the restored state lists as pending: never leftovers, even while busy."""
        self._leftovers: set[str] = set()
        """Leftover gids to roll back that were busy when tried; tried again at each
        transaction boundary."""
        self._busy_since: dict[str, float] = {}
        """When each gid was first found busy (the clock's monotonic seconds)."""
        self._swept = False

    def __getstate__(self) -> dict[str, Any]:
        """Ship the settings only: connections stay in the process that opened them."""
        return {
            name: getattr(self, name)
            for name in (
                "dsn",
                "table",
                "template_table",
                "key_columns",
                "dead_letter_table",
                "batch_size",
                "lock_timeout_ms",
            )
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._reset_live_state()

    # ------------------------------------------------------------------ configuration

    def prepare(self) -> None:
        """On the driver: connect and check the server and the table (fail fast)."""
        connection = self._connect()
        try:
            if self.template_table is not None:
                self._create_run_tables(connection)
            self._check(connection)
            if self.dead_letter_table:
                self._create_dead_letter_table(connection)
        finally:
            connection.close()

    def committed_output(self) -> list[dict[str, Any]]:
        """Every row of the table, as dicts of column -> value, read on the driver (for
        `barrierflow chaos`): committed rows only, since prepared transactions are invisible.
        Under chaos each run has its own table, so the rows are this run's."""
        psycopg = _psycopg()
        connection = self._connect()
        try:
            with connection.cursor(row_factory=psycopg.rows.dict_row) as cursor:
                cursor.execute(psycopg.sql.SQL("SELECT * FROM {}").format(_identifier(self.table)))
                return cursor.fetchall()
        except psycopg.Error as error:
            raise SinkError(f"{self._name()}: cannot read the table: {_message(error)}") from None
        finally:
            connection.close()

    def _create_run_tables(self, connection: Any) -> None:
        """Under `barrierflow chaos`: this run's own empty copy of the table (columns,
        defaults, constraints and indexes, `LIKE ... INCLUDING ALL`), replacing one an earlier
        check left, and no dead-letter table of an earlier check."""
        if self.keeps_run_tables:  # a new driver of the same run: its table stays
            return
        psycopg = _psycopg()
        sql = psycopg.sql
        _, name = _split_table(self.table)
        if len(name.encode()) > _MAX_IDENTIFIER_BYTES:
            raise SinkError(
                f"{self._name()}: the chaos run's table name {name!r} is longer than "
                f"PostgreSQL's {_MAX_IDENTIFIER_BYTES} bytes: use a shorter table name"
            )
        try:
            with connection.transaction():  # all or nothing; a lock waited for fails in 10 s
                connection.execute("SET LOCAL lock_timeout = '10s'")
                for table in (self.table, self.dead_letter_table):
                    if table:
                        connection.execute(
                            sql.SQL("DROP TABLE IF EXISTS {}").format(_identifier(table))
                        )
                connection.execute(
                    sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING ALL)").format(
                        _identifier(self.table), _identifier(self.template_table)
                    )
                )
        except psycopg.Error as error:
            raise SinkError(
                f"{self._name()}: cannot make this chaos run's own copy of table "
                f"{self.template_table}: {_message(error)}"
            ) from None

    def open(self, context: SinkContext) -> None:
        """Connect, check the table and learn its columns; leftovers are decided in
        `finish_recovery`, after the restored transactions were committed.

        Starts from a clean slate: a roll-back in place opens this object again, and its
        leftovers (prepared for a checkpoint after the restored one) must be decided again."""
        self._close_connections()
        self._reset_live_state()
        self._context = context
        self._control = self._connect()
        self._shape = self._check(self._control)
        if self.dead_letter_table:
            self._create_dead_letter_table(self._control)

    def _name(self) -> str:
        if self._context is None:
            return f"PostgresSink({self.table})"
        return f"PostgresSink '{self._context.operator_uid}' (table {self.table})"

    def _where(self) -> str:
        info = _psycopg().conninfo.conninfo_to_dict(self.dsn)
        host = info.get("host") or info.get("hostaddr") or "localhost"
        return f"{host}:{info.get('port') or 5432}/{info.get('dbname') or info.get('user') or ''}"

    def _connect(self) -> Any:
        psycopg = _psycopg()
        try:
            return psycopg.connect(
                self.dsn, autocommit=True, connect_timeout=DEFAULT_CONNECT_TIMEOUT_S
            )
        except psycopg.Error as error:
            raise SinkUnavailableError(
                f"cannot connect to PostgreSQL at {self._where()}: {_message(error)}"
            ) from None

    def _check(self, connection: Any) -> TableShape:
        """The table's shape, or a SinkError saying which setting to fix."""
        psycopg = _psycopg()
        try:
            prepared = connection.execute("SHOW max_prepared_transactions").fetchone()[0]
            if int(prepared) <= 0:
                raise SinkError(
                    f"{self._name()}: the server at {self._where()} does not allow prepared "
                    "transactions: set max_prepared_transactions > 0 in postgresql.conf "
                    "(at least the sink's parallelism times 2) and restart it"
                )
            schema, table = _split_table(self.table)
            rows = connection.execute(
                "SELECT column_name, data_type, is_nullable, column_default IS NOT NULL "
                "OR is_identity = 'YES' OR is_generated = 'ALWAYS', character_maximum_length "
                "FROM information_schema.columns WHERE table_name = %s AND table_schema = "
                "COALESCE(%s, current_schema()) ORDER BY ordinal_position",
                (table, schema),
            ).fetchall()
            if not rows:
                raise SinkError(f"{self._name()}: table {self.table} does not exist")
            shape = TableShape(
                {
                    name: Column(name, kind, nullable == "YES", bool(default), length)
                    for name, kind, nullable, default, length in rows
                }
            )
            missing = [key for key in self.key_columns if key not in shape.columns]
            if missing:
                raise SinkError(
                    f"{self._name()}: key columns {missing} are not in the table "
                    f"(its columns: {list(shape.columns)})"
                )
            if self.key_columns and not self._has_unique_index(connection):
                raise SinkError(
                    f"{self._name()}: upserts need a primary key or unique index on exactly "
                    f"the key columns {self.key_columns}"
                )
            return shape
        except psycopg.Error as error:
            raise SinkError(f"{self._name()}: cannot read the table: {_message(error)}") from None

    def _has_unique_index(self, connection: Any) -> bool:
        indexes = connection.execute(
            "SELECT array_agg(a.attname::text) FROM pg_index i JOIN pg_attribute a "
            "ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
            "WHERE i.indrelid = %s::regclass AND i.indisunique AND i.indpred IS NULL "
            "GROUP BY i.indexrelid",
            (self.table,),
        ).fetchall()
        return any(set(columns) == set(self.key_columns) for (columns,) in indexes)

    def _create_dead_letter_table(self, connection: Any) -> None:
        psycopg = _psycopg()
        sql = psycopg.sql
        try:
            connection.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (sink text NOT NULL, row jsonb, "
                    "error text NOT NULL, failed_at timestamptz NOT NULL DEFAULT now())"
                ).format(_identifier(self.dead_letter_table))
            )
        except psycopg.errors.UniqueViolation:
            pass  # another subtask created it at the same moment
        except psycopg.Error as error:
            raise SinkError(
                f"{self._name()}: cannot create the dead-letter table "
                f"{self.dead_letter_table}: {_message(error)}"
            ) from None

    # ------------------------------------------------------------------ transactions

    def survives_fallback(self) -> bool:
        """With key columns: upserts of the replayed rows leave the table as a run without
        the abandoned checkpoints would. In insert mode committed rows cannot be taken back."""
        return bool(self.key_columns)

    def describe(self) -> str:
        mode = f"upserts on {self.key_columns}" if self.key_columns else "insert mode"
        return f"PostgresSink, table {self.table}, {mode}"

    def finish_recovery(self) -> None:
        """After the restored transactions were committed: roll back the leftovers this
        subtask owns (`_sweep_leftovers`), and take the rows the restored checkpoint's
        own transactions carried into the first new transaction."""
        self._sweep_leftovers()
        self._take_back_carried_rows()
        self._swept = True

    def handle_state(self, transaction: PostgresTransaction | None) -> Any:
        return None if transaction is None else transaction.as_state()

    def handle_from_state(self, state: Any) -> PostgresTransaction:
        return PostgresTransaction.of_state(state)

    def begin_transaction(self) -> PostgresTransaction:
        """A new handle; the server transaction starts with the first rows sent (an
        interval without rows costs nothing and prepares nothing)."""
        if not self._swept:  # used without TwoPhaseCommitWriter.restore
            self.finish_recovery()
        self._roll_back_leftovers()
        self._next_seq += 1
        self._open_seq = self._next_seq
        return PostgresTransaction(self._next_seq)

    def write(self, transaction: PostgresTransaction, records: list[Any]) -> None:
        """Check each row against the table and buffer it (the last row per key wins)."""
        assert self._shape is not None
        for row in records:
            problem = self._shape.problem_with(row, self.key_columns)
            if problem:
                self._reject(row, problem)
            elif self.key_columns:
                self._by_key[tuple(row[key] for key in self.key_columns)] = row
            else:
                self._rows.append(row)
        buffered = len(self._rows) + len(self._by_key) + len(self._dead)
        if buffered >= self.batch_size:
            self._flush()

    def pre_commit(
        self, transaction: PostgresTransaction, checkpoint_id: int
    ) -> PostgresTransaction:
        """Send what is buffered, then `PREPARE TRANSACTION`: durable, still invisible.

        With key columns, rows whose key an earlier transaction of this sink holds (it is
        prepared, its commit not yet arrived) cannot be written without waiting for that
        commit, which this thread delivers: they stay buffered for the next transaction and
        are carried in this handle (so in the checkpoint) until then."""
        self._roll_back_leftovers()
        sent = self._flush()
        held = list(self._by_key.values())
        transaction = replace(
            transaction, checkpoint=checkpoint_id, carry=pickle.dumps(held) if held else None
        )
        if not self._in_transaction:
            return transaction
        context = self._require_context()
        gid = gid_of(
            context.job_name,
            context.operator_uid,
            context.subtask_index,
            checkpoint_id,
            context.lineage,
        )
        try:
            xid = self._data.execute("SELECT pg_current_xact_id()::text").fetchone()[0]
            self._data.execute(_psycopg().sql.SQL("PREPARE TRANSACTION {}").format(gid))
        except _psycopg().Error as error:
            self._in_transaction = False
            raise self._lost("prepare the transaction", error) from None
        self._in_transaction = False
        self._uncommitted[gid] = sent
        return replace(transaction, gid=gid, xid=int(xid))

    def commit(self, transaction: PostgresTransaction) -> None:
        """`COMMIT PREPARED`. Idempotent: a gid that is no longer prepared was committed,
        which the transaction id recorded at pre-commit confirms (`pg_xact_status`); one
        that was rolled back instead is an error (its rows are lost). A busy one raises
        `TransactionBusyError` (the writer tries again later)."""
        gid = transaction.gid
        if gid is None:
            return
        self._finish_prepared("COMMIT", gid, transaction.xid)
        self._uncommitted.pop(gid, None)

    def recover_and_commit(self, transaction: PostgresTransaction) -> None:
        """Commit a transaction of the restored checkpoint; rows it carried (see
        `pre_commit`) go into the first new transaction if it is the restored checkpoint's
        own (an older one's carried rows are in a later transaction, decided on its own).
        Its gid is never taken for a leftover, also while it is busy."""
        if transaction.gid is not None:
            self._listed.add(transaction.gid)
        checkpoint_id = transaction.checkpoint
        if checkpoint_id is not None:
            self._recovered.add(checkpoint_id)
            if transaction.carry:
                self._carried.setdefault(checkpoint_id, []).extend(pickle.loads(transaction.carry))
        self.commit(transaction)

    def abort(self, transaction: PostgresTransaction) -> None:
        """ROLLBACK of the open transaction (and its buffered rows), or ROLLBACK PREPARED
        (busy: rolled back at a later transaction boundary)."""
        gid = transaction.gid
        if gid is not None:
            self._uncommitted.pop(gid, None)
            self._leftovers.add(gid)
            self._roll_back_leftovers()
            return
        if transaction.seq == self._open_seq:
            self._rows, self._by_key, self._dead = [], {}, []
            self._in_transaction = False
            self._close_connections()  # closing rolls back what the server has of it

    def close(self) -> None:
        self._close_connections()

    def _close_connections(self) -> None:
        for connection in (self._data, self._control):
            if connection is not None:
                with contextlib.suppress(Exception):  # closing a broken connection
                    connection.close()
        self._data = self._control = None

    # ------------------------------------------------------------------ recovery

    def _sweep_leftovers(self) -> None:
        """Roll back the prepared transactions of this job and sink that earlier attempts
        left and this subtask owns. Runs after `recover_and_commit` committed every gid the
        restored state lists, so what is still prepared is listed by no restored state:
        it belongs to a checkpoint that never completed (or one a fallback abandoned), of
        any run or lineage. A gid made by old subtask j is owned by subtask j mod
        parallelism: the one that received j's state at the restore (the rescaling rule of
        `SinkOperator.initialize_state`), so the subtask that rolls a gid back is the one
        that would have committed it were it listed. No checkpoint id is compared."""
        context = self._require_context()
        prefix = gid_prefix(context.job_name, context.operator_uid)
        try:
            gids = [
                gid
                for (gid,) in self._control_connection()
                .execute(
                    "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() "
                    "AND starts_with(gid, %s)",
                    (prefix,),
                )
                .fetchall()
            ]
        except _psycopg().Error as error:
            raise self._lost("list prepared transactions", error) from None
        self._leftovers.update(
            gid
            for gid in gids
            if gid not in self._listed
            and owns_leftover(gid, prefix, context.subtask_index, context.parallelism)
        )
        self._roll_back_leftovers()

    def _roll_back_leftovers(self) -> None:
        """ROLLBACK PREPARED of each leftover; a busy one stays for the next boundary."""
        for gid in sorted(self._leftovers):
            try:
                self._finish_prepared("ROLLBACK", gid, None)
            except TransactionBusyError:
                continue
            self._leftovers.discard(gid)

    def _finish_prepared(self, verb: str, gid: str, xid: int | None) -> None:
        """`COMMIT PREPARED` or `ROLLBACK PREPARED`, idempotent (see `commit`), tried once.

        A gid another session is finishing raises `TransactionBusyError`: the caller tries
        again on a later turn of the mailbox instead of sleeping on it (the other session's
        COMMIT or ROLLBACK PREPARED takes milliseconds). Busy for longer than `_BUSY_WAIT_S`
        by the injected clock, it is a `SinkError`."""
        psycopg = _psycopg()
        statement = psycopg.sql.SQL(verb + " PREPARED {}").format(gid)
        try:
            self._control_connection().execute(statement)
        except psycopg.errors.UndefinedObject:
            pass  # not prepared (any more): see below
        except psycopg.errors.ObjectNotInPrerequisiteState:  # another session is finishing it
            now = self._require_context().clock.monotonic()
            since = self._busy_since.setdefault(gid, now)
            if now - since > _BUSY_WAIT_S:
                raise SinkError(
                    f"{self._name()}: prepared transaction {gid} stays busy "
                    f"(another session has been finishing it for {now - since:.0f} s)"
                ) from None
            raise TransactionBusyError(
                f"{self._name()}: prepared transaction {gid} is busy"
            ) from None
        except psycopg.Error as error:
            raise self._lost(f"{verb.lower()} prepared transaction {gid}", error) from None
        else:
            self._busy_since.pop(gid, None)
            return
        self._busy_since.pop(gid, None)
        if verb == "COMMIT" and xid is not None and self._status_of(xid) == "aborted":
            raise SinkError(
                f"{self._name()}: transaction {gid} of a completed checkpoint was rolled back "
                "instead of committed (by hand, or by a fresh start of a job with the same "
                "name and sink uid): its rows are lost"
            )

    def _status_of(self, xid: int) -> str | None:
        """'committed', 'aborted', or None when the server no longer knows (too old)."""
        try:
            return (
                self._control_connection()
                .execute("SELECT pg_xact_status(%s::text::xid8)", (str(xid),))
                .fetchone()[0]
            )
        except _psycopg().Error:
            return None  # e.g. "in the future": another server than the one prepared on

    # ------------------------------------------------------------------ sending rows

    def _flush(self) -> set[tuple[Any, ...]]:
        """Send the buffered rows (and dead letters) into the open server transaction;
        return the keys sent. Rows whose key a prepared, uncommitted transaction of this
        sink holds stay buffered."""
        if self.key_columns:
            held = set().union(*self._uncommitted.values()) if self._uncommitted else set()
            sent_keys = {key for key in self._by_key if key not in held}
            rows = [self._by_key.pop(key) for key in sent_keys]
        else:
            sent_keys, rows, self._rows = set(), self._rows, []
        if not rows and not self._dead:
            return sent_keys
        self._begin_on_server()
        groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for row in rows:
            groups.setdefault(tuple(row), []).append(row)
        for columns, group in groups.items():
            for start in range(0, len(group), self.batch_size):
                self._send_batch(columns, group[start : start + self.batch_size])
        self._send_dead_letters()
        return sent_keys

    def _take_back_carried_rows(self) -> None:
        """After a restore: the rows the restored checkpoint's own transactions carried were
        in no committed transaction; they go first into the new one."""
        restored = self._require_context().restored_checkpoint_id
        if restored is None and self._recovered:
            restored = max(self._recovered)  # the runtime did not say: the newest restored
        for row in self._carried.pop(restored, []) if restored is not None else []:
            self._by_key[tuple(row[key] for key in self.key_columns)] = row
        self._carried.clear()

    def _begin_on_server(self) -> None:
        if self._in_transaction:
            return
        psycopg = _psycopg()
        try:
            if self._data is None or self._data.closed:
                self._data = self._connect()
            self._data.execute("BEGIN")
            self._data.execute(
                psycopg.sql.SQL("SET LOCAL lock_timeout = {}").format(int(self.lock_timeout_ms))
            )
        except psycopg.Error as error:
            raise self._lost("begin a transaction", error) from None
        self._in_transaction = True

    def _send_batch(self, columns: tuple[str, ...], rows: list[dict[str, Any]]) -> None:
        """One statement under a savepoint; if the server rejects it, row by row to find
        the rows it cannot take (so one bad row does not poison the transaction)."""
        psycopg = _psycopg()
        try:
            self._data.execute("SAVEPOINT bf_batch")
            try:
                self._execute(columns, rows)
            except psycopg.Error as error:
                if not _is_row_error(error):
                    raise
                self._data.execute("ROLLBACK TO SAVEPOINT bf_batch")
                for row in rows:
                    self._data.execute("SAVEPOINT bf_row")
                    try:
                        self._execute(columns, [row])
                    except psycopg.Error as row_error:
                        if not _is_row_error(row_error):
                            raise
                        self._data.execute("ROLLBACK TO SAVEPOINT bf_row")
                        self._reject(row, _message(row_error))
                    self._data.execute("RELEASE SAVEPOINT bf_row")
            self._data.execute("RELEASE SAVEPOINT bf_batch")
        except psycopg.errors.LockNotAvailable as error:
            raise SinkError(f"{self._name()}: {_LOCKS} ({_message(error)})") from None
        except psycopg.Error as error:
            raise self._lost("write rows", error) from None

    def _execute(self, columns: tuple[str, ...], rows: list[dict[str, Any]]) -> None:
        sql = _psycopg().sql
        table = _identifier(self.table)
        names = sql.SQL(", ").join(sql.Identifier(name) for name in columns)
        values = [tuple(self._adapt(name, row[name]) for name in columns) for row in rows]
        if not self.key_columns:
            with self._data.cursor() as cursor:
                statement = sql.SQL("COPY {} ({}) FROM STDIN").format(table, names)
                with cursor.copy(statement) as copy:
                    for value in values:
                        copy.write_row(value)
            return
        one_row = sql.SQL("({})").format(sql.SQL(", ").join(sql.Placeholder() * len(columns)))
        updates = [name for name in columns if name not in self.key_columns]
        conflict = sql.SQL(", ").join(sql.Identifier(key) for key in self.key_columns)
        action = (
            sql.SQL("DO UPDATE SET {}").format(
                sql.SQL(", ").join(
                    sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(name)) for name in updates
                )
            )
            if updates
            else sql.SQL("DO NOTHING")
        )
        statement = sql.SQL("INSERT INTO {} ({}) VALUES {} ON CONFLICT ({}) {}").format(
            table, names, sql.SQL(", ").join([one_row] * len(values)), conflict, action
        )
        self._data.execute(statement, [item for value in values for item in value])

    def _adapt(self, column: str, value: Any) -> Any:
        assert self._shape is not None
        if value is not None and self._shape.columns[column].data_type in ("json", "jsonb"):
            return _psycopg().types.json.Jsonb(value)
        return value

    def _reject(self, row: Any, problem: str) -> None:
        """A row the table cannot take: a dead letter, or (by default) a failed job."""
        if not self.dead_letter_table:
            raise SinkError(f"{self._name()}: a row does not fit: {problem}; row: {_shown(row)}")
        self._dead.append((row, problem))

    def _send_dead_letters(self) -> None:
        if not self._dead:
            return
        self._begin_on_server()
        psycopg = _psycopg()
        sql = psycopg.sql
        uid = self._require_context().operator_uid
        dead, self._dead = self._dead, []
        statement = sql.SQL("INSERT INTO {} (sink, row, error) VALUES (%s, %s, %s)").format(
            _identifier(self.dead_letter_table)
        )
        try:
            with self._data.cursor() as cursor:
                cursor.executemany(
                    statement,
                    [
                        (uid, psycopg.types.json.Jsonb(row, dumps=_dump_any), problem)
                        for row, problem in dead
                    ],
                )
        except psycopg.Error as error:
            raise self._lost("write dead letters", error) from None

    # ------------------------------------------------------------------ helpers

    def _control_connection(self) -> Any:
        if self._control is None or self._control.closed:
            self._control = self._connect()
        return self._control

    def _require_context(self) -> SinkContext:
        if self._context is None:
            raise SinkError(f"{self._name()}: used before open()")
        return self._context

    def _lost(self, doing: str, error: Exception) -> SinkError:
        """The error of a failed statement: usually the server went away (a connection
        error: SinkUnavailableError), which fails the attempt; the restart strategy retries."""
        kind = SinkUnavailableError if isinstance(error, _psycopg().OperationalError) else SinkError
        return kind(
            f"{self._name()}: cannot {doing} on PostgreSQL at {self._where()}: {_message(error)}"
        )


def gid_prefix(job_name: str, operator_uid: str) -> str:
    """The start of every gid of one sink of one job: short, and safe in SQL literals."""
    digest = hashlib.sha256(f"{job_name}\0{operator_uid}".encode()).hexdigest()[:20]
    return f"{GID_PREFIX}-{digest}-"


def gid_of(
    job_name: str, operator_uid: str, subtask_index: int, checkpoint_id: int, lineage: str = ""
) -> str:
    """The id of the transaction one subtask prepares for one checkpoint of one lineage
    (without a lineage: the format of gids made before lineages existed)."""
    lineage_part = f"{lineage}-" if lineage else ""
    return f"{gid_prefix(job_name, operator_uid)}{lineage_part}{subtask_index}-{checkpoint_id}"


_GID_TAIL = re.compile(r"(?:([0-9a-f]+)-)?(\d+)-(\d+)")


def parse_gid(gid: str, prefix: str) -> tuple[str, int, int] | None:
    """(lineage, subtask, checkpoint id) of a gid with `prefix` ("" lineage: a gid of the
    format before lineages), None if it is not one of ours.

    >>> prefix = gid_prefix("job", "sink")
    >>> parse_gid(gid_of("job", "sink", 3, 17, "00ab"), prefix)
    ('00ab', 3, 17)
    >>> parse_gid(gid_of("job", "sink", 3, 17), prefix)
    ('', 3, 17)
    """
    if not gid.startswith(prefix):
        return None
    match = _GID_TAIL.fullmatch(gid[len(prefix) :])
    if match is None:
        return None
    return match.group(1) or "", int(match.group(2)), int(match.group(3))


def owns_leftover(gid: str, prefix: str, subtask_index: int, parallelism: int) -> bool:
    """Whether subtask `subtask_index` of `parallelism` decides the leftover prepared
    transaction `gid`: one made by old subtask j belongs to j mod parallelism, the subtask
    that restores j's state, whatever the lineage.

    >>> prefix = gid_prefix("job", "sink")
    >>> [owns_leftover(gid_of("job", "sink", 5, 9, "ab"), prefix, i, 2) for i in (0, 1)]
    [False, True]
    """
    parsed = parse_gid(gid, prefix)
    return parsed is not None and parsed[1] % parallelism == subtask_index


def _split_table(table: str) -> tuple[str | None, str]:
    schema, _, name = table.rpartition(".")
    return (schema or None), name


def _identifier(table: str | None) -> Any:
    assert table is not None
    schema, name = _split_table(table)
    sql = _psycopg().sql
    return sql.Identifier(schema, name) if schema else sql.Identifier(name)


def _is_row_error(error: Any) -> bool:
    state = getattr(error, "sqlstate", None) or ""
    return state[:2] in _ROW_ERROR_STATES or state in _ROW_ERROR_CODES


def _message(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _dump_any(value: Any) -> str:
    return json.dumps(value, default=repr)


def _shown(row: Any) -> str:
    text = repr(row)
    return text if len(text) <= ROW_SHOWN_CHARS else text[: ROW_SHOWN_CHARS - 3] + "..."
