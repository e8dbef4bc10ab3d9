"""The filesystem layer: locations keep their options, commits are atomic on every store."""

from __future__ import annotations

import pytest

from barrierflow import _fs


def test_a_child_goes_before_the_query_string():
    folder = _fs.location("s3://k:s@b/chk?endpoint_override=127.0.0.1:9000&scheme=http")
    child = folder.child("job", "chk-3", "_metadata")
    assert child.uri == (
        "s3://k:s@b/chk/job/chk-3/_metadata?endpoint_override=127.0.0.1:9000&scheme=http"
    )
    assert child.name == "_metadata"
    assert child.parent.parent == folder.child("job")


def test_a_question_mark_in_a_local_path_is_part_of_the_name(tmp_path):
    folder = _fs.location(tmp_path / "what?")
    assert folder.child("x").uri == f"file://{tmp_path}/what?/x"
    assert folder.child("x").path == f"{tmp_path}/what?/x"


def test_a_folder_holds_what_lies_below_it_with_the_same_options():
    folder = _fs.Location("s3://b/chk-7/?scheme=http")
    assert folder.holds("s3://b/chk-7/1-0-a.state?scheme=http")
    assert not folder.holds("s3://b/chk-70/1-0-a.state?scheme=http")
    assert not folder.holds("s3://b/chk-7/1-0-a.state?scheme=https")


def test_a_local_write_atomic_leaves_only_the_file(tmp_path):
    target = _fs.location(tmp_path / "_metadata")
    assert _fs.supports_atomic_rename(target)
    _fs.write_atomic(target, b"one")
    _fs.write_atomic(target, b"two")
    assert [p.name for p in tmp_path.iterdir()] == ["_metadata"]
    assert _fs.read_bytes(target) == b"two"


def test_a_local_commit_renames_and_a_repeated_one_finds_it_done(tmp_path):
    staged, final = _fs.location(tmp_path / ".staged"), _fs.location(tmp_path / "final")
    _fs.write_bytes(staged, b"rows")
    _fs.commit_file(staged, final)
    _fs.commit_file(staged, final)
    assert [p.name for p in tmp_path.iterdir()] == ["final"]
    with pytest.raises(FileNotFoundError):
        _fs.commit_file(staged, _fs.location(tmp_path / "other"))


# ---- on an S3-compatible server --------------------------------------------------------------


def test_s3_has_no_atomic_rename_and_a_commit_object_is_one_upload(s3_server):
    folder = _fs.location(s3_server.fresh_uri())
    target = folder.child("chk-1", "_metadata")
    assert not _fs.supports_atomic_rename(target)
    _fs.make_dirs(target.parent)
    _fs.write_atomic(target, b"metadata")
    assert _fs.list_dir(target.parent) == ["_metadata"]  # no temporary object left behind
    assert _fs.read_bytes(target) == b"metadata"


def test_s3_commit_copies_then_deletes_and_repeats_after_a_crash_between(s3_server):
    folder = _fs.location(s3_server.fresh_uri())
    staged, final = folder.child(".staging", "part-0"), folder.child("part-0")
    _fs.make_dirs(staged.parent)
    _fs.write_bytes(staged, b"rows\n")
    staged.filesystem.copy_file(staged.path, final.path)  # the crash: copied, not deleted
    _fs.commit_file(staged, final)
    assert not _fs.exists(staged)
    _fs.commit_file(staged, final)  # once more after a crash that followed the delete
    assert _fs.read_bytes(final) == b"rows\n"
    assert _fs.list_files_recursive(folder) == ["part-0"]


def test_s3_folders_list_and_delete(s3_server):
    folder = _fs.location(s3_server.fresh_uri())
    _fs.make_dirs(folder.child("chk-1"))
    _fs.write_bytes(folder.child("chk-1", "a.state"), b"x")
    _fs.write_bytes(folder.child("chk-2", "b.state"), b"y")
    assert _fs.list_dir(folder) == ["chk-1", "chk-2"]
    assert _fs.is_dir(folder.child("chk-2")) and _fs.is_file(folder.child("chk-2", "b.state"))
    _fs.delete_dir(folder.child("chk-1"))
    assert _fs.list_dir(folder) == ["chk-2"]
