"""A failure while an operator restores its state is reported as a restore failure, whatever
its type, so the JobMaster's rule for them applies (issue 11, "Bad checkpoints": a failure
that repeats at restore fails the job instead of looping)."""

from __future__ import annotations

from pathlib import Path

import pytest

from barrierflow.connectors.files import FileSink
from barrierflow.errors import SinkError, SinkUnavailableError, StateRestoreError
from barrierflow.functions import CheckpointedFunction, MapFunction
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.chain_outputs import CollectingOutput
from barrierflow.runtime.operators.base import OperatorContext, RestoredState, restore_operator
from barrierflow.runtime.operators.source_sink import SinkOperator
from barrierflow.runtime.operators.stateless import MapOperator
from barrierflow.state.key_groups import KeyGroupRange


def _context(deployment: str) -> OperatorContext:
    return OperatorContext(
        subtask_index=0,
        parallelism=1,
        max_parallelism=128,
        key_group_range=KeyGroupRange(0, 127),
        attempt=0,
        deployment_id=deployment,
        processing_time=lambda: 0,
    )


def sink_with_its_staged_file_gone(output: Path) -> tuple[SinkOperator, RestoredState]:
    """A FileSink subtask about to restore checkpoint 7, whose pending (staged) file was
    deleted since: its restore cannot commit it."""
    sink = SinkOperator("sink", "Sink", FileSink.for_rows(str(output)))
    sink.setup(_context("run-1"), CollectingOutput())
    sink.initialize_state(None)
    sink.open()
    sink.process_batch(RecordBatch(["a", "b"]))
    state = sink.snapshot_state(7).operator
    for staged in (output / ".staging").rglob("*"):
        if staged.is_file():
            staged.unlink()
    again = SinkOperator("sink", "Sink", FileSink.for_rows(str(output)))
    again.setup(_context("run-2"), CollectingOutput())
    return again, RestoredState(operator=[(0, state)])


def test_a_sink_failing_to_restore_its_transactions_is_a_restore_failure_from_the_sink_error(
    tmp_path,
):
    sink, restored = sink_with_its_staged_file_gone(tmp_path / "out")
    with pytest.raises(StateRestoreError) as raised:
        restore_operator(sink, restored)

    message = str(raised.value)
    assert message.startswith("Sink (sink) failed while restoring its state: SinkError: ")
    assert "its staged file" in message and "is missing" in message
    assert isinstance(raised.value.__cause__, SinkError)


class FailingInit(MapFunction, CheckpointedFunction):
    def initialize_state(self, context):
        raise KeyError("offsets")

    def snapshot_state(self, context):
        pass

    def map(self, value):
        return value


def test_a_user_function_failing_to_initialize_restored_state_is_a_restore_failure():
    operator = MapOperator("m", "Map", FailingInit())
    operator.setup(_context("run"), CollectingOutput())
    with pytest.raises(StateRestoreError, match=r"^Map \(m\) failed while restoring its state: "):
        restore_operator(operator, RestoredState())


def test_on_a_fresh_start_the_error_keeps_its_type():
    operator = MapOperator("m", "Map", FailingInit())
    operator.setup(_context("run"), CollectingOutput())
    with pytest.raises(KeyError):
        restore_operator(operator, None)


def test_a_restore_error_passes_unchanged_keeping_the_file_it_names(tmp_path):
    sink = SinkOperator("sink", "Sink", FileSink.for_rows(str(tmp_path / "out")))
    sink.setup(_context("run"), CollectingOutput())
    with pytest.raises(StateRestoreError, match=r"^unknown FileSink state"):
        restore_operator(sink, RestoredState(operator=[(0, {"version": 99})]))


class _DatabaseDown(MapFunction, CheckpointedFunction):
    """Restoring needs a database that cannot be reached right now."""

    def map(self, value):
        return value

    def snapshot_state(self, context) -> None:
        pass

    def initialize_state(self, context) -> None:
        raise SinkUnavailableError("cannot connect to PostgreSQL at 127.0.0.1:5432/db: refused")


def test_an_unreachable_external_system_at_restore_stays_transient_not_a_restore_failure():
    """A database or broker that is down while a task restores is no damaged state: the
    error keeps its type, so the restart strategy (not the fail-on-second-restore rule)
    decides, and recovery waits for the system to come back."""
    operator = MapOperator("db-map", "Map", _DatabaseDown())
    operator.setup(_context("run-1"), CollectingOutput())
    with pytest.raises(SinkUnavailableError, match="cannot connect to PostgreSQL"):
        restore_operator(operator, RestoredState())
