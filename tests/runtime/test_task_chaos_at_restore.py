"""What `barrierflow chaos` arms in a task's deployment (kinds restore and storage): the task
fails while it restores, before its operators open, and the storage faults it arms for its
state-file reads last only as long as its restore. StreamTask without Spark or sockets."""

from __future__ import annotations

import queue

import pytest
from test_stream_task import DOWNSTREAM, ME, _Factory, _Wire

from barrierflow import _fs
from barrierflow._clock import ManualClock
from barrierflow.errors import ChaosFailure
from barrierflow.runtime.deployment import (
    OperatorDescriptor,
    OutputEdgeDescriptor,
    TaskDescriptor,
    TaskSettings,
)
from barrierflow.runtime.network import task_channels
from barrierflow.runtime.partitioners import ForwardPartitioner
from barrierflow.runtime.task import StreamTask
from barrierflow.runtime.task_messages import DeployTask


def task(monkeypatch) -> StreamTask:
    """A one-operator task of attempt 1 with one output channel to a wire, not deployed."""
    monkeypatch.setattr(task_channels, "connect_output", lambda *args: _Wire())
    descriptor = TaskDescriptor(
        subtask=ME,
        vertex_name="EmitsOnClose",
        parallelism=1,
        max_parallelism=128,
        operators=(OperatorDescriptor("emit", "EmitsOnClose", _Factory()),),
        outputs=(OutputEdgeDescriptor(0, ForwardPartitioner(), (DOWNSTREAM,), 0),),
        inputs=(),
    )
    settings = TaskSettings("job", 1, "d", b"s", ("127.0.0.1", 1), "127.0.0.1",
                            "file:///nowhere", (ME, DOWNSTREAM))  # fmt: skip
    return StreamTask(descriptor, settings, 0, queue.SimpleQueue().put, queue.SimpleQueue(),
                      ManualClock())  # fmt: skip


def test_a_task_told_to_fail_while_restoring_raises_before_its_operators_open(monkeypatch):
    stream_task = task(monkeypatch)
    deploy = DeployTask(1, {1: ("127.0.0.1", 1)}, [], 7, {}, fail_restore="injected, restoring")

    with pytest.raises(ChaosFailure, match="injected, restoring"):
        stream_task.deploy_and_restore(deploy)

    assert stream_task.chain._state == "created"  # no operator set up, restored or opened


def test_storage_faults_armed_for_a_restore_end_with_it(monkeypatch):
    hooks = list(_fs._hooks)
    stream_task = task(monkeypatch)

    stream_task.deploy_and_restore(DeployTask(1, {1: ("127.0.0.1", 1)}, [], None, {},
                                              read_faults=2))  # fmt: skip

    assert _fs._hooks == hooks
