"""Where a subtask keeps on-disk keyed state on its host, and removing what dead tasks left.

Each subtask of each attempt gets its own folder, `<root>/barrierflow-state/<run>-<attempt>-
<vertex>.<subtask>-<pid>` (root: the backend's `local_dir`, else the task process's
temporary folder). Its chain deletes it when it closes or aborts; a task process that is
killed cannot, so every chain that opens on the host first deletes the folders whose
process is gone (never a living one: a folder of another user's process, or of a pid
this host cannot check, stays).

>>> from barrierflow.core.state_backends import EmbeddedRocksDBStateBackend
>>> from barrierflow.runtime.deployment import SubtaskId
>>> folder = local_state_dir(EmbeddedRocksDBStateBackend(local_dir="/ssd"), "ab12-3",
...                          SubtaskId(2, 1), pid=77)
>>> str(folder)
'/ssd/barrierflow-state/ab12-3-2.1-77'
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

from barrierflow.core.state_backends import StateBackend
from barrierflow.runtime.deployment import SubtaskId

log = logging.getLogger(__name__)

FOLDER = "barrierflow-state"
"""The folder below the root that holds every subtask's local state folder."""


def local_state_dir(
    backend: StateBackend, deployment_id: str, subtask: SubtaskId, pid: int | None = None
) -> Path:
    """The local state folder of `subtask` in the attempt `deployment_id` (run and attempt)
    run by process `pid` (default: this one); see the module docstring."""
    root = getattr(backend, "local_dir", None) or tempfile.gettempdir()
    return Path(root) / FOLDER / f"{deployment_id}-{subtask}-{os.getpid() if pid is None else pid}"


def remove_orphaned_state_dirs(parent: Path) -> list[str]:
    """Delete the local state folders in `parent` (a `<root>/barrierflow-state` folder) whose
    process is dead; returns their names."""
    try:
        names = os.listdir(parent)
    except OSError:
        return []  # nothing there yet (or unreadable: nothing of ours to remove)
    removed = []
    for name in names:
        pid = _pid_of(name)
        if pid is None or _is_alive(pid):
            continue
        shutil.rmtree(parent / name, ignore_errors=True)
        removed.append(name)
    if removed:
        log.info("removed the local state of %d dead task process(es) in %s", len(removed), parent)
    return removed


def _pid_of(name: str) -> int | None:
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() and "-" in name else None


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
