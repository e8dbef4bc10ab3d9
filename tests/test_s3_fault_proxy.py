"""What S3 faults reach barrierflow through pyarrow's S3 client, and how barrierflow's reads
classify them (issue 21, item 2), against moto behind the fault-injecting proxy: a 503 on a
GET of a small object surfaces and is retried by the checkpoint reader; other 503s the
client retries itself; a 403 surfaces at once and the reader retries it; a missing object
is FileNotFoundError (damage), never retried."""

from __future__ import annotations

import pytest

from barrierflow import _envelope as envelope
from barrierflow import _fs
from barrierflow.checkpoint import retry
from barrierflow.checkpoint.files import read_checkpoint_file
from barrierflow.checkpoint.retry import Backoff
from barrierflow.errors import CheckpointStorageUnavailableError, StateRestoreError

KIND = "checkpoint-metadata"


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch):
    monkeypatch.setattr(retry, "DEFAULT_BACKOFF", Backoff(attempts=3, first_delay_s=0))


@pytest.fixture
def metadata(s3_faults) -> _fs.Location:
    where = _fs.location(s3_faults.uri(f"proxy-{id(s3_faults)}/chk-7/_metadata"))
    _fs.write_bytes(where, envelope.encode(KIND, {"checkpoint_id": 7}))
    return where


def test_one_503_on_a_get_of_a_small_object_surfaces_and_the_reader_retries_it(s3_faults, metadata):
    rule = s3_faults.fail("GET", r"/chk-7/_metadata$")

    header, _ = read_checkpoint_file(metadata, KIND)

    assert header == {"checkpoint_id": 7}
    assert rule.failed == 1
    gets = [p for m, p in s3_faults.requests if m == "GET" and p.endswith("/_metadata")]
    assert len(gets) == 2  # the client did not retry it; the reader did


def test_503s_outliving_the_reader_s_retries_are_a_storage_fault_not_damage(s3_faults, metadata):
    s3_faults.fail("GET", r"/chk-7/_metadata$", count=3)

    with pytest.raises(CheckpointStorageUnavailableError, match="chk-7/_metadata") as raised:
        read_checkpoint_file(metadata, KIND)

    assert "(3 tries)" in str(raised.value) and "GetObject" in str(raised.value)
    assert read_checkpoint_file(metadata, KIND)[0] == {"checkpoint_id": 7}


def test_the_client_retries_a_503_on_a_delete_itself_but_not_a_403(s3_faults, metadata):
    slow = s3_faults.fail("DELETE", r"/chk-7/_metadata$", count=4)
    _fs.delete_file(metadata)  # four 503s absorbed by the client
    assert slow.failed == 4 and not _fs.exists(metadata)

    _fs.write_bytes(metadata, b"x")
    denied = s3_faults.fail("DELETE", r"/chk-7/_metadata$", status=403)
    with pytest.raises(OSError, match=r"ACCESS_DENIED|AccessDenied|Access Denied"):
        _fs.delete_file(metadata)
    assert denied.failed == 1 and _fs.exists(metadata)


def test_a_missing_object_is_damage_and_read_once(s3_faults, metadata):
    missing = metadata.parent.child("1-0-run.state")
    with pytest.raises(StateRestoreError, match=r"/1-0-run\.state\?[^ ]*: it is missing"):
        read_checkpoint_file(missing, "subtask-state")
    reads = [p for m, p in s3_faults.requests if p.split("?")[0].endswith("/1-0-run.state")]
    assert len(reads) == 1


def test_a_403_on_a_get_of_a_larger_object_surfaces_and_the_reader_retries_it(s3_faults):
    where = _fs.location(s3_faults.uri(f"proxy-large-{id(s3_faults)}/chk-7/_metadata"))
    _fs.write_bytes(where, envelope.encode(KIND, {"pad": "x" * 4096}))
    slow = s3_faults.fail("GET", r"proxy-large-.*/_metadata$", nth=1)  # the client retries
    denied = s3_faults.fail("GET", r"proxy-large-.*/_metadata$", nth=2, status=403)

    assert read_checkpoint_file(where, KIND)[0] == {"pad": "x" * 4096}
    assert (slow.failed, denied.failed) == (1, 1)
