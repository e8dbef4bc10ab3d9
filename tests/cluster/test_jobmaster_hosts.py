"""Attempt, CheckpointActions and the JobMaster's roles (start, failover, end) see the
JobMaster only through their Protocols (hosts.py).

Read statically: every attribute each module reads or calls on the JobMaster it was
handed (`master.x`, `self.master.x`, `self._master.x`) is a member its Protocol declares,
and the JobMaster has each of them once it prepared a job. The roles are objects the
JobMaster owns, not its bases.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
from job_master_builder import JobHarness

from barrierflow.api.restart_strategies import RestartStrategies
from barrierflow.cluster.jobmaster import (
    attempt,
    checkpoint_actions,
    job_end,
    job_failover,
    job_start,
)
from barrierflow.cluster.jobmaster.hosts import (
    AttemptHost,
    CheckpointHost,
    EndHost,
    FailoverHost,
    StartHost,
)
from barrierflow.cluster.jobmaster.job_master import JobMaster

ROLES = [
    (attempt, AttemptHost),
    (checkpoint_actions, CheckpointHost),
    (job_start, StartHost),
    (job_failover, FailoverHost),
    (job_end, EndHost),
]

MASTER_NAMES = {"master", "self.master", "self._master"}


def _members(protocol: type) -> set[str]:
    names: set[str] = set()
    for cls in protocol.__mro__:
        if cls.__module__ != protocol.__module__:
            continue
        names |= set(vars(cls).get("__annotations__", {}))
        names |= {n for n, v in vars(cls).items() if inspect.isfunction(v)}
    return names


def _reached(module: object) -> set[str]:
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))  # type: ignore[attr-defined]
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and ast.unparse(node.value) in MASTER_NAMES
    }


@pytest.mark.parametrize(("module", "protocol"), ROLES)
def test_each_reaches_only_what_its_protocol_declares(module, protocol):
    reached = _reached(module)
    assert reached, "found no use of the JobMaster: the check reads the wrong names"
    assert reached <= _members(protocol), sorted(reached - _members(protocol))


def test_the_jobmaster_has_every_member_of_each(tmp_path):
    job = JobHarness(tmp_path, RestartStrategies.no_restart()).start()
    members = set().union(*(_members(protocol) for _, protocol in ROLES))
    missing = sorted(n for n in members if not hasattr(job.master, n))
    assert not missing


def test_the_roles_are_objects_the_jobmaster_owns_not_its_bases():
    assert JobMaster.__bases__ == (object,)
    for module, name in [(job_start, "JobStart"), (job_failover, "JobFailover"),
                         (job_end, "JobEnd")]:  # fmt: skip
        assert getattr(module, name).__bases__ == (object,)
