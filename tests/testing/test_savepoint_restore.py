"""HarnessSnapshot.from_savepoint: a function restored from a checkpoint folder as a job
writes it (subtask state files and `_metadata`, RocksDB's native sections beside them),
at another parallelism and on another backend, continues exactly as one uninterrupted run."""

from __future__ import annotations

import pytest
from state_processor.snapshot_builder import write_checkpoint

from barrierflow import EmbeddedRocksDBStateBackend, _fs
from barrierflow.errors import StateRestoreError
from barrierflow.functions import KeyedProcessFunction
from barrierflow.runtime.operators.base import OperatorSnapshot
from barrierflow.runtime.timers import timer_section
from barrierflow.state import ValueStateDescriptor
from barrierflow.testing import HarnessSnapshot, KeyedProcessFunctionHarness, ParallelHarness


class Total(KeyedProcessFunction):
    """A running total per key, reported at event time + 5 of each record."""

    def open(self, runtime_context):
        self.total = runtime_context.get_state(ValueStateDescriptor("total"))

    def process_element(self, value, ctx):
        self.total.update((self.total.value() or 0) + value[1])
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 5)

    def on_timer(self, timestamp, ctx):
        yield ctx.get_current_key(), timestamp, self.total.value()


def make(**settings):
    return KeyedProcessFunctionHarness(Total(), lambda r: r[0], **settings)


BEFORE = [((f"k{n % 5}", n), n) for n in range(12)]
AFTER = [((f"k{n % 5}", n), n) for n in range(12, 20)]


def test_a_job_checkpoint_restores_into_harnesses_of_another_parallelism(tmp_path):
    one = make()
    for record, timestamp in BEFORE + AFTER:
        one.process_element(record, timestamp)
    one.process_watermark(100)

    folder = tmp_path / "chk-4"
    old = ParallelHarness(make, 2, state_backend=EmbeddedRocksDBStateBackend())
    for record, timestamp in BEFORE:
        old.process_element(record, timestamp)
    snapshots = []
    for index, harness in enumerate(old.subtasks):  # what a checkpoint's uploader writes
        taken = harness.operator.snapshot_state(4)
        native = taken.keyed.write(_fs.location(str(folder)).child(f"rocksdb-{index}"))
        taken.keyed.release()
        snapshots.append(OperatorSnapshot(keyed=native, timers=timer_section(taken.timers)))
    write_checkpoint(folder, {"totals": snapshots}, checkpoint_id=4)
    old.close()

    restored = HarnessSnapshot.from_savepoint(folder, "totals")
    assert (restored.parallelism, restored.checkpoint_id) == (2, 4)
    new = ParallelHarness(make, 3, restore_from=restored)
    for record, timestamp in AFTER:
        new.process_element(record, timestamp)
    new.process_watermark(100)
    assert sorted(new.extract_output_values()) == sorted(one.extract_output_values())


def test_an_unknown_uid_or_folder_is_named(tmp_path):
    harness = make()
    harness.process_element(("a", 1), 1)
    write_checkpoint(tmp_path / "chk-1", {"totals": [harness.operator.snapshot_state(1)]})
    with pytest.raises(KeyError, match="holds no state of operator 'sums'; it holds totals"):
        HarnessSnapshot.from_savepoint(tmp_path / "chk-1", "sums")
    with pytest.raises(StateRestoreError, match="_metadata"):
        HarnessSnapshot.from_savepoint(tmp_path / "nothing", "totals")
