"""This host's processes of a running job, found and killed: the executor JVM above a Spark
task's Python worker (read from /proc, or `ps` where there is none) and a SIGKILL of a
process on this host. `JobClient`'s kill methods (the failure kinds kill, executor and jvm
of `barrierflow chaos`, and tests) use them; the facade keeps only the user's API."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import Callable

from barrierflow.errors import ConfigurationError

__all__ = [
    "EXECUTOR_JVM_MARKERS",
    "check_this_host",
    "executor_jvm_of",
    "kill_local",
    "parent_and_command",
]

EXECUTOR_JVM_MARKERS = ("org.apache.spark.executor.", "CoarseGrainedExecutorBackend")
"""What an executor JVM's command line names (its main class), and a driver's does not."""


def check_this_host(host: str) -> None:
    if host != socket.gethostname():
        raise ConfigurationError(f"task runs on {host}; only local task processes can be killed")


def kill_local(host: str, pid: int) -> int:
    """SIGKILL process `pid` if it runs on this host; returns the pid."""
    check_this_host(host)
    os.kill(pid, signal.SIGKILL)
    return pid


def executor_jvm_of(
    pid: int, read_process: Callable[[int], tuple[int, str] | None] | None = None
) -> int:
    """The pid of the executor JVM that `pid` (a Spark task's Python worker) descends from.

    Spark starts Python workers from the executor JVM (through pyspark's daemon), so the
    first `java` ancestor is the JVM that runs the task. On `local[N]` that ancestor is the
    driver's own JVM: no executor JVM exists, and killing it would end the job, so that is
    refused. `read_process(pid)` gives (parent pid, command line) or None (gone); the default
    reads /proc, or `ps` where there is no /proc.

    >>> table = {40: (30, "python -m pyspark.daemon"), 30: (20, "java -cp x "
    ...     "org.apache.spark.executor.CoarseGrainedExecutorBackend --executor-id 1"),
    ...     20: (1, "java -cp x org.apache.spark.deploy.SparkSubmit pyspark-shell")}
    >>> ps = lambda pid: table.get(pid) or (40, "python worker")
    >>> executor_jvm_of(41, ps)
    30
    >>> del table[30]; table[40] = (20, "python -m pyspark.daemon")
    >>> executor_jvm_of(41, ps)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    barrierflow.errors.ConfigurationError: the Spark task (pid 41) runs inside the driver's ...
    """
    read = read_process or parent_and_command
    current: int | None = pid
    seen: set[int] = set()
    while current is not None and current > 1 and current not in seen:
        seen.add(current)
        process = read(current)
        if process is None:
            break
        parent, command = process
        if any(marker in command for marker in EXECUTOR_JVM_MARKERS):
            return current
        if _is_java(command):
            raise ConfigurationError(
                f"the Spark task (pid {pid}) runs inside the driver's JVM (pid {current}), as on "
                "a local[N] master: there is no executor JVM to kill; run on "
                "local-cluster[W,C,M] or a cluster master, or leave the failure kind jvm out"
            )
        current = parent
    raise ConfigurationError(f"no executor JVM found above the Spark task's process {pid}")


def _is_java(command: str) -> bool:
    program = command.split(" ", 1)[0]
    return os.path.basename(program) == "java"


def parent_and_command(pid: int) -> tuple[int, str] | None:
    """(parent pid, command line) of a process on this host, or None if it is gone."""
    proc = f"/proc/{pid}"
    if os.path.isdir("/proc/self"):
        try:
            with open(f"{proc}/stat", encoding="utf-8", errors="replace") as stat:
                # "pid (comm) state ppid ...": comm may hold spaces and parentheses
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            with open(f"{proc}/cmdline", "rb") as cmdline:
                command = cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, ValueError, IndexError):
            return None
        return parent, command
    result = subprocess.run(
        ["ps", "-o", "ppid=", "-o", "command=", "-p", str(pid)],
        capture_output=True,
        text=True,
        check=False,
    )
    fields = result.stdout.strip().split(None, 1)
    if result.returncode != 0 or not fields:
        return None
    return int(fields[0]), fields[1] if len(fields) > 1 else ""
