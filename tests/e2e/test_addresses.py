"""Addresses on Spark: an unreachable advertised JobMaster address fails the job fast with the
setting to fix, and tasks binding every interface register an address peers can use."""

from __future__ import annotations

import time

import pytest

from barrierflow.cluster.addresses import (
    RPC_ADVERTISED_KEY,
    TASK_BIND_KEY,
    JobAddresses,
    resolve_addresses,
)
from barrierflow.cluster.jobmaster import attempt as attempt_module
from barrierflow.errors import JobExecutionError, JobMasterUnreachableError
from barrierflow.runtime.network.task_channels import is_wildcard

from .conftest import read_rows
from .jobs import paced_word_count, running_count_rows, word_of

pytestmark = pytest.mark.spark

FAIL_FAST_S = 55.0
"""Below the 60 s a task waits to connect (`connect_timeout_s`), the quickest slow failure,
with the Spark stage's start on a busy machine left room."""
RECORDS = 400


@pytest.fixture
def conf(spark):
    """Set Spark conf keys on the shared session for one test; unset afterwards."""
    keys: list[str] = []

    def set_key(key: str, value: str) -> None:
        keys.append(key)
        spark.conf.set(key, value)

    yield set_key
    for key in keys:
        spark.conf.unset(key)


def test_the_session_conf_names_the_driver_addresses_a_cluster_master_would_use(spark, conf):
    # spark.conf.get sees the SparkConf the session started with (the driver's settings)
    # as well as keys set at runtime: resolve_addresses reads both through it.
    assert resolve_addresses("spark://elsewhere:7077", spark.conf.get) == JobAddresses(
        "127.0.0.1", "127.0.0.1", None
    )
    conf(RPC_ADVERTISED_KEY, "10.1.2.3")
    assert resolve_addresses("yarn", spark.conf.get).rpc_advertised == "10.1.2.3"


def test_an_unreachable_advertised_address_fails_the_job_fast_naming_the_setting(
    spark, conf, tmp_path
):
    # The JobMaster binds 127.0.0.1 (a local master); 127.0.0.2 is loopback too, but nothing
    # listens there, so every task's connection is refused.
    conf(RPC_ADVERTISED_KEY, "127.0.0.2")
    env = paced_word_count(tmp_path, RECORDS, None)
    started = time.monotonic()
    with pytest.raises(JobExecutionError) as raised:
        env.execute("unreachable-jobmaster")
    elapsed = time.monotonic() - started
    print(f"the job failed after {elapsed:.1f} s")
    assert elapsed < FAIL_FAST_S
    message = str(raised.value)
    assert "\n" not in message
    assert "cannot reach the JobMaster at 127.0.0.2:" in message
    assert f"set {RPC_ADVERTISED_KEY}" in message
    assert isinstance(raised.value.__cause__, JobMasterUnreachableError)
    assert not (tmp_path / "out").exists() or not read_rows(tmp_path / "out")


def test_tasks_binding_every_interface_register_their_executor_host(
    spark, conf, tmp_path, monkeypatch
):
    registered: list[tuple[str, int]] = []
    register = attempt_module.Attempt._register

    def recording(self, conn, message):
        registered.append(message.data_address)
        register(self, conn, message)

    monkeypatch.setattr(attempt_module.Attempt, "_register", recording)
    conf(TASK_BIND_KEY, "0.0.0.0")
    env = paced_word_count(tmp_path, RECORDS, None)
    env.execute("wildcard-task-bind")

    assert len(registered) == 4  # parallelism 2: two source and two counting subtasks
    assert all(not is_wildcard(host) for host, _ in registered), registered
    assert read_rows(tmp_path / "out") == running_count_rows(word_of(i) for i in range(RECORDS))
