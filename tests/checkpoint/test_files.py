"""Reading one checkpoint file: the envelope comes back, and every failure names the file
(issue 9, defect 6), with real damaged files."""

from __future__ import annotations

import os

import pytest

from barrierflow import _envelope as envelope
from barrierflow import _fs
from barrierflow.checkpoint import retry
from barrierflow.checkpoint.files import read_checkpoint_file, read_storage
from barrierflow.checkpoint.retry import Backoff
from barrierflow.errors import (
    CheckpointStorageError,
    CheckpointStorageUnavailableError,
    ExternalSystemUnavailableError,
    StateRestoreError,
)

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


@pytest.fixture
def quick_retries(monkeypatch):
    """Two tries without a wait, so a storage fault gives up at once."""
    monkeypatch.setattr(retry, "DEFAULT_BACKOFF", Backoff(attempts=2, first_delay_s=0))


def test_a_missing_file_is_damage_named_and_the_os_error_chained(tmp_path):
    missing = tmp_path / "chk-3" / "state-9"

    with pytest.raises(StateRestoreError, match=f"file://{missing}: it is missing") as raised:
        read_checkpoint_file(str(missing), KIND)

    assert isinstance(raised.value.__cause__, FileNotFoundError)
    assert raised.value.file == f"file://{missing}"


def test_a_folder_in_place_of_the_file_is_a_storage_error_named(state_file, quick_retries):
    os.remove(state_file)
    state_file.mkdir()

    with pytest.raises(CheckpointStorageUnavailableError, match=f"'{KIND}' file file://"):
        read_checkpoint_file(str(state_file), KIND)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_a_file_without_read_permission_is_named(state_file, quick_retries):
    state_file.chmod(0)
    try:
        with pytest.raises(CheckpointStorageUnavailableError, match=f"file://{state_file}"):
            read_checkpoint_file(str(state_file), KIND)
    finally:
        state_file.chmod(0o600)


def test_a_bad_uri_is_a_storage_error_neither_damage_nor_transient():
    with pytest.raises(CheckpointStorageError, match="no-such-scheme://x/_metadata") as raised:
        read_checkpoint_file("no-such-scheme://x/_metadata", KIND)

    assert not isinstance(raised.value, CheckpointStorageUnavailableError)


def test_transient_faults_are_retried_and_the_file_read(state_file):
    faults = _fs.FaultInjector.parse(f"read:*{state_file.name}:1:2")
    remove = _fs.add_hook(faults)
    waits: list[float] = []
    try:
        read = read_storage(
            lambda: _fs.read_bytes(_fs.location(state_file)),
            _fs.location(state_file),
            "the file",
            Backoff(attempts=3, first_delay_s=0.5),
            waits.append,
        )
    finally:
        remove()

    assert read == state_file.read_bytes()
    assert waits == [0.5, 1.0]


def test_faults_outliving_the_retries_are_unavailable_storage_not_damage(state_file):
    remove = _fs.add_hook(_fs.FaultInjector.parse(f"read:*{state_file.name}:1:9"))
    waits: list[float] = []
    try:
        with pytest.raises(CheckpointStorageUnavailableError) as raised:
            read_storage(
                lambda: _fs.read_bytes(_fs.location(state_file)),
                _fs.location(state_file),
                "the file",
                Backoff(attempts=3, first_delay_s=0.5),
                waits.append,
            )
    finally:
        remove()

    error = raised.value
    assert waits == [0.5, 1.0]
    assert isinstance(error, ExternalSystemUnavailableError)  # the restart strategy decides
    assert not isinstance(error, StateRestoreError)
    assert error.file == f"file://{state_file}"
    assert str(error).startswith(f"storage error reading the file file://{state_file} (3 tries)")
    assert "injected storage fault: read" in str(error)
