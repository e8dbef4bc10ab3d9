"""The state processor reads a checkpoint written by the RocksDB backend (native sections:
files beside the state files) as it reads the canonical format."""

from __future__ import annotations

from collections import Counter

from click.testing import CliRunner
from snapshot_builder import write_checkpoint

from barrierflow import _fs, state_processor
from barrierflow.cli import main
from barrierflow.core.state_backends import EmbeddedRocksDBStateBackend
from barrierflow.runtime.operators.base import OperatorSnapshot
from barrierflow.state import MapStateDescriptor, ValueStateDescriptor
from barrierflow.state.key_groups import assign_to_key_group, key_group_range_for_subtask
from barrierflow.state.rocksdb_backend import RocksDBKeyedStateBackend

WORDS = ["the", "quick", "fox", "jumps", "over", "the", "lazy", "dog", "the", "fox"]


def test_a_rocksdb_checkpoint_reads_as_its_counts(tmp_path):
    folder = tmp_path / "chk-3"
    sections = []
    for index in range(2):
        key_groups = key_group_range_for_subtask(128, 2, index)
        backend = RocksDBKeyedStateBackend(
            key_groups, 128, EmbeddedRocksDBStateBackend(), str(tmp_path / "local")
        )
        count = backend.get_value_state(ValueStateDescriptor("count"))
        last = backend.get_map_state(MapStateDescriptor("position"))
        for position, word in enumerate(WORDS):
            if assign_to_key_group(word, 128) in key_groups:
                backend.set_current_key(word)
                count.update((count.value() or 0) + 1)
                last.put("last", position)
        snapshot = backend.snapshot()
        sections.append(snapshot.write(_fs.location(str(folder)).child(f"rocksdb-{index}")))
        snapshot.release()
        backend.dispose()
    write_checkpoint(
        folder, {"count": [OperatorSnapshot(keyed=s) for s in sections]}, checkpoint_id=3
    )

    snapshot = state_processor.load(folder)
    assert {e.key: e.value for e in snapshot.keyed_entries("count", "count")} == Counter(WORDS)
    assert snapshot.values_of_key("count", "fox") == {"count": 2, "position": {"last": 9}}
    [info] = snapshot.operators()
    assert info.states == (
        state_processor.StateInfo("count", "value"),
        state_processor.StateInfo("position", "map"),
    )
    result = CliRunner().invoke(main, ["state", "show", str(folder), "--key", "the"])
    assert result.exit_code == 0, result.output
    assert "count" in result.output and "3" in result.output
