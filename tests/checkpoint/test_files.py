"""Reading one checkpoint file: the envelope comes back, and every failure names the file
(issue 9, defect 6), with real damaged files."""

from __future__ import annotations

import os

import pytest

from barrierflow import _envelope as envelope
from barrierflow import _fs
from barrierflow.checkpoint.files import read_checkpoint_file
from barrierflow.errors import CheckpointStorageError, StateRestoreError

KIND = "subtask-state"


@pytest.fixture
def state_file(tmp_path):
    path = tmp_path / "chk-3" / "state-0"
    path.parent.mkdir()
    path.write_bytes(envelope.encode(KIND, {"version": 1}, b"0123456789"))
    return path


def test_a_sound_file_reads_as_its_header_and_body(state_file):
    header, body = read_checkpoint_file(str(state_file), KIND)

    assert (header, bytes(body)) == ({"version": 1}, b"0123456789")
    assert read_checkpoint_file(_fs.location(state_file), KIND)[0] == {"version": 1}


def test_a_truncated_file_is_named(state_file):
    state_file.write_bytes(state_file.read_bytes()[:-4])

    with pytest.raises(StateRestoreError, match=f"^file://{state_file}: truncated"):
        read_checkpoint_file(str(state_file), KIND)


def test_a_file_with_one_flipped_byte_is_named(state_file):
    data = bytearray(state_file.read_bytes())
    data[-1] ^= 0x01
    state_file.write_bytes(bytes(data))

    with pytest.raises(StateRestoreError, match=f"^file://{state_file}: damaged"):
        read_checkpoint_file(str(state_file), KIND)


def test_a_missing_file_is_named_and_the_os_error_chained(tmp_path):
    missing = tmp_path / "chk-3" / "state-9"

    with pytest.raises(CheckpointStorageError, match=f"file://{missing}") as raised:
        read_checkpoint_file(str(missing), KIND)

    assert isinstance(raised.value.__cause__, FileNotFoundError)


def test_a_folder_in_place_of_the_file_is_named(state_file):
    os.remove(state_file)
    state_file.mkdir()

    with pytest.raises(CheckpointStorageError, match=f"cannot read the '{KIND}' file file://"):
        read_checkpoint_file(str(state_file), KIND)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_a_file_without_read_permission_is_named(state_file):
    state_file.chmod(0)
    try:
        with pytest.raises(CheckpointStorageError, match=f"file://{state_file}"):
            read_checkpoint_file(str(state_file), KIND)
    finally:
        state_file.chmod(0o600)
