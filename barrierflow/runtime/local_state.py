"""Where a subtask keeps on-disk keyed state on its host, and removing what dead tasks left.

Each subtask of each attempt gets its own folder, `<root>/barrierflow-state/<run>-<attempt>-
<vertex>.<subtask>-pid<pid>-<host>` (root: the backend's `local_dir`, else the task
process's temporary folder). Its chain deletes it when it closes or aborts; a task process
that is killed cannot, so every chain that opens on a host first deletes the folders of
that host whose process is gone (never a living one: a folder of another host, of
another user's process, or of a pid this host cannot check, stays).

>>> from barrierflow.core.state_backends import EmbeddedRocksDBStateBackend
>>> from barrierflow.runtime.deployment import SubtaskId
>>> folder = local_state_dir(EmbeddedRocksDBStateBackend(local_dir="/ssd"), "ab12-3",
...                          SubtaskId(2, 1), pid=77, host="node-4")
>>> str(folder)
'/ssd/barrierflow-state/ab12-3-2.1-pid77-node-4'
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import tempfile
from pathlib import Path

from barrierflow.core.state_backends import StateBackend
from barrierflow.runtime.deployment import SubtaskId

log = logging.getLogger(__name__)

FOLDER = "barrierflow-state"
"""The folder below the root that holds every subtask's local state folder."""

_OWNER = re.compile(r"-pid(\d+)-(.+)$")
"""The process and host at the end of a subtask's folder name."""


def local_state_dir(
    backend: StateBackend,
    deployment_id: str,
    subtask: SubtaskId,
    pid: int | None = None,
    host: str | None = None,
) -> Path:
    """The local state folder of `subtask` in the attempt `deployment_id` (run and attempt)
    run by process `pid` on `host` (default: this process on this host); see the module
    docstring."""
    root = getattr(backend, "local_dir", None) or tempfile.gettempdir()
    pid = os.getpid() if pid is None else pid
    return Path(root) / FOLDER / f"{deployment_id}-{subtask}-pid{pid}-{host or _host()}"


def remove_orphaned_state_dirs(parent: Path) -> list[str]:
    """Delete the local state folders in `parent` (a `<root>/barrierflow-state` folder) of
    this host whose process is dead; returns their names."""
    try:
        names = os.listdir(parent)
    except OSError:
        return []  # nothing there yet (or unreadable: nothing of ours to remove)
    removed = []
    host = _host()
    for name in names:
        owner = _OWNER.search(name)
        if owner is None or owner.group(2) != host or _is_alive(int(owner.group(1))):
            continue
        shutil.rmtree(parent / name, ignore_errors=True)
        removed.append(name)
    if removed:
        log.info("removed the local state of %d dead task process(es) in %s", len(removed), parent)
    return removed


def _host() -> str:
    """This host's name as a folder name may carry it."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname()) or "host"


def _is_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process (EPERM), or not ours to judge
    return True
