"""`barrierflow chaos`: a job file run twice, without and with injected failures, its
committed outputs compared.

`check` holds the runner (`ChaosCheck`: the plan, the injector, the comparison), `child` the
driver process of a run split across drivers (the failure kind driver), `processes` the
process killer. The hooks the engine offers the check stay with the engine:
`cluster/chaos_faults.py` (restore and storage faults armed through the JobMaster),
`checkpoint/chaos_faults.py` (`TransientFaults`) and `_check_run.py` (the run's own paths).
"""

from __future__ import annotations

from barrierflow.chaos.check import (
    ChaosCheck,
    ChaosError,
    ChaosResult,
    FailureInjector,
    PlannedFailure,
    plan_failures,
)
from barrierflow.chaos.processes import kill_process_tree

__all__ = [
    "ChaosCheck",
    "ChaosError",
    "ChaosResult",
    "FailureInjector",
    "PlannedFailure",
    "kill_process_tree",
    "plan_failures",
]
