"""Where the JobMaster and the tasks listen and what they advertise (cluster/addresses.py):
every default, every explicit setting and every refused combination."""

from __future__ import annotations

import pytest

from barrierflow.cluster.addresses import (
    LOCAL_ADDRESSES,
    RPC_ADVERTISED_KEY,
    RPC_BIND_KEY,
    TASK_BIND_KEY,
    JobAddresses,
    choose_executor_host,
    executor_host,
    host_of,
    resolve_addresses,
)
from barrierflow.cluster.spark.runner import SparkAttemptRunner
from barrierflow.errors import ConfigurationError
from barrierflow.runtime.network.task_channels import data_addresses

DRIVER = {"spark.driver.host": "driver.example"}


def resolve(master: str, **conf: str) -> JobAddresses:
    """The addresses with `conf` as the session's Spark conf (keys with dots as given)."""
    values = {key.replace("__", "."): value for key, value in conf.items()}
    return resolve_addresses(master, lambda key, default: values.get(key, default))


def conf_of(*pairs: dict[str, str]) -> dict[str, str]:
    merged: dict[str, str] = {}
    for pair in pairs:
        merged.update(pair)
    return {key.replace(".", "__"): value for key, value in merged.items()}


# ---- local masters: loopback everywhere --------------------------------------------------------


@pytest.mark.parametrize("master", ["local", "local[4]", "local[*]"])
def test_a_local_master_keeps_everything_on_loopback(master):
    assert resolve(master, **conf_of(DRIVER)) == LOCAL_ADDRESSES
    assert JobAddresses("127.0.0.1", "127.0.0.1", "127.0.0.1") == LOCAL_ADDRESSES


def test_a_local_master_honours_explicit_settings():
    addresses = resolve(
        "local[2]", **conf_of({RPC_ADVERTISED_KEY: "127.0.0.2", TASK_BIND_KEY: "0.0.0.0"})
    )
    assert addresses == JobAddresses("127.0.0.1", "127.0.0.2", "0.0.0.0")


def test_a_local_master_with_a_wildcard_bind_advertises_loopback():
    addresses = resolve("local[2]", **conf_of({RPC_BIND_KEY: "0.0.0.0"}))
    assert (addresses.rpc_bind, addresses.rpc_advertised) == ("0.0.0.0", "127.0.0.1")


# ---- cluster masters: the driver's own settings ------------------------------------------------


@pytest.mark.parametrize("master", ["spark://10.0.0.1:7077", "yarn", "k8s://https://api:6443"])
def test_a_cluster_master_binds_and_advertises_the_driver_host(master):
    addresses = resolve(master, **conf_of(DRIVER))
    assert addresses == JobAddresses("driver.example", "driver.example", None)


def test_a_cluster_master_binds_where_the_driver_binds():
    conf = conf_of(DRIVER, {"spark.driver.bindAddress": "0.0.0.0"})
    assert resolve("yarn", **conf) == JobAddresses("0.0.0.0", "driver.example", None)


def test_an_explicit_bind_address_is_advertised_unless_it_is_a_wildcard():
    assert resolve("yarn", **conf_of(DRIVER, {RPC_BIND_KEY: "10.1.2.3"})).rpc_advertised == (
        "10.1.2.3"
    )
    wildcard = resolve("yarn", **conf_of(DRIVER, {RPC_BIND_KEY: "0.0.0.0"}))
    assert (wildcard.rpc_bind, wildcard.rpc_advertised) == ("0.0.0.0", "driver.example")


def test_explicit_bind_and_advertised_addresses_win():
    conf = conf_of(DRIVER, {RPC_BIND_KEY: "0.0.0.0", RPC_ADVERTISED_KEY: "gateway.example"})
    assert resolve("spark://m:7077", **conf) == JobAddresses("0.0.0.0", "gateway.example", None)


def test_the_task_bind_address_is_the_executor_host_unless_set():
    assert resolve("yarn", **conf_of(DRIVER)).task_bind is None
    assert resolve("yarn", **conf_of(DRIVER, {TASK_BIND_KEY: "0.0.0.0"})).task_bind == "0.0.0.0"


def test_blank_settings_count_as_unset():
    conf = conf_of(DRIVER, {RPC_BIND_KEY: " ", RPC_ADVERTISED_KEY: "", TASK_BIND_KEY: ""})
    assert resolve("yarn", **conf) == JobAddresses("driver.example", "driver.example", None)


# ---- refused -----------------------------------------------------------------------------------


@pytest.mark.parametrize("wildcard", ["0.0.0.0", "::"])
def test_a_wildcard_advertised_address_is_refused_naming_the_key(wildcard):
    with pytest.raises(ConfigurationError, match=f"names no host; set {RPC_ADVERTISED_KEY}"):
        resolve("yarn", **conf_of(DRIVER, {RPC_ADVERTISED_KEY: wildcard}))


def test_a_wildcard_bind_with_nothing_to_advertise_is_refused():
    # spark.driver.host missing, the driver binding everywhere: nothing names the driver
    with pytest.raises(ConfigurationError, match=RPC_ADVERTISED_KEY):
        resolve("yarn", **conf_of({"spark.driver.bindAddress": "0.0.0.0"}))


def test_a_cluster_master_without_any_driver_address_is_refused():
    with pytest.raises(ConfigurationError, match=f"spark.driver.host or {RPC_BIND_KEY}"):
        resolve("yarn")


# ---- the task side -----------------------------------------------------------------------------


def test_host_of_drops_the_port():
    assert host_of("10.0.0.7:40123") == "10.0.0.7"
    assert host_of("worker-1.example:1") == "worker-1.example"
    assert host_of("[fe80::1]:40123") == "fe80::1"
    assert host_of("worker-1") == "worker-1"


def test_the_executor_host_is_what_spark_says_then_spark_s_environment_then_the_name():
    name = lambda: "machine"  # noqa: E731
    environ = {"SPARK_LOCAL_HOSTNAME": "named.example", "SPARK_LOCAL_IP": "10.9.9.9"}
    assert choose_executor_host("10.0.0.7:5000", environ, name) == "10.0.0.7"
    assert choose_executor_host(None, environ, name) == "named.example"
    assert choose_executor_host("", {"SPARK_LOCAL_IP": "10.9.9.9"}, name) == "10.9.9.9"
    assert choose_executor_host("0.0.0.0:5000", {"SPARK_LOCAL_IP": "0.0.0.0"}, name) == "machine"
    assert choose_executor_host(None, {}, name) == "machine"


def test_outside_a_barrier_task_the_executor_host_falls_back(monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_IP", "10.4.4.4")
    monkeypatch.delenv("SPARK_LOCAL_HOSTNAME", raising=False)
    assert executor_host() == "10.4.4.4"


def test_a_task_advertises_its_executor_host_when_it_binds_a_wildcard():
    assert data_addresses("0.0.0.0", "worker-1") == ("0.0.0.0", "worker-1")
    assert data_addresses(None, "worker-1") == ("worker-1", "worker-1")
    assert data_addresses("10.0.0.9", "worker-1") == ("10.0.0.9", "10.0.0.9")
    assert data_addresses("127.0.0.1", "worker-1") == ("127.0.0.1", "127.0.0.1")


# ---- the runner reads them from the context's conf ---------------------------------------------


class _Conf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)


class _Context:
    """What SparkAttemptRunner reads of a SparkContext: its master and its conf."""

    def __init__(self, master: str, values: dict[str, str]) -> None:
        self.master = master
        self._conf = _Conf(values)

    def getConf(self) -> _Conf:
        return self._conf


def test_the_spark_runner_resolves_the_addresses_from_the_context_conf():
    sc = _Context("spark://m:7077", {**DRIVER, TASK_BIND_KEY: "0.0.0.0"})
    runner = SparkAttemptRunner(sc, 2, "job", lambda mail: None)
    assert runner.addresses == JobAddresses("driver.example", "driver.example", "0.0.0.0")


def test_the_spark_runner_refuses_a_wildcard_advertised_address_before_any_task_starts():
    sc = _Context("yarn", {**DRIVER, RPC_ADVERTISED_KEY: "0.0.0.0"})
    with pytest.raises(ConfigurationError, match=RPC_ADVERTISED_KEY):
        SparkAttemptRunner(sc, 2, "job", lambda mail: None)
