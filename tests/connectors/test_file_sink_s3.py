"""FileSink on an S3-compatible server: no rename there, so a commit copies and deletes."""

from __future__ import annotations

from barrierflow import _fs
from barrierflow.connectors.base import SinkContext
from barrierflow.connectors.files import FileSink


def new_writer(out: str, deployment: str, restore=()):
    writer = FileSink.for_rows(out).create_writer(SinkContext("sink", 0, 1, 0, deployment))
    writer.restore(list(restore))
    return writer


def staged(out: str) -> list[str]:
    folder = _fs.location(out).child(".staging")
    files = (
        []
        if not _fs.is_dir(folder)
        else folder.filesystem.get_file_info(_fs.pafs.FileSelector(folder.path, recursive=True))
    )
    return sorted(f.path for f in files if f.type == _fs.pafs.FileType.File)


def test_a_commit_publishes_whole_files_and_leaves_nothing_staged(s3_server):
    out = s3_server.fresh_uri("out")
    sink = FileSink.for_rows(out)
    sink.prepare()
    writer = new_writer(out, "run1-0")
    writer.write_batch([("apple", 1), "fig"])
    writer.pre_commit(1)
    assert sink.committed_output() == []
    writer.commit(1)
    writer.commit(1)  # twice is harmless
    assert sink.committed_output() == [["apple", 1], "fig"]
    assert staged(out) == []


def test_a_restore_after_a_crash_between_copy_and_delete_commits_once(s3_server):
    out = s3_server.fresh_uri("out")
    FileSink.for_rows(out).prepare()
    crashed = new_writer(out, "run1-0")
    crashed.write_batch([1, 2])
    crashed.pre_commit(1)
    state = crashed.snapshot_state()
    (staged_name, final_name) = state["pending"][0][1]["files"][0]
    source, target = _fs.location(out).child(staged_name), _fs.location(out).child(final_name)
    source.filesystem.copy_file(source.path, target.path)  # the copy happened, the delete not

    new_writer(out, "run1-1", restore=[state])

    assert FileSink.for_rows(out).committed_output() == [1, 2]
    assert staged(out) == []


def test_a_restore_after_the_commit_finished_finds_it_done(s3_server):
    out = s3_server.fresh_uri("out")
    FileSink.for_rows(out).prepare()
    writer = new_writer(out, "run1-0")
    writer.write_batch([1, 2])
    writer.pre_commit(1)
    state = writer.snapshot_state()
    writer.commit(1)  # the staged object is gone now

    new_writer(out, "run1-1", restore=[state])  # the job failed before it learned of it
    new_writer(out, "run1-2", restore=[state])

    assert FileSink.for_rows(out).committed_output() == [1, 2]
