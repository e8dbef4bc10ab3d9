"""The submission check: a local checkpoint or output path is refused when an executor
runs on another host, allowed with a note when all share the driver's."""

from __future__ import annotations

import dataclasses
import logging
import socket

import pytest
from job_master_builder import FakeSparkRunner, JobHarness

from barrierflow import WatermarkStrategy, _fs
from barrierflow.api.environment import StreamExecutionEnvironment
from barrierflow.api.restart_strategies import RestartStrategies
from barrierflow.cluster.jobmaster.shared_storage import check_shared_storage, job_storage_locations
from barrierflow.connectors.files import FileSink, FileSource
from barrierflow.errors import ConfigurationError

DRIVER = {"driver-host", "10.0.0.1"}


def check(locations, hosts, master="spark://master:7077"):
    check_shared_storage(locations, master, lambda: hosts, driver_names=DRIVER)


def test_a_local_path_with_an_executor_on_another_host_is_refused_naming_path_and_fix():
    with pytest.raises(ConfigurationError) as refused:
        check([("checkpoint storage", "/data/chk")], {"driver-host", "worker-2"})
    message = str(refused.value)
    assert "the checkpoint storage /data/chk" in message
    assert "worker-2" in message and "spark://master:7077" in message
    assert "NFS" in message and "hdfs://" in message and "s3://" in message


def test_local_cluster_is_a_cluster_master_and_is_checked():
    with pytest.raises(ConfigurationError, match="output of 'sink'"):
        check([("output of 'sink'", "/out")], {"worker-2"}, master="local-cluster[2,1,1024]")


def test_every_executor_on_the_driver_host_is_allowed_with_a_note(caplog):
    caplog.set_level(logging.INFO, logger="barrierflow.cluster.jobmaster.shared_storage")
    check([("checkpoint storage", "/data/chk")], {"driver-host", "127.0.0.1", "localhost"})
    assert "every executor runs on the driver's host" in caplog.text
    assert "/data/chk" in caplog.text


def test_any_loopback_address_and_the_driver_ip_count_as_the_driver_host():
    check([("checkpoint storage", "/data/chk")], {"127.0.1.1", "10.0.0.1", "[::1]"})


def test_no_registered_executor_is_refused_for_a_local_path():
    with pytest.raises(ConfigurationError, match="no executor has registered"):
        check([("checkpoint storage", "/data/chk")], set())


def test_shared_storage_and_local_masters_are_not_checked():
    def never_asked():
        raise AssertionError("executor hosts asked for")

    remote = [("checkpoint storage", "s3://bucket/chk"), ("output", "hdfs://nn:8020/out")]
    check_shared_storage(remote, "spark://m:7077", never_asked)
    for master in (None, "local", "local[4]"):
        check_shared_storage([("checkpoint storage", "/chk")], master, never_asked)


def test_a_path_on_a_network_mount_is_shared(tmp_path):
    mounts = tmp_path / "mounts"
    mounts.write_text(
        "/dev/sda1 / ext4 rw 0 0\nserver:/export /mnt/shared nfs4 rw 0 0\n"
        "/dev/sdb1 /mnt/shared/local ext4 rw 0 0\n"
    )
    assert _fs.on_network_mount(_fs.location("/mnt/shared/chk"), str(mounts))
    assert not _fs.on_network_mount(_fs.location("/mnt/shared/local/chk"), str(mounts))
    assert not _fs.on_network_mount(_fs.location("/mnt/sharedness"), str(mounts))


def test_the_job_locations_are_checkpoints_savepoints_sources_and_sinks(tmp_path):
    env = StreamExecutionEnvironment()
    lines = FileSource.for_lines(str(tmp_path / "in"))
    env.from_source(lines, WatermarkStrategy.no_watermarks(), "lines").sink_to(
        FileSink.for_rows("s3://bucket/out")
    ).name("rows")
    harness = JobHarness(tmp_path, RestartStrategies.no_restart())
    settings = dataclasses.replace(harness.master.settings, savepoint_dir="/sp")
    found = dict(
        (uri, what) for what, uri in job_storage_locations(env.get_job_graph("j"), settings)
    )
    assert found == {
        str(tmp_path / "checkpoints"): "checkpoint storage",
        "/sp": "savepoint folder",
        f"file://{tmp_path / 'in'}": "input of 'lines'",
        "s3://bucket/out": "output of 'rows'",
    }


def test_the_job_master_refuses_before_any_attempt(tmp_path, monkeypatch):
    monkeypatch.setattr(FakeSparkRunner, "executor_hosts", lambda self: frozenset({"far-away"}))
    harness = JobHarness(tmp_path, RestartStrategies.no_restart())
    harness.master.settings = dataclasses.replace(harness.master.settings, master="spark://m:7077")
    with pytest.raises(ConfigurationError, match=r"checkpoint storage .* far-away"):
        harness.start()
    assert harness.runner.submitted == []
    assert harness.master.status.state == "FAILED"


def test_the_job_master_starts_when_the_executors_share_its_host(tmp_path):
    harness = JobHarness(tmp_path, RestartStrategies.no_restart())
    harness.master.settings = dataclasses.replace(harness.master.settings, master="spark://m:7077")
    assert socket.gethostname() in harness.start().runner.executor_hosts()
    assert harness.runner.submitted
