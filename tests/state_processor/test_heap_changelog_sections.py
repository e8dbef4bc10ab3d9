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


def test_a_changelog_checkpoints_timers_read_as_the_timers_at_its_barrier(tmp_path):
    from barrierflow.runtime.timers import InternalTimerService

    class Ignore:
        def on_event_time(self, timer):
            pass

        def on_processing_time(self, timer):
            pass

    job = _fs.location(str(tmp_path))
    sections = []
    expected = set()
    for index in range(2):
        key_groups = key_group_range_for_subtask(128, 2, index)
        timers = InternalTimerService(key_groups, 128, Ignore())
        timers.enable_changelog()
        words = [w for w in dict.fromkeys(WORDS) if assign_to_key_group(w, 128) in key_groups]
        for checkpoint_id in (2, 3):  # a base, then a delta
            for position, word in enumerate(words):
                timers.register_event_time_timer(word, None, checkpoint_id * 100 + position)
            timers.advance_watermark(250)  # before 3, every timer of 2 fires
            section = timers.hold(checkpoint_id).write(job.child("shared"))
            timers.notify_checkpoint_complete(checkpoint_id)
        sections.append(section)
        expected |= {(word, 300 + position) for position, word in enumerate(words)}
    suffixes = sorted(path.suffix for path in (tmp_path / "shared").iterdir())
    assert suffixes == [".timerbase", ".timerbase", ".timerdelta", ".timerdelta"]
    write_checkpoint(
        tmp_path / "chk-3",
        {"count": [OperatorSnapshot(timers=s) for s in sections]},
        checkpoint_id=3,
    )

    snapshot = state_processor.load(tmp_path / "chk-3")
    assert {(e.key, e.timestamp) for e in snapshot.timer_entries("count")} == expected
    assert len(expected) == len(set(WORDS))
