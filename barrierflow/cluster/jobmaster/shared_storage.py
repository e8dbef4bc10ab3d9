"""The submission check that every host running tasks reaches the job's storage.

Tasks write checkpoint state files and sink output, and read sources and restored state,
on the executors' hosts; the JobMaster reads and commits the same folders on the
driver's. A path of the driver's own disk (`file://`, not a network mount) is therefore
usable only when every executor runs on the driver's host (a one-machine standalone or
`local-cluster` master): allowed with a note in the log. With an executor elsewhere the
job is refused before any task starts, naming the path and the fix. Local masters run
every task in the driver's process tree and are not checked.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Callable, Iterable

from barrierflow import _fs
from barrierflow.cluster.jobmaster.job_settings import JobSettings
from barrierflow.errors import ConfigurationError
from barrierflow.graph.job_graph import JobGraph

log = logging.getLogger(__name__)

FIX = (
    "use a path every host reaches: a shared mount (NFS) at the same path on every host, "
    "hdfs://..., or an object store such as s3://bucket/folder"
)


def check_job_storage(
    graph: JobGraph, settings: JobSettings, executor_hosts: Callable[[], Iterable[str]]
) -> None:
    """`check_shared_storage` for the job's own locations on `settings.master`."""
    check_shared_storage(job_storage_locations(graph, settings), settings.master, executor_hosts)


def job_storage_locations(graph: JobGraph, settings: JobSettings) -> list[tuple[str, str]]:
    """(what, URI) of every place the job's tasks read or write: checkpoint storage, the
    savepoint folder and restore path when set, and each source's and sink's locations."""
    found = [("checkpoint storage", settings.checkpoint_storage)]
    if settings.savepoint_dir:
        found.append(("savepoint folder", settings.savepoint_dir))
    if settings.savepoint_restore is not None:
        found.append(("restore path", settings.savepoint_restore.path))
    for vertex in graph.vertices:
        for op in vertex.operators:
            transformation = op.transformation
            if vertex.is_source and op is vertex.operators[0]:
                for uri in transformation.source.storage_locations():
                    found.append((f"input of '{op.name}'", uri))
            if transformation.sink is not None:
                for uri in transformation.sink.storage_locations():
                    found.append((f"output of '{op.name}'", uri))
    return found


def check_shared_storage(
    locations: Iterable[tuple[str, str]],
    master: str | None,
    executor_hosts: Callable[[], Iterable[str]],
    driver_names: Iterable[str] | None = None,
) -> None:
    """Refuse (ConfigurationError naming the path and the fix) a local path when an
    executor runs on a host other than the driver's; log a note when they share it.
    `executor_hosts` (the runner's) is asked only when a local path is found.

    `master` None means the embedded local default or an active session and is not
    checked, like any `local...` master. `driver_names` defaults to this host's names and
    addresses; 127.0.0.1, localhost and any loopback address count as the driver's host.
    """
    if master is None or master == "local" or master.startswith("local["):
        return
    local = [
        (what, uri)
        for what, uri in locations
        if _fs.is_local(loc := _fs.location(uri)) and not _fs.on_network_mount(loc)
    ]
    if not local:
        return
    own = _own_names(driver_names)
    hosts = sorted(set(executor_hosts()))
    elsewhere = [host for host in hosts if not _is_own(host, own)]
    paths = ", ".join(f"the {what} {uri}" for what, uri in local)
    if elsewhere or not hosts:
        where = (
            f"executors run on {', '.join(elsewhere)}, not on the driver's host"
            if elsewhere
            else "no executor has registered, so they may run on other hosts than the driver's"
        )
        raise ConfigurationError(
            f"{paths} {'is' if len(local) == 1 else 'are'} on the driver's local disk, but "
            f"the {where} (master {master}): {FIX}"
        )
    log.info(
        "%s %s on the local disk; allowed because every executor runs on the driver's host "
        "(%s); on a cluster of several hosts, %s",
        paths,
        "is" if len(local) == 1 else "are",
        ", ".join(hosts),
        FIX,
    )


def _own_names(given: Iterable[str] | None) -> set[str]:
    names = {"localhost", "127.0.0.1", "::1"}
    if given is not None:
        return names | {n.lower() for n in given}
    host = socket.gethostname()
    names |= {host.lower(), socket.getfqdn().lower()}
    try:
        canonical, aliases, addresses = socket.gethostbyname_ex(host)
        names |= {canonical.lower(), *(a.lower() for a in aliases), *addresses}
    except OSError:
        pass
    return names


def _is_own(host: str, own: set[str]) -> bool:
    name = host.strip("[]").lower()
    if name in own:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
