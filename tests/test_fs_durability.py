"""Durability and the storage hook of _fs (issue 21, item 5): what a checkpoint or a commit
relies on is fsynced with its folder on local filesystems, nothing is on object stores; the
syncs are observed through the storage hook on real files, and FaultInjector raises the
chosen transient faults."""

from __future__ import annotations

import errno
import json

import pytest

from barrierflow import _fs
from barrierflow.checkpoint.history import HISTORY_FILE, CheckpointHistoryFile
from barrierflow.checkpoint.stats import CheckpointStats, CheckpointStatsStatus
from barrierflow.connectors.base import SinkContext
from barrierflow.connectors.files import FileSink


@pytest.fixture
def synced():
    """The paths fsynced while the test runs, in order (observed through the storage hook)."""
    paths: list[str] = []
    remove = _fs.add_hook(lambda kind, loc: paths.append(loc.path) if kind == "sync" else None)
    yield paths
    remove()


def test_sync_file_fsyncs_a_real_file_and_its_folder(tmp_path, synced):
    target = tmp_path / "f.state"
    target.write_bytes(b"state")

    _fs.sync_file(_fs.location(target))

    assert synced == [str(target), str(tmp_path)]
    assert target.read_bytes() == b"state"


def test_sync_of_a_missing_file_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        _fs.sync_file(_fs.location(tmp_path / "missing"))


def test_write_atomic_fsyncs_the_temporary_file_before_the_rename_then_the_folder(tmp_path, synced):
    _fs.write_atomic(_fs.location(tmp_path / "_metadata"), b"commit")

    temporary, folder = synced
    assert temporary.startswith(f"{tmp_path}/._metadata.") and temporary.endswith(".tmp")
    assert folder == str(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["_metadata"]


def test_a_commit_fsyncs_the_destination_folder_also_when_repeated(tmp_path, synced):
    staged, final = tmp_path / ".staging" / "part-0", tmp_path / "out" / "part-0"
    staged.parent.mkdir()
    final.parent.mkdir()
    staged.write_bytes(b"rows")

    _fs.commit_file(_fs.location(staged), _fs.location(final))
    _fs.commit_file(_fs.location(staged), _fs.location(final))  # after a crash: done already

    assert synced == [str(final.parent), str(final.parent)]
    assert final.read_bytes() == b"rows"


def test_nothing_is_fsynced_on_an_object_store(s3_server, synced):
    folder = _fs.location(s3_server.fresh_uri("durable"))
    _fs.write_atomic(folder.child("_metadata"), b"commit")
    _fs.write_bytes(folder.child("a.state"), b"x")
    _fs.sync_file(folder.child("a.state"))
    _fs.commit_file(folder.child("a.state"), folder.child("b.state"))

    assert synced == []
    assert _fs.read_bytes(folder.child("_metadata")) == b"commit"


def stats(checkpoint_id: int) -> CheckpointStats:
    return CheckpointStats(checkpoint_id, CheckpointStatsStatus.COMPLETED, checkpoint_id, ())


def test_the_history_append_is_fsynced(tmp_path, synced):
    history = CheckpointHistoryFile(_fs.location(tmp_path))
    history.append(stats(1), job_id="j")
    synced.clear()
    history.append(stats(2), job_id="j")

    assert synced == [history.location.path, str(tmp_path)]
    lines = (tmp_path / HISTORY_FILE).read_text().splitlines()
    assert [json.loads(x)["id"] for x in lines] == [1, 2]


def test_fault_injection_strikes_the_nth_matching_operation_count_times(tmp_path):
    target = _fs.location(tmp_path / "chk-1" / "_metadata")
    _fs.make_dirs(target.parent)
    _fs.write_bytes(target, b"m")
    other = _fs.location(tmp_path / "chk-1" / "a.state")
    _fs.write_bytes(other, b"s")
    remove = _fs.add_hook(_fs.FaultInjector.parse("read:*/_metadata:2:2"))
    try:
        outcomes = []
        for _ in range(4):
            try:
                outcomes.append(_fs.read_bytes(target))
            except OSError as error:
                assert error.errno == errno.EIO
                outcomes.append("fault")
        assert _fs.read_bytes(other) == b"s"  # does not match: never struck
    finally:
        remove()
    assert outcomes == [b"m", "fault", "fault", b"m"]


def test_a_bad_fault_spec_is_named():
    with pytest.raises(ValueError, match="'read:x' is not kind:pattern:n"):
        _fs.FaultInjector.parse("read:x")


def test_a_file_sink_part_file_is_fsynced_at_pre_commit_and_its_folder_at_commit(tmp_path, synced):
    out = tmp_path / "out"
    sink = FileSink.for_rows(str(out))
    sink.prepare()
    writer = sink.create_writer(SinkContext("sink", 0, 1, 0, "run1-0"))
    writer.restore([])
    writer.write_batch([("a", 1), ("b", 2)])

    writer.pre_commit(1)  # the checkpoint's pending handle names the staged file: durable now
    (staged,) = [p for p in (out / ".staging").rglob("part-*")]
    assert synced == [str(staged), str(staged.parent)]

    synced.clear()
    writer.commit(1)
    (final,) = list(out.glob("part-*"))
    assert synced == [str(out)]  # the rename into the output folder is durable
    assert final.read_text().splitlines() == ['["a",1]', '["b",2]']
