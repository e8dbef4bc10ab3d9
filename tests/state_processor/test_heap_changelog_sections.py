"""The state processor reads a checkpoint written with the heap backend's changelog
checkpoints (a manifest naming a base and deltas in the job folder's shared/) as it reads
the canonical format."""

from __future__ import annotations

from collections import Counter

from snapshot_builder import write_checkpoint

from barrierflow import _fs, state_processor
from barrierflow.runtime.operators.base import OperatorSnapshot
from barrierflow.state import ValueStateDescriptor
from barrierflow.state.heap_backend import HeapKeyedStateBackend
from barrierflow.state.key_groups import assign_to_key_group, key_group_range_for_subtask

WORDS = ["the", "quick", "fox", "jumps", "over", "the", "lazy", "dog", "the", "fox"]


def test_a_changelog_checkpoint_reads_as_its_counts(tmp_path):
    job = _fs.location(str(tmp_path))
    sections = []
    for index in range(2):
        key_groups = key_group_range_for_subtask(128, 2, index)
        backend = HeapKeyedStateBackend(key_groups, 128, changelog=True)
        count = backend.get_value_state(ValueStateDescriptor("count"))
        for checkpoint_id, words in ((2, WORDS[:5]), (3, WORDS[5:])):  # a base, then a delta
            for word in words:
                if assign_to_key_group(word, 128) in key_groups:
                    backend.set_current_key(word)
                    count.update((count.value() or 0) + 1)
            snapshot = backend.snapshot(checkpoint_id)
            chk = job.child(f"chk-{checkpoint_id}")
            section = snapshot.write(chk.child(f"side-{index}"), job.child("shared"))
            snapshot.release()
            backend.notify_checkpoint_complete(checkpoint_id)
        sections.append(section)
    assert len(list((tmp_path / "shared").iterdir())) == 4
    write_checkpoint(
        tmp_path / "chk-3",
        {"count": [OperatorSnapshot(keyed=s) for s in sections]},
        checkpoint_id=3,
    )

    snapshot = state_processor.load(tmp_path / "chk-3")
    assert {e.key: e.value for e in snapshot.keyed_entries("count", "count")} == Counter(WORDS)
