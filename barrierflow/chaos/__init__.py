"""`barrierflow chaos`: a job file run twice, without and with injected failures, its
committed outputs compared.

`check` holds the runner (`ChaosCheck`: the two runs), `plan` the plan of failures (pure),
`injector` the `FailureInjector` that strikes a running job, `comparison` the verdict (the
sinks' committed outputs compared as multisets), `drivers` and `child` the chaos run split
across driver processes (the failure kind driver), `processes` the process killer,
`run_placement` each run's own outputs, tables and pace (installed through the connectors'
neutral hook, connectors/placement.py). The hooks the engine offers the check stay with
the engine: `cluster/chaos_faults.py` (restore and storage faults armed through the
JobMaster) and `checkpoint/chaos_faults.py` (`TransientFaults`).
"""

from __future__ import annotations

from barrierflow.chaos.check import ChaosCheck, ChaosResult
from barrierflow.chaos.injector import FailureInjector
from barrierflow.chaos.plan import PlannedFailure, plan_failures
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
