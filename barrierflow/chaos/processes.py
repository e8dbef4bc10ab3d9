"""The process killer of `barrierflow chaos`'s driver kind: a driver and everything it
started die at once, as in a power cut."""

from __future__ import annotations

import contextlib
import os
import signal


def kill_process_tree(pid: int) -> None:
    """SIGKILL process `pid`, every process of its session (it leads one: started with
    start_new_session) and every descendant (pyspark's daemon makes a process group of its
    own, still in the session), all at once, as a power cut would."""
    victims = {pid}
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parents[int(entry)] = int(fields[1])
        if int(fields[3]) == pid:  # the session id
            victims.add(int(entry))
    grew = True
    while grew:
        found = {child for child, parent in parents.items() if parent in victims} - victims
        victims |= found
        grew = bool(found)
    for victim in sorted(victims):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(victim, signal.SIGKILL)
