"""Incremental checkpoints of the RocksDB backend: the bookkeeping of shared files event by
event (`rocksdb_uploads.SharedUploads`), then real RocksDB databases checkpointed into a
job folder in tmp_path: what each checkpoint uploads into `shared/`, which files it
reuses and when, and restores (chains, another job folder, rescaling, the heap backend)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from barrierflow import _envelope, _fs
from barrierflow.core.state_backends import EmbeddedRocksDBStateBackend
from barrierflow.errors import StateRestoreError
from barrierflow.state import MapStateDescriptor, ValueStateDescriptor
from barrierflow.state.backend import canonical_bytes
from barrierflow.state.heap_backend import KEYED_STATE, HeapKeyedStateBackend, decode_key_group
from barrierflow.state.key_groups import (
    KeyGroupRange,
    assign_to_key_group,
    key_group_range_for_subtask,
)
from barrierflow.state.rocksdb_backend import RocksDBKeyedStateBackend, native_to_canonical
from barrierflow.state.rocksdb_encoding import NATIVE_KIND
from barrierflow.state.rocksdb_uploads import SharedFile, SharedUploads

MAX_P = 128
ALL = KeyGroupRange(0, MAX_P - 1)
INCREMENTAL = EmbeddedRocksDBStateBackend(
    enable_incremental_checkpointing=True, block_cache_mb=8, write_buffer_mb=8
)
FULL = EmbeddedRocksDBStateBackend(block_cache_mb=8, write_buffer_mb=8)


# ---- the bookkeeping, event by event -------------------------------------------------------

JOB = "file:///job/shared"
A, B, C = ("1.sst", 100), ("2.sst", 200), ("3.sst", 300)


def shared(letter: str, size: int) -> SharedFile:
    return SharedFile(f"shared/{letter}.sst", size, 0)


def test_only_the_last_completed_checkpoints_files_are_reused():
    uploads = SharedUploads()
    first = uploads.plan(JOB, [A, B])
    assert (first.reuse, first.upload) == ({}, [A, B])  # nothing uploaded before
    uploads.written(1, JOB, {A: shared("a", 100), B: shared("b", 200)})
    # checkpoint 1 is in flight: checkpoint 2 may not reference its files
    second = uploads.plan(JOB, [A, B, C])
    assert (second.reuse, second.upload) == ({}, [A, B, C])
    uploads.written(2, JOB, {A: shared("a2", 100), B: shared("b2", 200), C: shared("c", 300)})
    uploads.complete(1)
    uploads.complete(2)
    fourth = uploads.plan(JOB, [B, C])
    assert fourth.reuse == {B: shared("b2", 200), C: shared("c", 300)}
    assert fourth.upload == []


def test_a_pending_checkpoint_that_named_a_file_otherwise_blocks_its_reuse():
    """Completion news lags a barrier: checkpoint 2 (uploaded b2 while 1 was in flight)
    may complete and subsume 1 before this backend hears of it; a checkpoint 3 that
    referenced 1's "b" would then name a deleted file."""
    uploads = SharedUploads()
    uploads.written(1, JOB, {A: shared("a", 100), B: shared("b", 200)})
    uploads.written(2, JOB, {A: shared("a2", 100), B: shared("b2", 200), C: shared("c", 300)})
    uploads.complete(1)  # 2 still pending
    third = uploads.plan(JOB, [B, C])
    assert (third.reuse, third.upload) == ({}, [B, C])
    uploads.written(3, JOB, {B: shared("b3", 200), C: shared("c3", 300)})
    uploads.complete(2)  # 3 pending, named other files: nothing reusable
    assert uploads.plan(JOB, [B, C]).reuse == {}
    uploads.complete(3)
    assert uploads.plan(JOB, [B, C]).reuse == {B: shared("b3", 200), C: shared("c3", 300)}
    # a pending checkpoint that reused the baseline's names does not block them
    uploads.written(4, JOB, {B: shared("b3", 200), C: shared("c3", 300)})
    assert uploads.plan(JOB, [B, C]).upload == []


def test_an_aborted_checkpoint_lends_nothing():
    uploads = SharedUploads()
    uploads.written(1, JOB, {A: shared("a", 100)})
    uploads.complete(1)
    uploads.written(2, JOB, {A: shared("a", 100), B: shared("b", 200)})  # never completes
    plan = uploads.plan(JOB, [A, B])
    assert (plan.reuse, plan.upload) == ({A: shared("a", 100)}, [B])
    uploads.written(3, JOB, {A: shared("a", 100), B: shared("b3", 200)})
    uploads.complete(3)  # 2 is subsumed: its files are never reused, even if it completed late
    uploads.complete(2)
    assert uploads.plan(JOB, [A, B]).reuse == {A: shared("a", 100), B: shared("b3", 200)}


def test_a_completion_out_of_order_or_of_a_checkpoint_not_written_here_changes_nothing():
    uploads = SharedUploads()
    uploads.written(4, JOB, {A: shared("a", 100)})
    uploads.complete(4)
    uploads.complete(3)  # late, older
    uploads.complete(5)  # a savepoint, or a checkpoint this database wrote nothing for
    assert uploads.plan(JOB, [A]).reuse == {A: shared("a", 100)}
    uploads.written(None, JOB, {B: shared("b", 200)})  # a snapshot without an id
    uploads.complete(6)
    assert uploads.plan(JOB, [A, B]).upload == [B]
    uploads.written(7, JOB, {A: shared("a7", 100)})  # uploaded anew while 4 was not known
    uploads.complete(8)  # a savepoint: 7 may still complete after it and subsume 4
    assert uploads.plan(JOB, [A]).upload == [A]
    uploads.complete(7)
    assert uploads.plan(JOB, [A]).reuse == {A: shared("a7", 100)}


def test_the_same_name_of_another_size_is_another_file():
    uploads = SharedUploads()
    uploads.written(1, JOB, {A: shared("a", 100)})
    uploads.complete(1)
    assert uploads.plan(JOB, [("1.sst", 101)]).upload == [("1.sst", 101)]


def test_files_are_reused_only_within_their_job_folder():
    uploads = SharedUploads()
    uploads.written(1, JOB, {A: shared("a", 100)})
    uploads.complete(1)
    assert uploads.plan("file:///other/shared", [A]).upload == [A]
    uploads.written(2, "file:///other/shared", {A: shared("a-other", 100)})
    uploads.complete(2)
    assert uploads.plan(JOB, [A]).upload == [A]
    assert uploads.plan("file:///other/shared", [A]).reuse == {A: shared("a-other", 100)}


def test_a_restore_makes_its_files_the_baseline_and_forgets_the_rest():
    uploads = SharedUploads()
    uploads.written(7, JOB, {A: shared("a", 100)})
    uploads.restored(JOB, {B: shared("b", 200)})
    assert uploads.plan(JOB, [A, B]).reuse == {B: shared("b", 200)}
    uploads.complete(7)  # written before the restore: void
    assert uploads.plan(JOB, [A, B]).upload == [A]
    uploads.restored("file:///other/shared", {B: shared("b", 200)})
    assert uploads.plan(JOB, [B]).upload == [B]  # restored from another job folder
    uploads.restored(JOB, {})
    assert uploads.plan(JOB, [B]).upload == [B]


# ---- real databases -------------------------------------------------------------------------


@pytest.fixture
def make_rocks(tmp_path):
    made: list[RocksDBKeyedStateBackend] = []

    def make(
        key_groups: KeyGroupRange = ALL, settings: EmbeddedRocksDBStateBackend = INCREMENTAL
    ) -> RocksDBKeyedStateBackend:
        backend = RocksDBKeyedStateBackend(key_groups, MAX_P, settings, str(tmp_path / "local"))
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.dispose()


def fill(backend: RocksDBKeyedStateBackend, keys: range, version: int = 0) -> None:
    count = backend.get_value_state(ValueStateDescriptor("count"))
    table = backend.get_map_state(MapStateDescriptor("table"))
    for number in keys:
        key = f"k-{number}"
        if assign_to_key_group(key, MAX_P) not in backend.key_group_range:
            continue
        backend.set_current_key(key)
        count.update(f"{number}-{version}-" + "x" * 40)
        if number % 10 == 0:
            table.put(version % 3, number)


def flat(data: bytes) -> dict[tuple[str, Any], Any]:
    """{(state, key): value} of a canonical envelope, whatever the key groups' cut."""
    header, body = _envelope.decode(data, KEYED_STATE)
    names = [name for name, _ in header["states"]]
    found = {}
    for group, (offset, length) in header["key_groups"].items():
        per_state = decode_key_group(body, int(group), offset, length, names)
        for name, entries in zip(names, per_state, strict=True):
            for key, value in entries.items():
                found[(name, key)] = value
    return found


class Checkpointed:
    """One checkpoint written as the pipeline writes it: `<job>/chk-<n>/<state>.files-0/`
    for private files, `<job>/shared/` for shared ones."""

    def __init__(
        self, backend: RocksDBKeyedStateBackend, job: Path, checkpoint_id: int, name: str = "s"
    ) -> None:
        self.folder = _fs.location(str(job / f"chk-{checkpoint_id}"))
        snapshot = backend.snapshot(checkpoint_id)
        try:
            self.section = snapshot.write(
                self.folder.child(f"{name}.files-0"), shared=_fs.location(str(job)).child("shared")
            )
            self.shared = snapshot.shared_files()
        finally:
            snapshot.release()
        self.header, _ = _envelope.decode(self.section, NATIVE_KIND)

    @property
    def uploaded(self) -> int:
        """Bytes this checkpoint wrote: private files and new shared files."""
        return sum(size for _, size, _ in self.header["files"]) + sum(
            size for _, size, new in self.shared if new
        )

    @property
    def full(self) -> int:
        """Bytes of the whole checkpoint: private files and every referenced shared file."""
        return sum(size for _, size, _ in self.header["files"]) + sum(
            size for _, size, _ in self.shared
        )

    def new(self) -> set[str]:
        return {name for name, _, new in self.shared if new}

    def reused(self) -> set[str]:
        return {name for name, _, new in self.shared if not new}


def test_the_first_incremental_checkpoint_uploads_every_sst_file_into_shared(make_rocks, tmp_path):
    rocks = make_rocks()
    fill(rocks, range(20_000))
    rocks.flush_writes()  # the write-back cache's writes into RocksDB
    rocks._db.compact_range(None, None)
    live = set(_sst_names(rocks))
    first = Checkpointed(rocks, tmp_path / "job", 1)
    assert live and len(first.shared) == len(live)
    assert all(new for _, _, new in first.shared)
    assert {entry[0] for entry in first.header["shared"]} == live  # local names listed
    for name, size, _new in first.shared:
        assert name.startswith("shared/") and name.endswith(".sst")
        assert (tmp_path / "job" / name).stat().st_size == size
    private = [name for name, _, _ in first.header["files"]]
    assert private and not [name for name in private if name.endswith(".sst")]
    assert sorted(p.name for p in (tmp_path / "job" / "shared").iterdir()) == sorted(
        name.split("/")[1] for name, _, _ in first.shared
    )


def _sst_names(backend: RocksDBKeyedStateBackend) -> list[str]:
    return [f["name"].lstrip("/") for f in backend._db.live_files()]


def test_after_one_percent_changed_only_the_new_file_is_uploaded(make_rocks, tmp_path):
    rocks = make_rocks()
    fill(rocks, range(200_000))
    rocks.flush_writes()  # the write-back cache's writes into RocksDB
    rocks._db.compact_range(None, None)  # one sorted run: the next flush triggers no compaction
    job = tmp_path / "job"
    first = Checkpointed(rocks, job, 1)
    rocks.notify_checkpoint_complete(1)
    fill(rocks, range(0, 200_000, 100), version=1)  # 1 % of the keys
    second = Checkpointed(rocks, job, 2)
    assert second.reused() == first.new()  # nothing compacted away: every old file reused
    assert len(second.new()) == 1  # the flushed memtable
    ratio = second.uploaded / second.full
    print(
        f"\n200k keys: full {first.uploaded} B, after 1 % changed {second.uploaded} B "
        f"uploaded of {second.full} B referenced ({ratio:.2%})"
    )
    assert ratio < 0.05
    assert second.full > first.full


def test_files_are_reused_only_after_the_checkpoint_completed(make_rocks, tmp_path):
    rocks = make_rocks()
    fill(rocks, range(5_000))
    job = tmp_path / "job"
    first = Checkpointed(rocks, job, 1)
    second = Checkpointed(rocks, job, 2)  # 1 not complete: everything again, other names
    assert second.reused() == set() and len(second.new()) == len(first.new())
    assert not second.new() & first.new()
    rocks.notify_checkpoint_complete(2)
    third = Checkpointed(rocks, job, 3)
    assert third.new() == set() and third.reused() == second.new()
    rocks.notify_checkpoint_complete(1)  # late: 2's files stay the baseline
    assert Checkpointed(rocks, job, 4).reused() == second.new()


def test_a_chain_of_incremental_checkpoints_restores_the_state(make_rocks, tmp_path):
    rocks = make_rocks()
    job = tmp_path / "job"
    fill(rocks, range(30_000))
    rocks.flush_writes()  # the write-back cache's writes into RocksDB
    rocks._db.compact_range(None, None)  # then 3 L0 files at most: no compaction below
    Checkpointed(rocks, job, 1)
    rocks.notify_checkpoint_complete(1)
    fill(rocks, range(0, 30_000, 7), version=1)
    Checkpointed(rocks, job, 2)
    rocks.notify_checkpoint_complete(2)
    fill(rocks, range(0, 30_000, 11), version=2)
    third = Checkpointed(rocks, job, 3)
    expected = flat(canonical_bytes(rocks))
    assert third.reused()  # the chain: files of checkpoints 1 and 2
    fill(rocks, range(100), version=9)  # after the snapshot: not in it

    restored = make_rocks()
    restored.restore([third.section], third.folder)
    assert flat(canonical_bytes(restored)) == expected
    assert flat(native_to_canonical(third.section, third.folder)) == expected
    # the restored database's files came from this job's shared/: the next checkpoint
    # into the same job folder references them, uploading only what changed since
    fill(restored, range(50), version=3)
    after = Checkpointed(restored, job, 4)
    assert after.reused() == {name for name, _, _ in third.shared}
    assert len(after.new()) == 1
    by_local = {(local, size): name for local, name, size, _ in third.header["shared"]}
    for local, name, size, _ in after.header["shared"]:
        assert by_local.get((local, size), name) == name


def test_after_a_restore_from_another_job_folder_the_first_checkpoint_uploads_everything(
    make_rocks, tmp_path
):
    rocks = make_rocks()
    fill(rocks, range(10_000))
    old = Checkpointed(rocks, tmp_path / "old-job", 1)
    restored = make_rocks()
    restored.restore([old.section], old.folder)
    first = Checkpointed(restored, tmp_path / "new-job", 1)
    assert first.reused() == set()
    assert len(first.new()) == len(old.shared)
    assert (tmp_path / "new-job" / "shared").is_dir()
    restored.notify_checkpoint_complete(1)
    assert Checkpointed(restored, tmp_path / "new-job", 2).reused() == first.new()


def test_rescale_two_three_one_and_into_the_heap_backend_from_incremental_manifests(
    make_rocks, tmp_path
):
    job = tmp_path / "job"
    two = [make_rocks(key_group_range_for_subtask(MAX_P, 2, i)) for i in range(2)]
    sections = []
    for index, backend in enumerate(two):
        fill(backend, range(20_000))
        Checkpointed(backend, job, 1, f"p2-{index}")
        backend.notify_checkpoint_complete(1)
        fill(backend, range(0, 20_000, 13), version=1)
        checkpointed = Checkpointed(backend, job, 2, f"p2-{index}")
        assert checkpointed.reused()
        sections.append(checkpointed.section)
    expected = {}
    for backend in two:
        expected.update(flat(canonical_bytes(backend)))
    base = _fs.location(str(job / "chk-2"))

    three = [make_rocks(key_group_range_for_subtask(MAX_P, 3, i)) for i in range(3)]
    sections3 = []
    for index, backend in enumerate(three):
        backend.restore(sections, base)
        sections3.append(Checkpointed(backend, job, 3, f"p3-{index}").section)
    one = make_rocks()
    one.restore(sections3, _fs.location(str(job / "chk-3")))
    assert flat(canonical_bytes(one)) == expected

    heap = HeapKeyedStateBackend(key_group_range_for_subtask(MAX_P, 3, 1), MAX_P)
    heap.restore(sections, base)
    assert flat(canonical_bytes(heap)) == {
        (name, key): value
        for (name, key), value in expected.items()
        if assign_to_key_group(key, MAX_P) in heap.key_group_range
    }


def test_a_missing_shared_file_is_a_restore_error_naming_it(make_rocks, tmp_path):
    rocks = make_rocks()
    fill(rocks, range(5_000))
    checkpointed = Checkpointed(rocks, tmp_path / "job", 1)
    name = next(iter(checkpointed.new()))
    (tmp_path / "job" / name).unlink()
    with pytest.raises(StateRestoreError, match=name.split("/")[1]):
        make_rocks().restore([checkpointed.section], checkpointed.folder)


def test_without_incremental_checkpointing_every_file_is_private(make_rocks, tmp_path):
    rocks = make_rocks(settings=FULL)
    fill(rocks, range(5_000))
    for checkpoint_id in (1, 2):
        checkpointed = Checkpointed(rocks, tmp_path / "job", checkpoint_id)
        rocks.notify_checkpoint_complete(checkpoint_id)
        assert checkpointed.shared == [] and "shared" not in checkpointed.header
        assert [n for n, _, _ in checkpointed.header["files"] if n.endswith(".sst")]
    assert not (tmp_path / "job" / "shared").exists()


def test_a_failed_upload_leaves_no_shared_file_and_lends_nothing(
    make_rocks, tmp_path, storage_faults
):
    rocks = make_rocks()
    fill(rocks, range(5_000))
    rocks.flush_writes()
    rocks._db.flush(True)
    fill(rocks, range(5_000, 10_000))
    rocks.flush_writes()
    rocks._db.flush(True)
    job = tmp_path / "job"
    assert len(_sst_names(rocks)) == 2
    storage_faults("write:*/shared/*:2")
    with pytest.raises(OSError, match="injected storage fault"):
        Checkpointed(rocks, job, 1)
    assert list((job / "shared").iterdir()) == []  # the first upload was deleted again
    rocks.notify_checkpoint_complete(1)  # (it cannot have completed; nothing to confirm)
    second = Checkpointed(rocks, job, 2)
    assert second.reused() == set() and len(second.new()) == len(_sst_names(rocks))
