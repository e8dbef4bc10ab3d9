"""`barrierflow chaos`: a job file run twice, without and with injected failures, its
committed outputs compared.

`check` holds the runner (`ChaosCheck`: the plan, the injector, the comparison), `child` the
driver process of a run split across drivers (the failure kind driver), `processes` the
process killer, `run_placement` each run's own outputs, tables and pace (installed through
the connectors' neutral hook, connectors/placement.py). The hooks the engine offers the
check stay with the engine: `cluster/chaos_faults.py` (restore and storage faults armed
through the JobMaster) and `checkpoint/chaos_faults.py` (`TransientFaults`).
"""

from __future__ import annotations

from barrierflow.chaos.check import (
    ChaosCheck,
    ChaosResult,
    FailureInjector,
    PlannedFailure,
    plan_failures,
)
from barrierflow.chaos.processes import kill_process_tree
from barrierflow.errors import ChaosError

__all__ = [
    "ChaosCheck",
    "ChaosError",
    "ChaosResult",
    "FailureInjector",
    "PlannedFailure",
    "kill_process_tree",
    "plan_failures",
]
