"""TwoPhaseCommitSink: the base of sinks that publish output exactly once, in step with checkpoints.

A connector writer implements the transaction steps; the base drives them from the
checkpoint protocol (`SinkWriter`): records between two barriers form one transaction,
pre-committed at the barrier (flushed and durable, still invisible) and committed once
that checkpoint is complete. After a failure the restored checkpoint's pending
transactions are committed again (commits must be idempotent) and the transaction that
was open is aborted. `docs/connectors.md` walks through writing one.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, Generic, TypeVar

from barrierflow.connectors.base import Sink, SinkContext, SinkWriter
from barrierflow.errors import SinkError, StateRestoreError, TransactionBusyError

__all__ = ["STATE_VERSION", "TwoPhaseCommitSink", "TwoPhaseCommitWriter", "Txn"]

Txn = TypeVar("Txn")
"""A transaction handle: a msgpack-able value (str, int, list, dict) that names the
transaction, stored in checkpoints. Live resources (a connection, an open file) stay in
the sink object, found by the handle."""

STATE_VERSION = 1
"""Format version of the writer's snapshot: {"v", "pending": [[checkpoint id, txn]], "open"}."""


class TwoPhaseCommitSink(Sink, Generic[Txn]):
    """Subclass it and implement the steps; exactly-once if `commit` is idempotent.

    Guarantee: a record reaches the target exactly once if the job's checkpoints are
    exactly-once, each transaction holds the records between two barriers, and `commit`
    may be repeated (after a failure the restored checkpoint's pending transactions are
    committed again). Assumes checkpoint ids increase.

    Called on the task's mailbox thread, in this order: `open(context)` once per attempt,
    then `recover_and_commit` for every transaction a restored checkpoint holds as pending
    (oldest checkpoint first) and `recover_and_abort` for the ones it holds as open, then
    `finish_recovery` (also on a fresh start), then `begin_transaction`; `write` for each
    batch; at a barrier `pre_commit(txn, id)` and `begin_transaction` for the next;
    `commit` of every pending transaction up to a completed checkpoint, oldest first;
    `abort` of the open transaction when the task fails or is cancelled; `close` last,
    after a normal end (the last commit) or after `abort`.
    The same object may be opened again for a later attempt in the same process (a
    roll-back in place): `open` starts from a clean slate.

    Recovery decides by facts that cannot collide across runs, storages or savepoint
    migrations, never by comparing checkpoint ids of different lineages:

    - commit exactly the transactions the restored state lists as pending
      (`recover_and_commit`), whichever run or lineage made them;
    - in `finish_recovery`, undo the rest that earlier attempts left and that this subtask
      owns: what old subtask j left belongs to subtask j mod parallelism, the subtask that
      restored j's state and so knows whether it listed it (a prepared transaction no
      restored state lists is rolled back);
    - after a fallback (`SinkContext.abandoned_above` set), take back the commits of this
      lineage above it, or say `survives_fallback() -> False` so such a fallback stops.

    Names of transactions and files carry `SinkContext.lineage` with the checkpoint id, so
    two runs never name two different things alike. `docs/connectors.md` has the rule.

    >>> class Memory(TwoPhaseCommitSink):
    ...     def __init__(self): self.visible, self.txns, self.next = [], {}, 0
    ...     def begin_transaction(self):
    ...         self.next += 1; self.txns[self.next] = []; return self.next
    ...     def write(self, txn, records): self.txns[txn].extend(records)
    ...     def pre_commit(self, txn, checkpoint_id): pass
    ...     def commit(self, txn): self.visible.extend(self.txns.pop(txn, []))
    ...     def abort(self, txn): self.txns.pop(txn, None)
    >>> sink = Memory()
    >>> writer = sink.create_writer(SinkContext("out", 0, 1, 0, "run-0"))
    >>> writer.restore([])
    >>> writer.write_batch(["a", "b"]); writer.pre_commit(1); writer.write_batch(["c"])
    >>> sink.visible
    []
    >>> writer.commit(1); sink.visible
    ['a', 'b']
    """

    def open(self, context: SinkContext) -> None:
        """Connect, check the target exists (fail fast with a clear error); reset what an
        earlier attempt in this process may have left in the object."""

    @abstractmethod
    def begin_transaction(self) -> Txn:
        """Start the transaction the next records go to; return its handle."""

    @abstractmethod
    def write(self, transaction: Txn, records: list[Any]) -> None:
        """Add records to `transaction` (invisible to readers until it commits)."""

    def write_arrow(self, transaction: Txn, data: Any) -> None:
        """Add the rows of a `pyarrow.RecordBatch` (dict rows, column -> value) to
        `transaction`. The default is `write(transaction, data.to_pylist())`; override it to
        store Arrow data without making Python rows."""
        self.write(transaction, data.to_pylist())

    @abstractmethod
    def pre_commit(self, transaction: Txn, checkpoint_id: int) -> Txn | None:
        """At the barrier of `checkpoint_id`: make `transaction` durable and committable
        (flush, prepare), still invisible. After this it may only be committed or aborted.

        May return a new handle that replaces `transaction` from here on (in the checkpoint
        and in `commit`), for example one that names what was prepared (files, a prepared
        transaction's id); None keeps `transaction`.
        """

    @abstractmethod
    def commit(self, transaction: Txn) -> None:
        """Make a pre-committed transaction visible. Idempotent: a commit may be repeated
        after a failure, also on a transaction that is already committed.

        Raise `TransactionBusyError` when the target cannot answer yet (another session is
        finishing the transaction): the writer keeps it pending, in later checkpoints too,
        and calls `commit` again on its next call (a record batch, a barrier, the next
        completed checkpoint) rather than waiting on the mailbox thread. The sink bounds how
        long it stays busy (by its `SinkContext.clock`) by raising a `SinkError` instead."""

    @abstractmethod
    def abort(self, transaction: Txn) -> None:
        """Discard `transaction` (open or pre-committed but never part of a complete
        checkpoint). Idempotent."""

    def recover_and_commit(self, transaction: Txn) -> None:
        """After a restore: commit a transaction the restored checkpoint holds as pending
        (pre-committed before a checkpoint that completed), which this or another writer
        may already have committed. The default is `commit`."""
        self.commit(transaction)

    def recover_and_abort(self, transaction: Txn) -> None:
        """After a restore: abort the transaction that was open when the restored
        checkpoint was taken (its records are replayed). The default is `abort`.

        Transactions begun after the restored checkpoint are in no checkpoint: the sink
        finds them itself in `finish_recovery` (no restored state lists them) or names them
        so they cannot collide."""
        self.abort(transaction)

    def finish_recovery(self) -> None:
        """After the restored transactions were committed and aborted, before the first
        `begin_transaction` of the attempt (also on a fresh start): decide what earlier
        attempts left that no restored state lists (leftovers this subtask owns, see the
        class docstring), and take back the commits of abandoned checkpoints
        (`SinkContext.abandoned_above`). Nothing by default."""

    def survives_fallback(self) -> bool:
        """False unless the sink takes back what abandoned checkpoints committed (see
        `finish_recovery`): a transactional sink promises exactly once."""
        return False

    def close(self) -> None:
        """The last call of an attempt (normal end, or after `abort`): release connections."""

    def handle_state(self, transaction: Txn) -> Any:
        """`transaction` as the checkpoint stores it (msgpack-able). The default stores the
        handle as it is; a sink with typed handles writes a versioned value."""
        return transaction

    def handle_from_state(self, state: Any) -> Txn:
        """The handle a checkpoint stored (`handle_state` of this or an older version)."""
        return state

    def create_writer(self, context: SinkContext) -> SinkWriter:
        return TwoPhaseCommitWriter(self, context)


class TwoPhaseCommitWriter(SinkWriter):
    """Drives a TwoPhaseCommitSink from the checkpoint protocol; keeps its pending handles.

    Mailbox thread only. Its snapshot is {"v": 1, "pending": [[checkpoint id, handle]],
    "open": handle}: every handle must be msgpack-able.
    """

    def __init__(self, sink: TwoPhaseCommitSink[Any], context: SinkContext) -> None:
        self.sink = sink
        self.context = context
        self._open: Any = None
        self._started = False
        """A transaction is open (begun, neither pre-committed nor aborted)."""
        self._written = False
        """The open transaction received records."""
        self._closed = False
        self._pending: list[tuple[int, Any]] = []
        """(checkpoint id, transaction) pre-committed and not yet committed, oldest first."""
        self._complete_up_to: int | None = None
        """Checkpoints up to this one completed but a transaction of theirs is still pending:
        the sink said it was busy (`TransactionBusyError`); tried again on the next call."""

    def restore(self, states: list[Any]) -> None:
        """Open the sink, finish what the restored snapshots left, begin a transaction.

        1. Commit every pending transaction of every snapshot (several after a rescale),
           oldest checkpoint first: each belongs to a completed checkpoint.
        2. Abort each snapshot's open transaction: its records are replayed.
        3. `finish_recovery`: the sink decides what else earlier attempts left (after 1, so
           what the restored state lists is committed before the rest is undone).
        4. Begin the first transaction of this attempt.
        """
        self.sink.open(self.context)
        decoded = [self.decode_state(state) for state in states]
        # Step 1
        pending = [p for state_pending, _ in decoded for p in state_pending]
        for checkpoint_id, transaction in sorted(pending, key=lambda p: p[0]):
            try:
                self.sink.recover_and_commit(transaction)
            except TransactionBusyError:  # stays pending: committed on a later call
                self._pending.append((checkpoint_id, transaction))
                self._complete_up_to = checkpoint_id
        # Step 2
        for _, open_transaction in decoded:
            if open_transaction is not None:
                self.sink.recover_and_abort(open_transaction)
        # Step 3
        self.sink.finish_recovery()
        # Step 4
        self._begin()

    def write_batch(self, records: list[Any]) -> None:
        if self._complete_up_to is not None:
            self._commit_completed()
        if records:
            self.sink.write(self._open, records)
            self._written = True

    def write_arrow(self, data: Any) -> None:
        if self._complete_up_to is not None:
            self._commit_completed()
        if data.num_rows:
            self.sink.write_arrow(self._open, data)
            self._written = True

    def pre_commit(self, checkpoint_id: int) -> None:
        if self._complete_up_to is not None:
            self._commit_completed()
        replaced = self.sink.pre_commit(self._open, checkpoint_id)
        self._pending.append((checkpoint_id, self._open if replaced is None else replaced))
        self._started = False
        self._begin()

    def snapshot_state(self) -> Any:
        handle_state = self.sink.handle_state
        return {
            "v": STATE_VERSION,
            "pending": [[checkpoint_id, handle_state(txn)] for checkpoint_id, txn in self._pending],
            "open": handle_state(self._open),
        }

    def commit(self, checkpoint_id: int) -> None:
        if self._complete_up_to is None or checkpoint_id > self._complete_up_to:
            self._complete_up_to = checkpoint_id
        self._commit_completed()

    def _commit_completed(self) -> None:
        """Commit the pending transactions of completed checkpoints, oldest first. One the
        sink calls busy stays first in line (and in every snapshot until committed, so a
        restore commits it again: exactly once), and so do the ones after it."""
        up_to = self._complete_up_to
        assert up_to is not None
        while self._pending and self._pending[0][0] <= up_to:
            try:
                self.sink.commit(self._pending[0][1])
            except TransactionBusyError:
                return
            self._pending.pop(0)
        self._complete_up_to = None

    def abort(self) -> None:
        """The task fails or is cancelled: abort the open transaction (pending ones wait
        for a restore to decide), then close the sink."""
        if self._started:
            self._started = False
            self.sink.abort(self._open)
        self._close_sink()

    def close(self) -> None:
        """The job ended normally: after its final checkpoint committed, nothing may be
        left. A pending or non-empty open transaction is a `SinkError` (after the open one
        is aborted and the sink closed): its records would never be visible, unless a
        restore of the last checkpoint commits it (a transaction still busy: the attempt
        fails, and the restarted one commits it again)."""
        if self._complete_up_to is not None:
            self._commit_completed()
        leftover = len(self._pending) + (1 if self._started and self._written else 0)
        if self._started:  # empty unless the job ended without a final checkpoint
            self._started = False
            self.sink.abort(self._open)
        self._close_sink()
        if leftover:
            raise SinkError(
                f"{leftover} transaction(s) of subtask {self.context.subtask_index} of sink "
                f"'{self.context.operator_uid}' were never committed: the job ended without "
                "a completed checkpoint covering them"
            )

    def decode_state(self, state: Any) -> tuple[list[tuple[int, Any]], Any]:
        """(pending, open) of a snapshot, or a StateRestoreError naming the sink's uid.

        A sink whose older versions stored another format overrides it to convert them;
        each handle goes through the sink's `handle_from_state`."""
        pending, open_transaction = _decode(state, self.context)
        from_state = self.sink.handle_from_state
        return (
            [(checkpoint_id, from_state(txn)) for checkpoint_id, txn in pending],
            None if open_transaction is None else from_state(open_transaction),
        )

    def _begin(self) -> None:
        self._open = self.sink.begin_transaction()
        self._started = True
        self._written = False

    def _close_sink(self) -> None:
        if not self._closed:
            self._closed = True
            self.sink.close()


def _decode(state: Any, context: SinkContext) -> tuple[list[tuple[int, Any]], Any]:
    """(pending, open) of a snapshot, or a StateRestoreError naming the sink's uid."""
    if not isinstance(state, dict) or state.get("v") != STATE_VERSION:
        raise StateRestoreError(
            f"sink '{context.operator_uid}': unknown transaction state {state!r:.80} "
            f"(expected version {STATE_VERSION})"
        )
    try:
        pending = [(int(checkpoint_id), txn) for checkpoint_id, txn in state["pending"]]
        return pending, state["open"]
    except (KeyError, TypeError, ValueError) as error:
        raise StateRestoreError(
            f"sink '{context.operator_uid}': malformed transaction state {state!r:.80}: {error}"
        ) from None
