"""Where the JobMaster and the tasks listen, and the addresses they give each other.

Two kinds of endpoint matter on a cluster: the JobMaster's RPC endpoint in the driver,
which every task connects to, and each task's data server on its executor, which its
upstream peers connect to. Each has a *bind* address (the interface it listens on) and
an *advertised* address (what the others are told to connect to); they differ when the
bind is a wildcard (0.0.0.0 listens everywhere but names no host) or when the network
translates addresses. On a local master everything stays on loopback.

The settings are Spark conf keys, so they pass through `--conf K=V` of both
`barrierflow run` and `spark-submit`, and the defaults follow Spark's own driver
settings: the JobMaster binds where the driver binds and advertises the driver's host,
which executors already reach (they talk to the driver); a task binds on its executor's
own host as Spark knows it, which the other executors already reach (they fetch blocks
from it). This module is pure: the driver reads conf through a getter, and the task side
is handed what Spark says about its executor.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from barrierflow.cluster.spark.session import is_local_master
from barrierflow.errors import ConfigurationError
from barrierflow.runtime.network.task_channels import is_wildcard

RPC_BIND_KEY = "spark.barrierflow.rpc.bindAddress"
"""Where the JobMaster's RPC endpoint (and its REST endpoint) listens."""
RPC_ADVERTISED_KEY = "spark.barrierflow.rpc.advertisedAddress"
"""The address the tasks are told to connect to the JobMaster at."""
TASK_BIND_KEY = "spark.barrierflow.task.bindAddress"
"""Where every task's data server listens (default: its executor's host)."""
LOOPBACK = "127.0.0.1"

ConfGet = Callable[[str, str | None], str | None]
"""A key and a default -> the value (the default if unset): `session.conf_getter`'s."""


@dataclass(frozen=True)
class JobAddresses:
    """The addresses a job's JobMaster and tasks use, resolved once on the driver."""

    rpc_bind: str
    rpc_advertised: str
    task_bind: str | None
    """Where each task's data server binds; None: its executor's own host."""


LOCAL_ADDRESSES = JobAddresses(LOOPBACK, LOOPBACK, LOOPBACK)
"""A local master: driver and tasks share the machine, everything on loopback."""


def resolve_addresses(master: str, conf: ConfGet) -> JobAddresses:
    """The addresses of a job on Spark `master`, from the Spark conf.

    >>> conf = {"spark.driver.host": "driver.example", "spark.driver.bindAddress": "0.0.0.0"}
    >>> resolve_addresses("yarn", lambda key, default: conf.get(key, default))
    JobAddresses(rpc_bind='0.0.0.0', rpc_advertised='driver.example', task_bind=None)
    >>> resolve_addresses("local[4]", lambda key, default: conf.get(key, default))
    JobAddresses(rpc_bind='127.0.0.1', rpc_advertised='127.0.0.1', task_bind='127.0.0.1')
    """

    def get(key: str) -> str | None:
        value = conf(key, None)
        if value is None:
            return None
        return value.strip() or None

    local = is_local_master(master)
    explicit_bind = get(RPC_BIND_KEY)
    driver_host = get("spark.driver.host")
    if explicit_bind is not None:
        bind = explicit_bind
    elif local:
        bind = LOOPBACK
    else:
        bind = get("spark.driver.bindAddress") or driver_host or ""
    if not bind:
        raise ConfigurationError(
            f"cannot tell where the JobMaster should listen: Spark master {master} sets no "
            f"spark.driver.host; set spark.driver.host or {RPC_BIND_KEY}"
        )
    advertised = get(RPC_ADVERTISED_KEY)
    if advertised is None:
        if explicit_bind is not None and not is_wildcard(explicit_bind):
            advertised = explicit_bind
        elif local:
            advertised = LOOPBACK
        else:
            advertised = driver_host or bind
    if is_wildcard(advertised):
        raise ConfigurationError(
            f"the JobMaster listens on {bind} and would tell the executors to connect to "
            f"{advertised}, which names no host; set {RPC_ADVERTISED_KEY} (or "
            f"spark.driver.host) to the driver's address the executors can reach"
        )
    task_bind = get(TASK_BIND_KEY) or (LOOPBACK if local else None)
    return JobAddresses(bind, advertised, task_bind)


# ---- the task side --------------------------------------------------------------------------


def host_of(address: str) -> str:
    """The host part of a `host:port` address (brackets of an IPv6 address dropped).

    >>> host_of("10.0.0.7:40123"), host_of("[fe80::1]:40123"), host_of("worker-1")
    ('10.0.0.7', 'fe80::1', 'worker-1')
    """
    if address.startswith("["):
        return address[1:].partition("]")[0]
    host, sep, port = address.rpartition(":")
    return host if sep and port.isdigit() and ":" not in host else address


def choose_executor_host(
    task_address: str | None, environ: Mapping[str, str], fallback: Callable[[], str]
) -> str:
    """The host an executor is known by: what Spark says about its barrier task's executor
    (`task_address`, host:port), else SPARK_LOCAL_HOSTNAME or SPARK_LOCAL_IP as Spark would
    use them, else `fallback()` (the machine's name).

    >>> choose_executor_host("10.0.0.7:40123", {"SPARK_LOCAL_IP": "10.9.9.9"}, lambda: "h")
    '10.0.0.7'
    >>> choose_executor_host(None, {"SPARK_LOCAL_IP": "10.9.9.9"}, lambda: "h")
    '10.9.9.9'
    >>> choose_executor_host(None, {}, lambda: "h")
    'h'
    """
    if task_address:
        host = host_of(task_address.strip())
        if host and not is_wildcard(host):
            return host
    for key in ("SPARK_LOCAL_HOSTNAME", "SPARK_LOCAL_IP"):
        value = environ.get(key, "").strip()
        if value and not is_wildcard(value):
            return value
    return fallback()


def executor_host() -> str:
    """The host of the executor this code runs on (in a Spark barrier task)."""
    return choose_executor_host(_barrier_task_address(), os.environ, socket.gethostname)


def _barrier_task_address() -> str | None:
    """Spark's address of this barrier task's executor; None outside a barrier task."""
    try:
        from pyspark import BarrierTaskContext

        context = BarrierTaskContext.get()
        return context.getTaskInfos()[context.partitionId()].address
    except Exception:  # not in a barrier task (tests), or an older pyspark
        return None
