"""`InputDependencyConstraint` (PyFlink's `ANY` / `ALL`): when a batch scheduler may start a
task whose inputs are not all finished. Flink 2 no longer reads it (PyFlink 2.3 exports the
enum and takes it nowhere), and barrierflow starts every task of a job at once, as one Spark
barrier stage, in streaming and batch mode alike: there is nothing for it to decide.

>>> InputDependencyConstraint.ALL.value
1
"""

from __future__ import annotations

import enum


class InputDependencyConstraint(enum.Enum):
    """Schedule a task when ANY input is consumable, or when ALL are (unused here)."""

    ANY = 0
    ALL = 1
