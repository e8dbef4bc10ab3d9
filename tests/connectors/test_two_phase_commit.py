"""TwoPhaseCommitWriter drives a TwoPhaseCommitSink event by event from the checkpoint
protocol: each test feeds the writer the runtime's calls and asserts the exact sink calls."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barrierflow.connectors import TwoPhaseCommitSink
from barrierflow.connectors.base import SinkContext
from barrierflow.errors import SinkError, StateRestoreError, TransactionBusyError


class RecordingSink(TwoPhaseCommitSink):
    """Logs every call; handles are "<deployment>/<n>"."""

    def __init__(self, replace_handles: bool = False) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.replace_handles = replace_handles

    def open(self, context: SinkContext) -> None:
        self.deployment = context.deployment_id
        self.count = 0
        self.calls.append(("open", context.restored_checkpoint_id))

    def begin_transaction(self) -> str:
        self.count += 1
        handle = f"{self.deployment}/{self.count}"
        self.calls.append(("begin", handle))
        return handle

    def write(self, transaction: str, records: list[Any]) -> None:
        self.calls.append(("write", transaction, list(records)))

    def pre_commit(self, transaction: str, checkpoint_id: int) -> str | None:
        self.calls.append(("pre_commit", transaction, checkpoint_id))
        return f"{transaction}@{checkpoint_id}" if self.replace_handles else None

    def commit(self, transaction: str) -> None:
        self.calls.append(("commit", transaction))

    def abort(self, transaction: str) -> None:
        self.calls.append(("abort", transaction))

    def recover_and_commit(self, transaction: str) -> None:
        self.calls.append(("recover_and_commit", transaction))

    def recover_and_abort(self, transaction: str) -> None:
        self.calls.append(("recover_and_abort", transaction))

    def finish_recovery(self) -> None:
        self.calls.append(("finish_recovery",))

    def close(self) -> None:
        self.calls.append(("close",))

    def take(self) -> list[tuple[Any, ...]]:
        """The calls since the last take."""
        calls, self.calls = self.calls, []
        return calls


def started(sink: RecordingSink, deployment: str = "d0", states=(), restored: int | None = None):
    context = SinkContext("sink-uid", 0, 1, 0, deployment, "job", restored)
    writer = sink.create_writer(context)
    writer.restore(list(states))
    return writer


def test_records_between_barriers_form_one_transaction_committed_when_its_checkpoint_completes():
    sink = RecordingSink()
    writer = started(sink)
    assert sink.take() == [("open", None), ("finish_recovery",), ("begin", "d0/1")]
    writer.write_batch(["a"])
    writer.write_batch([])
    writer.write_batch(["b", "c"])
    assert sink.take() == [("write", "d0/1", ["a"]), ("write", "d0/1", ["b", "c"])]
    writer.pre_commit(1)
    assert sink.take() == [("pre_commit", "d0/1", 1), ("begin", "d0/2")]
    writer.write_batch(["d"])
    assert sink.take() == [("write", "d0/2", ["d"])]
    writer.commit(1)
    assert sink.take() == [("commit", "d0/1")]
    writer.commit(1)
    assert sink.take() == []


def test_a_commit_commits_every_pending_transaction_up_to_its_checkpoint_oldest_first():
    sink = RecordingSink()
    writer = started(sink)
    for checkpoint_id in (1, 2, 3):
        writer.write_batch([checkpoint_id])
        writer.pre_commit(checkpoint_id)
    assert writer.snapshot_state()["pending"] == [[1, "d0/1"], [2, "d0/2"], [3, "d0/3"]]
    sink.take()
    writer.commit(2)  # checkpoint 1's notification was lost or 1 was subsumed
    assert sink.take() == [("commit", "d0/1"), ("commit", "d0/2")]
    assert writer.snapshot_state() == {"v": 1, "pending": [[3, "d0/3"]], "open": "d0/4"}
    writer.commit(3)
    assert sink.take() == [("commit", "d0/3")]


def test_a_handle_returned_by_pre_commit_replaces_the_open_one():
    sink = RecordingSink(replace_handles=True)
    writer = started(sink)
    writer.pre_commit(4)
    assert writer.snapshot_state()["pending"] == [[4, "d0/1@4"]]
    sink.take()
    writer.commit(4)
    assert sink.take() == [("commit", "d0/1@4")]


def test_a_restore_commits_the_pending_transactions_and_aborts_the_open_one():
    old = RecordingSink()
    crashed = started(old)
    crashed.pre_commit(1)
    crashed.pre_commit(2)
    state = crashed.snapshot_state()  # pending 1 and 2 (2 completed, never notified), open 3
    crashed.pre_commit(3)  # never completed: in no checkpoint

    sink = RecordingSink()
    started(sink, deployment="d1", states=[state], restored=2)

    assert sink.take() == [
        ("open", 2),
        ("recover_and_commit", "d0/1"),
        ("recover_and_commit", "d0/2"),
        ("recover_and_abort", "d0/3"),
        ("finish_recovery",),  # after the commits: what is left, no restored state lists
        ("begin", "d1/1"),
    ]


def test_a_rescaled_restore_commits_every_old_subtask_oldest_checkpoint_first_then_aborts():
    states = [
        {"v": 1, "pending": [[4, "old0/4"], [5, "old0/5"]], "open": "old0/6"},
        {"v": 1, "pending": [[3, "old2/3"], [5, "old2/5"]], "open": "old2/6"},
    ]
    sink = RecordingSink()
    started(sink, deployment="d1", states=states, restored=5)
    assert sink.take() == [
        ("open", 5),
        ("recover_and_commit", "old2/3"),
        ("recover_and_commit", "old0/4"),
        ("recover_and_commit", "old0/5"),
        ("recover_and_commit", "old2/5"),
        ("recover_and_abort", "old0/6"),
        ("recover_and_abort", "old2/6"),
        ("finish_recovery",),
        ("begin", "d1/1"),
    ]


def test_the_snapshot_survives_msgpack_as_checkpoints_store_it():
    writer = started(RecordingSink())
    writer.pre_commit(1)
    state = msgpack.unpackb(msgpack.packb(writer.snapshot_state()))
    sink = RecordingSink()
    started(sink, deployment="d1", states=[state], restored=1)
    assert ("recover_and_commit", "d0/1") in sink.take()


def test_a_failure_aborts_the_open_transaction_keeps_pending_ones_and_closes():
    sink = RecordingSink()
    writer = started(sink)
    writer.write_batch(["a"])
    writer.pre_commit(1)
    writer.write_batch(["b"])
    sink.take()
    writer.abort()
    writer.abort()  # the task's tear-down aborts again
    assert sink.take() == [("abort", "d0/2"), ("close",)]


def test_a_normal_end_aborts_the_empty_last_transaction_and_closes():
    sink = RecordingSink()
    writer = started(sink)
    writer.write_batch(["a"])
    writer.pre_commit(1)
    writer.commit(1)
    sink.take()
    writer.close()
    assert sink.take() == [("abort", "d0/2"), ("close",)]
    writer.abort()  # a tear-down after the close does nothing
    assert sink.take() == []


@pytest.mark.parametrize("leftover", ["pending", "open"])
def test_ending_with_uncommitted_records_is_a_sink_error_naming_the_sink(leftover):
    sink = RecordingSink()
    writer = started(sink)
    writer.write_batch(["a"])
    if leftover == "pending":
        writer.pre_commit(1)
    sink.take()
    with pytest.raises(SinkError, match=r"1 transaction.*of sink 'sink-uid' were never committed"):
        writer.close()
    assert sink.take()[-1] == ("close",)


@pytest.mark.parametrize(
    "state",
    [{"v": 2, "pending": [], "open": None}, [[1, "x"]], None, {"v": 1, "pending": [[1]]}],
    ids=["newer-version", "a-list", "none", "malformed"],
)
def test_a_state_it_cannot_read_is_a_restore_error_naming_the_sink(state):
    with pytest.raises(StateRestoreError, match="sink 'sink-uid'"):
        started(RecordingSink(), states=[state])


# ---- the property: exactly once through failures at any moment ---------------------------------


class Target:
    """An external system: prepared transactions survive failures; commit is idempotent."""

    def __init__(self) -> None:
        self.prepared: dict[str, list[Any]] = {}
        self.committed: set[str] = set()
        self.visible: list[Any] = []


class TargetSink(TwoPhaseCommitSink):
    def __init__(self, target: Target) -> None:
        self.target = target

    def open(self, context: SinkContext) -> None:
        self.deployment, self.count, self.buffers = context.deployment_id, 0, {}

    def begin_transaction(self) -> str:
        self.count += 1
        handle = f"{self.deployment}/{self.count}"
        self.buffers[handle] = []
        return handle

    def write(self, transaction: str, records: list[Any]) -> None:
        self.buffers[transaction].extend(records)

    def pre_commit(self, transaction: str, checkpoint_id: int) -> None:
        self.target.prepared[transaction] = self.buffers.pop(transaction)

    def commit(self, transaction: str) -> None:
        if transaction not in self.target.committed:
            self.target.committed.add(transaction)
            self.target.visible.extend(self.target.prepared.pop(transaction))

    def abort(self, transaction: str) -> None:
        self.buffers.pop(transaction, None)
        self.target.prepared.pop(transaction, None)


STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.integers(1, 4)),
        st.sampled_from([("barrier",), ("complete",), ("complete_unnotified",), ("fail",)]),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(STEPS)
def test_the_target_holds_every_record_exactly_once_whatever_fails_when(steps):
    records = list(range(60))
    target = Target()
    deployments = iter(range(1000))

    def new_writer(restored):
        context = SinkContext(
            "sink", 0, 1, 0, f"d{next(deployments)}", "job", restored and restored[0]
        )
        writer = TargetSink(target).create_writer(context)
        writer.restore([msgpack.unpackb(restored[2])] if restored else [])
        return writer

    completed = None  # (checkpoint id, source position, writer snapshot)
    in_flight: list[tuple[int, int, bytes]] = []
    position, next_id = 0, 1
    writer = new_writer(None)
    for step in steps:
        if step[0] == "write":
            batch = records[position : position + step[1]]
            writer.write_batch(batch)
            position += len(batch)
        elif step[0] == "barrier":
            writer.pre_commit(next_id)
            in_flight.append((next_id, position, msgpack.packb(writer.snapshot_state())))
            next_id += 1
        elif step[0].startswith("complete") and in_flight:
            completed, in_flight = in_flight[-1], []
            if step[0] == "complete":
                writer.commit(completed[0])
        elif step[0] == "fail":
            writer.abort()
            writer, in_flight = new_writer(completed), []
            position = completed[1] if completed else 0
    writer.write_batch(records[position:])
    writer.pre_commit(next_id)
    writer.commit(next_id)
    writer.close()

    assert target.visible == records  # one subtask: in order, each exactly once


# ---- the example sink of docs/connectors.md ----------------------------------------------------


def documented_sqlite_sink() -> type:
    """`SqliteSink` as docs/connectors.md defines it (the doc's first Python block)."""
    text = (Path(__file__).parents[2] / "docs" / "connectors.md").read_text()
    code = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "class Sqlite" in b)
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/connectors.md", "exec"), namespace)
    return namespace["SqliteSink"]


def test_the_documented_sqlite_sink_commits_exactly_once_through_a_failure(tmp_path):
    sqlite_sink = documented_sqlite_sink()
    path = str(tmp_path / "counts.db")

    def writer(deployment: str, restored: int | None, states=()):
        context = SinkContext("sink", 0, 1, 0, deployment, "job", restored)
        w = sqlite_sink(path, "counts").create_writer(context)
        w.restore(list(states))
        return w

    def table(name: str) -> list[tuple]:
        with sqlite3.connect(path) as db:
            return sorted(db.execute(f"SELECT * FROM {name}").fetchall())

    first = writer("run-0", None)
    first.write_batch([("a", 1), ("b", 1)])
    first.pre_commit(1)
    state = msgpack.unpackb(msgpack.packb(first.snapshot_state()))
    first.write_batch([("a", 2)])
    first.pre_commit(2)  # checkpoint 1 completes, but the task dies before it commits
    assert table("counts") == []

    second = writer("run-1", 1, [state])  # commits checkpoint 1, drops checkpoint 2's rows
    assert table("counts") == [("a", 1), ("b", 1)]
    assert table("staged") == []
    second.abort()
    writer("run-2", 1, [state]).close()  # restored twice: the commit finds it done
    assert table("counts") == [("a", 1), ("b", 1)]


class BusySink(RecordingSink):
    """Says busy for the first `busy` commits."""

    def __init__(self, busy: int) -> None:
        super().__init__()
        self.busy = busy

    def commit(self, transaction: str) -> None:
        if self.busy:
            self.busy -= 1
            self.calls.append(("busy", transaction))
            raise TransactionBusyError(transaction)
        super().commit(transaction)

    def recover_and_commit(self, transaction: str) -> None:
        self.commit(transaction)


def test_a_busy_commit_stays_pending_in_order_and_is_tried_again_on_the_next_call():
    sink = BusySink(busy=2)
    writer = sink.create_writer(SinkContext("out", 0, 1, 0, "d"))
    writer.restore([])
    writer.write_batch(["a"])
    writer.pre_commit(1)
    writer.write_batch(["b"])
    writer.pre_commit(2)
    writer.commit(2)  # busy on d/1: d/2 waits behind it
    assert [h for _, h in writer._pending] == ["d/1", "d/2"]
    assert [p[1] for p in writer.snapshot_state()["pending"]] == ["d/1", "d/2"]
    writer.write_batch(["c"])  # busy again
    writer.write_batch(["d"])  # committed now, oldest first
    commits = [call for call in sink.calls if call[0] in ("busy", "commit")]
    assert commits == [
        ("busy", "d/1"),
        ("busy", "d/1"),
        ("commit", "d/1"),
        ("commit", "d/2"),
    ]
    assert writer._pending == []


def test_a_restored_transaction_that_is_busy_stays_pending_until_committed():
    sink = BusySink(busy=1)
    writer = sink.create_writer(SinkContext("out", 0, 1, 0, "d"))
    writer.restore([{"v": 1, "pending": [[4, "old/1"]], "open": None}])
    assert writer.snapshot_state()["pending"] == [[4, "old/1"]]
    writer.pre_commit(5)  # tried again first: committed
    assert ("commit", "old/1") in sink.calls
    assert [p[0] for p in writer.snapshot_state()["pending"]] == [5]
