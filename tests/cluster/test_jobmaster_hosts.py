"""Attempt and CheckpointActions see the JobMaster only through their Protocols (hosts.py).

Read statically: every attribute either module reads or calls on the JobMaster it was
handed (`master.x`, `self.master.x`, `self._master.x`) is a member its Protocol declares,
and the JobMaster has each of them once it prepared a job.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
from job_master_builder import JobHarness

from barrierflow.api.restart_strategies import RestartStrategies
from barrierflow.cluster.jobmaster import attempt, checkpoint_actions
from barrierflow.cluster.jobmaster.hosts import AttemptHost, CheckpointHost

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


@pytest.mark.parametrize(
    ("module", "protocol"),
    [(attempt, AttemptHost), (checkpoint_actions, CheckpointHost)],
)
def test_each_reaches_only_what_its_protocol_declares(module, protocol):
    reached = _reached(module)
    assert reached, "found no use of the JobMaster: the check reads the wrong names"
    assert reached <= _members(protocol), sorted(reached - _members(protocol))


def test_the_jobmaster_has_every_member_of_both(tmp_path):
    job = JobHarness(tmp_path, RestartStrategies.no_restart()).start()
    missing = sorted(n for n in _members(AttemptHost) if not hasattr(job.master, n))
    assert not missing
