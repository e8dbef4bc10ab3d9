"""PyFlink DataStream names barrierflow accepts but ignores, or refuses when the job is built,
with why: data for `barrierflow port` (it lists those a file uses, imported names and method
calls alike) and docs/porting.md (its tables; tests/porting/test_porting_table.py keeps them in
step). A PyFlink name in neither is supported when barrierflow has it, missing otherwise."""

from __future__ import annotations

__all__ = ["IGNORED", "REFUSED"]

_NO_JAVA = (
    "barrierflow runs no Java code of a job: Flink's jars hold Java connectors and formats, "
    "each PyFlink connector's counterpart here is Python; a warning names what was ignored"
)
_NO_SLOTS = (
    "each subtask is one Spark task holding a task slot of its own and Spark places the "
    "tasks, so there is nothing to share or separate; the group is kept as a name"
)

IGNORED: dict[str, str] = {
    "add_jars": _NO_JAVA,
    "add_classpaths": _NO_JAVA,
    "slot_sharing_group": _NO_SLOTS,
    "SlotSharingGroup": _NO_SLOTS,
}
"""Name -> why barrierflow accepts it and it changes nothing here."""

REFUSED: dict[str, str] = {
    "set_python_requirements": (
        "ConfigurationError: barrierflow does not install packages on the executors; install "
        "them in the executors' Python or ship a packed environment (add_python_archive)"
    ),
}
"""Name -> the error a user gets when the job is built."""
