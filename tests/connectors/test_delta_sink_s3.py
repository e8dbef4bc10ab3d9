"""DeltaSink on an S3-compatible server (moto): files written through the table's storage
options, one commit per checkpoint, a repeated commit skipped."""

from __future__ import annotations

import uuid

import pytest

from barrierflow.connectors.base import SinkContext
from barrierflow.connectors.delta import DeltaSink

deltalake = pytest.importorskip("deltalake")


def storage_options(s3_server) -> dict[str, str]:
    """What `deltalake` (object_store) needs to reach the test server."""
    from support.s3_server import ACCESS_KEY, REGION, SECRET_KEY

    return {
        "AWS_ENDPOINT_URL": f"http://{s3_server.endpoint}",
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": REGION,
        "AWS_ALLOW_HTTP": "true",
    }


def test_rows_reach_a_table_in_a_bucket_once_even_when_a_commit_is_repeated(s3_server):
    options = storage_options(s3_server)
    uri = f"s3://{s3_server.bucket}/delta-{uuid.uuid4().hex[:12]}"
    sink = DeltaSink.for_path(uri, options)
    sink.prepare()
    writer = sink.create_writer(SinkContext("delta", 0, 1, 0, "run1-0", "s3-job"))
    writer.restore([])
    writer.write_batch([{"n": 1}, {"n": 2}])
    writer.pre_commit(1)
    snapshot = writer.snapshot_state()
    writer.commit(1)

    again = DeltaSink.for_path(uri, options)
    again.create_writer(SinkContext("delta", 0, 1, 0, "run1-1", "s3-job", 1)).restore([snapshot])

    table = deltalake.DeltaTable(uri, storage_options=options)
    assert table.transaction_version("s3-job/delta/0") == 1
    assert table.version() == 1  # its creation, then the one commit (not repeated)
    assert sorted(row["n"] for row in again.committed_output()) == [1, 2]
